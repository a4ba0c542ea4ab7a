"""Kafka 4's consumer group protocol (KIP-848) request by request over a raw socket.

Client libraries only send what they think is right; these tests send ConsumerGroupHeartbeat
exactly as the protocol's state machine needs to be seen (a revocation acknowledged, or
not; an epoch from the past, or the future; a static instance taken) and the wrong things
a client may send, and check the errors Kafka gives, that the broker serves on, and what
the group leaves in `__consumer_offsets`.
"""

from __future__ import annotations

import datetime
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from brook.broker.testing import BrokerThread, wait_until
from brook.protocol import consumer_group_records as cgr
from brook.protocol import coordinator_records as cr
from brook.protocol.api_table import ApiKey
from brook.protocol.record_batch import iter_records

from .clients import create_topic
from .groups import consumer_group_view
from .raw_client import RawClient, make, nested, topic_id

REBALANCE_MS = 30_000
OVERRIDES = {
    "offsets.topic.num.partitions": 1,
    "group.consumer.min.session.timeout.ms": 500,
    "group.consumer.session.timeout.ms": 2000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 100,
    "group.consumer.max.size": 3,
}
pytestmark = pytest.mark.brook_config(**{k.replace(".", "_"): v for k, v in OVERRIDES.items()})

Owned = dict[uuid.UUID, list[int]]


class Member:
    """One member on its own connection, speaking ConsumerGroupHeartbeat v1 unless told;
    it keeps the epoch and assignment the coordinator gave it."""

    def __init__(self, port: int, group: str, member_id: str | None = None, **join: Any) -> None:
        self.group = group
        self.member_id = member_id or str(uuid.uuid4())
        self.client_id = f"raw-{self.member_id[:8]}"
        self.client = RawClient(port, client_id=self.client_id)
        self.epoch = 0
        self.assigned: Owned = {}
        self.join_fields = join

    def close(self) -> None:
        self.client.close()

    def heartbeat(self, version: int = 1, **fields: Any) -> Any:
        request_type = load_request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, version)
        owned = fields.pop("owned", None)
        topic_partitions = None
        if owned is not None:
            partitions_type = nested(request_type, "TopicPartitions")
            topic_partitions = tuple(
                make(partitions_type, topic_id=topic, partitions=tuple(parts))
                for topic, parts in owned.items()
            )
        timeout = fields.pop("rebalance_timeout_ms", -1)
        values = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "rebalance_timeout": datetime.timedelta(milliseconds=timeout),
            "topic_partitions": topic_partitions,
            **fields,
        }
        response = self.client.request(make(request_type, **values))
        if response.error_code == ErrorCode.none:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.assigned = {
                    tp.topic_id: sorted(tp.partitions)
                    for tp in response.assignment.topic_partitions
                }
        return response

    def join(self, **fields: Any) -> Any:
        values = {
            "rebalance_timeout_ms": REBALANCE_MS,
            "owned": {},
            **self.join_fields,
            **fields,
        }
        return self.heartbeat(**values)

    def beat(self, **fields: Any) -> Any:
        """A plain heartbeat that reports what the member owns, as clients send it."""
        return self.heartbeat(owned=fields.pop("owned", self.assigned), **fields)


@pytest.fixture
def members(brook_broker: BrokerThread) -> Iterator[list[Member]]:
    made: list[Member] = []
    yield made
    for member in made:
        member.close()


def new_member(members: list[Member], broker: BrokerThread, group: str, **join: Any) -> Member:
    member = Member(broker.port, group, **join)
    members.append(member)
    return member


def count(owned: Owned) -> int:
    return sum(len(parts) for parts in owned.values())


@pytest.fixture
def topic(brook_broker: BrokerThread, topic_name: str) -> tuple[str, uuid.UUID]:
    create_topic(brook_broker.bootstrap, topic_name, partitions=4)
    with RawClient(brook_broker.port) as client:
        return topic_name, topic_id(client, topic_name)


def test_a_member_joins_and_owns_every_partition(brook_broker, members, topic) -> None:
    name, tid = topic
    a = new_member(members, brook_broker, "solo", subscribed_topic_names=(name,))
    joined = a.join()
    assert joined.error_code == ErrorCode.none
    assert (joined.member_id, joined.member_epoch) == (a.member_id, 1)
    assert joined.heartbeat_interval == datetime.timedelta(milliseconds=100)
    assert a.assigned == {tid: [0, 1, 2, 3]}
    # Nothing changed: the answer carries no assignment.
    again = a.beat()
    assert (again.error_code, again.member_epoch, again.assignment) == (ErrorCode.none, 1, None)
    view = consumer_group_view(brook_broker.port, "solo")
    assert view is not None and view.state == "Stable"
    assert view.members == {a.client_id: {(name, p) for p in range(4)}}


def test_partitions_are_revoked_before_another_member_gets_them(
    brook_broker, members, topic
) -> None:
    name, tid = topic
    a = new_member(members, brook_broker, "handover", subscribed_topic_names=(name,))
    b = new_member(members, brook_broker, "handover", subscribed_topic_names=(name,))
    a.join()
    assert a.assigned == {tid: [0, 1, 2, 3]}
    joined = b.join()
    # b is at the new epoch with nothing yet: a still owns every partition.
    assert (joined.member_epoch, b.assigned) == (2, {})
    # a learns what to give up, and stays at its epoch until it has.
    revoke = a.beat()
    assert revoke.member_epoch == 1
    kept = a.assigned[tid]
    assert len(kept) == 2
    assert b.beat().assignment is None  # not released yet
    assert consumer_group_view(brook_broker.port, "handover").state == "Reconciling"
    # a acknowledges (it reports owning only what it kept): it moves to epoch 2...
    assert a.beat(owned={tid: kept}).member_epoch == 2
    # ...and b gets the other two.
    b.beat()
    assert sorted(b.assigned[tid] + kept) == [0, 1, 2, 3]
    view = consumer_group_view(brook_broker.port, "handover")
    assert view is not None and view.state == "Stable"


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout(
    brook_broker, members, topic
) -> None:
    name, tid = topic
    slow = new_member(
        members, brook_broker, "slow", subscribed_topic_names=(name,), rebalance_timeout_ms=500
    )
    slow.join()
    other = new_member(members, brook_broker, "slow", subscribed_topic_names=(name,))
    other.join()
    slow.beat(owned={tid: [0, 1, 2, 3]})  # told to revoke two; still owns all four
    for _ in range(3):
        # Heartbeats go on, still owning what must be revoked: only the rebalance timeout
        # ends it, not the session.
        if slow.beat(owned={tid: [0, 1, 2, 3]}).error_code:
            break
    wait_until(
        lambda: other.beat().error_code == ErrorCode.none and count(other.assigned) == 4,
        "the other member to take every partition",
        10,
    )
    assert slow.beat(owned={tid: [0, 1, 2, 3]}).error_code == ErrorCode.unknown_member_id


def test_a_silent_member_is_fenced_after_its_session(brook_broker, members, topic) -> None:
    name, _ = topic
    a = new_member(members, brook_broker, "silent", subscribed_topic_names=(name,))
    a.join()
    b = new_member(members, brook_broker, "silent", subscribed_topic_names=(name,))
    b.join()

    def alone() -> bool:
        b.beat()
        view = consumer_group_view(brook_broker.port, "silent")
        return view is not None and set(view.member_ids.values()) == {b.member_id}

    wait_until(alone, "the silent member to be fenced", 15)
    assert a.beat().error_code == ErrorCode.unknown_member_id


def test_leaving_and_a_static_members_restart(brook_broker, members, topic) -> None:
    name, tid = topic
    a = new_member(
        members, brook_broker, "static", subscribed_topic_names=(name,), instance_id="inst-a"
    )
    a.join()
    epoch = a.epoch
    # Another incarnation cannot take the instance id while a holds it.
    twin = new_member(
        members, brook_broker, "static", subscribed_topic_names=(name,), instance_id="inst-a"
    )
    assert twin.join().error_code == ErrorCode.unreleased_instance_id
    assert a.beat(instance_id="inst-a").error_code == ErrorCode.none
    # -2: away for a restart, its partitions kept for it; no new group epoch.
    away = a.heartbeat(member_epoch=-2, instance_id="inst-a")
    assert (away.error_code, away.member_epoch) == (ErrorCode.none, -2)
    back = twin.join()
    assert (back.error_code, twin.assigned) == (ErrorCode.none, {tid: [0, 1, 2, 3]})
    assert twin.epoch == epoch  # no rebalance: the same group epoch
    # The old incarnation is fenced by the new one.
    fenced = a.heartbeat(member_epoch=epoch, instance_id="inst-a")
    assert fenced.error_code == ErrorCode.fenced_instance_id
    # -1: gone for good.
    left = twin.heartbeat(member_epoch=-1, instance_id="inst-a")
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    view = consumer_group_view(brook_broker.port, "static")
    assert view is not None and (view.state, view.members) == ("Empty", {})


BAD_HEARTBEATS = [
    pytest.param({"member_id": ""}, ErrorCode.invalid_request, id="v1-empty-member-id"),
    pytest.param({"rebalance_timeout_ms": -1}, ErrorCode.invalid_request, id="no-timeout"),
    pytest.param({"owned": None}, ErrorCode.invalid_request, id="no-owned-on-join"),
    pytest.param({"subscribed_topic_names": None}, ErrorCode.invalid_request, id="no-subscription"),
    pytest.param({"member_epoch": -3}, ErrorCode.invalid_request, id="epoch-below-minus-2"),
    pytest.param({"instance_id": " "}, ErrorCode.invalid_request, id="blank-instance-id"),
    pytest.param(
        {"server_assignor": "sticky"}, ErrorCode.unsupported_assignor, id="unknown-assignor"
    ),
    pytest.param(
        {"subscribed_topic_names": None, "subscribed_topic_regex": "a(b"},
        ErrorCode.invalid_regular_expression,
        id="invalid-regex",
    ),
    pytest.param(
        # Python's re takes a backreference; RE2, Kafka's syntax, does not.
        {"subscribed_topic_names": None, "subscribed_topic_regex": r"(t)\1"},
        ErrorCode.invalid_regular_expression,
        id="not-re2",
    ),
    pytest.param({"member_epoch": 3}, ErrorCode.group_id_not_found, id="unknown-group"),
]


@pytest.mark.parametrize(("fields", "error"), BAD_HEARTBEATS)
def test_bad_heartbeats_get_kafkas_errors_and_change_nothing(
    brook_broker, members, topic, fields, error, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="brook.groups")
    name, _ = topic
    member = new_member(members, brook_broker, "bad", subscribed_topic_names=(name,))
    member_id = fields.pop("member_id", member.member_id)
    answer = member.join(member_id=member_id, **fields)
    assert answer.error_code == error
    assert answer.error_message
    assert error.name.upper() in caplog.text
    # Nothing of the group was made, and the broker serves the next member.
    assert consumer_group_view(brook_broker.port, "bad") is None
    good = new_member(members, brook_broker, "good", subscribed_topic_names=(name,))
    assert good.join().error_code == ErrorCode.none


def test_epochs_from_the_future_or_the_past_are_fenced(brook_broker, members, topic) -> None:
    name, tid = topic
    a = new_member(members, brook_broker, "epochs", subscribed_topic_names=(name,))
    a.join()
    b = new_member(members, brook_broker, "epochs", subscribed_topic_names=(name,))
    b.join()
    a.beat(owned={tid: [0, 1, 2, 3]})
    a.beat()  # revoked: a is at epoch 2, its previous epoch 1
    assert a.epoch == 2
    assert a.heartbeat(member_epoch=5, owned=a.assigned).error_code == (
        ErrorCode.fenced_member_epoch
    )
    # The previous epoch is taken (a lost response), with partitions it still has...
    assert a.heartbeat(member_epoch=1, owned=a.assigned).error_code == ErrorCode.none
    # ...but not with partitions it no longer has.
    gone = {tid: [p for p in range(4) if p not in a.assigned[tid]]}
    assert a.heartbeat(member_epoch=1, owned=gone).error_code == ErrorCode.fenced_member_epoch
    # Rejoining under the same member id while it is a member at a later epoch.
    assert a.join(member_epoch=0).error_code == ErrorCode.fenced_member_epoch
    stranger = new_member(members, brook_broker, "epochs", subscribed_topic_names=(name,))
    stranger.epoch = 2
    assert stranger.beat().error_code == ErrorCode.unknown_member_id


def test_the_group_has_a_size_limit(brook_broker, members, topic) -> None:
    name, _ = topic
    for _ in range(3):
        assert new_member(members, brook_broker, "full", subscribed_topic_names=(name,)).join()
    one_more = new_member(members, brook_broker, "full", subscribed_topic_names=(name,))
    assert one_more.join().error_code == ErrorCode.group_max_size_reached


def test_v0_lets_the_coordinator_name_the_member(brook_broker, members, topic) -> None:
    name, _ = topic
    member = new_member(members, brook_broker, "v0", subscribed_topic_names=(name,))
    answer = member.join(version=0, member_id="")
    assert answer.error_code == ErrorCode.none
    assert answer.member_id and answer.member_id != member.member_id


def offset_commit(
    client: RawClient,
    version: int,
    group: str,
    member: str,
    epoch: int,
    topic: str,
    partition: int = 0,
):
    request_type = load_request_schema(ApiKey.OFFSET_COMMIT, version)
    topic_type = nested(request_type, "OffsetCommitRequestTopic")
    partition_type = nested(request_type, "OffsetCommitRequestPartition")
    request = make(
        request_type,
        group_id=group,
        generation_id_or_member_epoch=epoch,
        member_id=member,
        group_instance_id=None,
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=(
            make(
                topic_type,
                name=topic,
                partitions=(
                    make(
                        partition_type,
                        partition_index=partition,
                        committed_offset=7,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    return client.request(request).topics[0].partitions[0].error_code


def test_offset_commits_are_checked_against_member_epochs(brook_broker, members, topic) -> None:
    name, _ = topic
    a = new_member(members, brook_broker, "commits", subscribed_topic_names=(name,))
    a.join()
    client = a.client
    assert offset_commit(client, 9, "commits", a.member_id, a.epoch, name) == ErrorCode.none
    assert offset_commit(client, 9, "commits", a.member_id, a.epoch + 1, name) == (
        ErrorCode.stale_member_epoch
    )
    assert offset_commit(client, 9, "commits", "nobody", a.epoch, name) == (
        ErrorCode.unknown_member_id
    )
    # A member of the consumer protocol commits with v9 and up.
    assert offset_commit(client, 8, "commits", a.member_id, a.epoch, name) == (
        ErrorCode.unsupported_version
    )
    # A commit from outside the group (generation -1) only into an empty group.
    assert offset_commit(client, 9, "commits", "", -1, name) == ErrorCode.unknown_member_id
    a.heartbeat(member_epoch=-1)
    assert offset_commit(client, 9, "commits", "", -1, name) == ErrorCode.none
    view = consumer_group_view(brook_broker.port, "commits")
    assert view is not None and view.state == "Empty"


def test_a_commit_with_an_older_epoch_counts_for_partitions_assigned_by_then(
    brook_broker, members, topic
) -> None:
    """Kafka 4.3's assignment epochs (KIP-1251): a commit racing the heartbeat that moved
    the member's epoch is taken for the partitions it had at the epoch it names."""
    name, tid = topic
    a = new_member(members, brook_broker, "epoch-race", subscribed_topic_names=(name,))
    a.join()
    b = new_member(members, brook_broker, "epoch-race", subscribed_topic_names=(name,))
    b.join()
    a.beat(owned={tid: [0, 1, 2, 3]})
    a.beat()  # revoked two: a moves from epoch 1 to 2, keeping two it had since epoch 1
    assert a.epoch == 2
    kept = a.assigned[tid]
    given_up = [p for p in range(4) if p not in kept]
    client = a.client
    # Epoch 1 for a partition a has had since epoch 1: taken.
    assert offset_commit(client, 9, "epoch-race", a.member_id, 1, name, kept[0]) == (ErrorCode.none)
    # Epoch 1 for a partition a no longer has: refused.
    assert offset_commit(client, 9, "epoch-race", a.member_id, 1, name, given_up[0]) == (
        ErrorCode.stale_member_epoch
    )
    b.beat()  # b takes what a gave up, at epoch 2
    assert offset_commit(b.client, 9, "epoch-race", b.member_id, 1, name, b.assigned[tid][0]) == (
        ErrorCode.stale_member_epoch
    )


def offset_fetch(client: RawClient, group: str, member: str | None, epoch: int) -> ErrorCode:
    request_type = load_request_schema(ApiKey.OFFSET_FETCH, 9)
    group_type = nested(request_type, "OffsetFetchRequestGroup")
    request = make(
        request_type,
        groups=(
            make(group_type, group_id=group, member_id=member, member_epoch=epoch, topics=None),
        ),
        require_stable=False,
    )
    return ErrorCode(client.request(request).groups[0].error_code)


def test_offset_fetch_by_a_member_checks_its_epoch(brook_broker, members, topic) -> None:
    name, _ = topic
    a = new_member(members, brook_broker, "fetches", subscribed_topic_names=(name,))
    a.join()
    assert offset_fetch(a.client, "fetches", a.member_id, a.epoch) == ErrorCode.none
    assert offset_fetch(a.client, "fetches", a.member_id, a.epoch + 3) == (
        ErrorCode.stale_member_epoch
    )
    assert offset_fetch(a.client, "fetches", "nobody", 1) == ErrorCode.unknown_member_id
    assert offset_fetch(a.client, "fetches", None, -1) == ErrorCode.none  # an admin's fetch


def join_group(client: RawClient, group: str, protocol_type: str = "consumer") -> ErrorCode:
    request_type = load_request_schema(ApiKey.JOIN_GROUP, 9)
    protocol_entry = nested(request_type, "JoinGroupRequestProtocol")
    request = make(
        request_type,
        group_id=group,
        session_timeout=datetime.timedelta(milliseconds=10_000),
        rebalance_timeout=datetime.timedelta(milliseconds=10_000),
        member_id="",
        group_instance_id=None,
        protocol_type=protocol_type,
        protocols=(make(protocol_entry, name="range", metadata=b""),),
        reason=None,
    )
    return ErrorCode(client.request(request).error_code)


def delete_group(client: RawClient, group: str) -> ErrorCode:
    request_type = load_request_schema(ApiKey.DELETE_GROUPS, 2)
    return ErrorCode(client.request(request_type(groups_names=(group,))).results[0].error_code)


def test_classic_requests_meet_a_consumer_group(brook_broker, members, topic) -> None:
    name, _ = topic
    a = new_member(members, brook_broker, "mixed", subscribed_topic_names=(name,))
    a.join()
    # A classic member may join (test_consumer_group_migration.py): first it is given a
    # member id, as in a classic group; a member of another protocol type may not.
    assert join_group(a.client, "mixed") == ErrorCode.member_id_required
    assert join_group(a.client, "mixed", "connect") == ErrorCode.inconsistent_group_protocol
    # DescribeGroups describes classic groups: v6 says this one is not (KIP-1043).
    request_type = load_request_schema(ApiKey.DESCRIBE_GROUPS, 6)
    (described,) = a.client.request(
        request_type(groups=("mixed",), include_authorized_operations=False)
    ).groups
    assert (described.error_code, described.error_message, described.group_state) == (
        ErrorCode.group_id_not_found,
        "Group mixed is not a classic group.",
        "Dead",
    )
    assert delete_group(a.client, "mixed") == ErrorCode.non_empty_group
    a.heartbeat(member_epoch=-1)
    # Empty: a classic member's JoinGroup makes it a classic group, as in Kafka.
    assert join_group(a.client, "mixed") == ErrorCode.member_id_required
    assert consumer_group_view(brook_broker.port, "mixed") is None
    b = new_member(members, brook_broker, "deleted", subscribed_topic_names=(name,))
    b.join()
    b.heartbeat(member_epoch=-1)
    assert delete_group(b.client, "deleted") == ErrorCode.none
    assert consumer_group_view(brook_broker.port, "deleted") is None


def consumer_group_records(broker: BrokerThread) -> list[tuple[int, Any, Any]]:
    """Every KIP-848 record in `__consumer_offsets` (one partition here): (type, key, value)."""
    found = []
    for segment in sorted((broker.data_dir / "__consumer_offsets-0").glob("*.log")):
        for record in iter_records(segment.read_bytes()):
            key = cr.decode_key(record.key)
            if isinstance(key, cr.UnknownRecord) and key.version in cgr.RECORD_TYPES:
                decoded = cgr.decode(key.version, record.key, record.value)
                assert decoded is not None
                found.append((key.version, *decoded))
    return found


def test_the_group_is_kept_in_kafkas_records_and_survives_a_restart(brokers, topic_name) -> None:
    broker = brokers.start(OVERRIDES)
    create_topic(broker.bootstrap, topic_name, partitions=4)
    with RawClient(broker.port) as client:
        tid = topic_id(client, topic_name)
    a = Member(broker.port, "kept", subscribed_topic_names=(topic_name,), instance_id="inst")
    try:
        a.join()
        assert a.assigned == {tid: [0, 1, 2, 3]}
        written = consumer_group_records(broker)
        assert [t for t, _, _ in written] == [5, 3, 7, 6, 8]
        _, member_key, member_value = written[0]
        assert (member_key.member_id, member_value.instance_id) == (a.member_id, "inst")
        assert member_value.subscribed_topic_names == (topic_name,)
        assert written[1][2].epoch == 1
        assert written[4][2].member_epoch == 1
        assert written[4][2].assigned_partitions[0].partitions == (0, 1, 2, 3)
    finally:
        a.close()
    before = consumer_group_view(broker.port, "kept")
    broker.kill()
    broker = brokers.restart(broker, OVERRIDES)
    assert consumer_group_view(broker.port, "kept") == before
    # The member carries on at its epoch, without rejoining.
    a = Member(broker.port, "kept", member_id=a.member_id)
    try:
        a.epoch = 1
        answer = a.beat(instance_id="inst", owned={tid: [0, 1, 2, 3]})
        assert (answer.error_code, answer.member_epoch) == (ErrorCode.none, 1)
    finally:
        a.close()


@pytest.mark.brook_config(group_coordinator_rebalance_protocols="classic")
def test_with_the_consumer_protocol_switched_off_its_apis_are_not_advertised(
    brook_broker,
) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with RawClient(brook_broker.port) as client:
        answer = client.request(
            ApiVersionsRequest(client_software_name="test", client_software_version="1")
        )
    advertised = {api.api_key for api in answer.api_keys}
    assert ApiKey.JOIN_GROUP in advertised
    assert not advertised & {ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE}
