"""Consumer groups request by request over a raw socket.

Client libraries only send what they think is right; these tests send the wrong things
on purpose (a stale generation, an unknown member, a full group, a fenced static
member) and check the errors Kafka gives, then every served version of each group API,
and what a commit leaves in `__consumer_offsets`.
"""

from __future__ import annotations

import datetime
import io
import struct
import time
from collections.abc import Iterable
from typing import Any

import pytest
from kio.index import load_entity_schema, load_request_schema, load_response_from_request
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.constants import EntityType

from brook.broker.groups.consumer_protocol import assigned_partitions
from brook.protocol import coordinator_records as cr
from brook.protocol.api_table import ApiKey
from brook.protocol.record_batch import iter_records

from .clients import create_topic
from .raw_client import RawClient
from .test_protocol_versions import make, nested, versions

NEWEST = {api: versions(api)[-1] for api in ApiKey}


def _consumer_protocol(schema: str, version: int, **fields: Any) -> bytes:
    """A struct of the consumer's embedded protocol: int16 version, then the struct."""
    entity_type = load_entity_schema(schema, version, EntityType.data)
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(entity_type)(buffer, make(entity_type, **fields))
    return buffer.getvalue()


def subscription(*topics: str) -> bytes:
    return _consumer_protocol(
        "consumer_protocol_subscription", 1, topics=topics, user_data=None, owned_partitions=()
    )


def assignment(topic: str, partitions: Iterable[int]) -> bytes:
    entity_type = load_entity_schema("consumer_protocol_assignment", 1, EntityType.data)
    topic_type = nested(entity_type, "TopicPartition")
    return _consumer_protocol(
        "consumer_protocol_assignment",
        1,
        assigned_partitions=(make(topic_type, topic=topic, partitions=tuple(partitions)),),
        user_data=None,
    )


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


class Member:
    """One group member on its own connection, speaking the newest versions unless told.

    Keeps the member id and generation the coordinator gave it, so a test can then
    send requests that are wrong in exactly one way.
    """

    def __init__(
        self,
        port: int,
        group: str,
        *,
        topics: tuple[str, ...] = ("t",),
        instance_id: str | None = None,
        protocol_type: str = "consumer",
        protocols: tuple[str, ...] = ("range",),
        session_timeout_ms: int = 10_000,
        client_id: str = "raw-member",
    ) -> None:
        self.client = RawClient(port, client_id=client_id)
        self.group = group
        self.instance_id = instance_id
        self.protocol_type = protocol_type
        self.metadata = subscription(*topics)
        self.protocols = protocols
        self.session_timeout_ms = session_timeout_ms
        self.member_id = ""
        self.generation = -1
        self._pending: Any = None

    def close(self) -> None:
        self.client.close()

    # --- JoinGroup ----------------------------------------------------------------

    def join_request(self, version: int = NEWEST[ApiKey.JOIN_GROUP], **overrides: Any) -> Any:
        request_type = load_request_schema(ApiKey.JOIN_GROUP, version)
        protocol_type = nested(request_type, "JoinGroupRequestProtocol")
        fields: dict[str, Any] = {
            "group_id": self.group,
            "session_timeout": ms(self.session_timeout_ms),
            "rebalance_timeout": ms(10_000),
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocols": tuple(
                make(protocol_type, name=name, metadata=self.metadata) for name in self.protocols
            ),
            "reason": None,
        }
        fields.update(overrides)
        return make(request_type, **fields)

    def send_join(self, version: int = NEWEST[ApiKey.JOIN_GROUP], **overrides: Any) -> None:
        """Send a JoinGroup without waiting: the coordinator parks it until the group forms."""
        self._pending = self.join_request(version, **overrides)
        self.client.send(self._pending)

    def receive_join(self) -> Any:
        response = self.client.receive(load_response_from_request(self._pending))
        self._pending = None
        if response.error_code in (ErrorCode.none, ErrorCode.member_id_required):
            self.member_id = response.member_id
        if response.error_code == ErrorCode.none:
            self.generation = response.generation_id
        return response

    def join(self, version: int = NEWEST[ApiKey.JOIN_GROUP], **overrides: Any) -> Any:
        self.send_join(version, **overrides)
        return self.receive_join()

    def join_with_id(self, version: int = NEWEST[ApiKey.JOIN_GROUP]) -> Any:
        """Join, answering MEMBER_ID_REQUIRED (v4+) with the id it hands out."""
        response = self.join(version)
        if response.error_code == ErrorCode.member_id_required:
            response = self.join(version)
        assert response.error_code == ErrorCode.none, response
        return response

    # --- SyncGroup, Heartbeat, LeaveGroup --------------------------------------------

    def sync_request(
        self,
        assignments: dict[str, bytes] | None = None,
        version: int = NEWEST[ApiKey.SYNC_GROUP],
        **overrides: Any,
    ) -> Any:
        request_type = load_request_schema(ApiKey.SYNC_GROUP, version)
        entry = nested(request_type, "SyncGroupRequestAssignment")
        fields: dict[str, Any] = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
            "protocol_type": self.protocol_type,
            "protocol_name": self.protocols[0],
            "assignments": tuple(
                make(entry, member_id=member, assignment=data)
                for member, data in (assignments or {}).items()
            ),
        }
        fields.update(overrides)
        return make(request_type, **fields)

    def send_sync(self, assignments: dict[str, bytes] | None = None, **overrides: Any) -> None:
        self._pending = self.sync_request(assignments, **overrides)
        self.client.send(self._pending)

    def receive_sync(self) -> Any:
        response = self.client.receive(load_response_from_request(self._pending))
        self._pending = None
        return response

    def sync(self, assignments: dict[str, bytes] | None = None, **overrides: Any) -> Any:
        self.send_sync(assignments, **overrides)
        return self.receive_sync()

    def heartbeat(self, version: int = NEWEST[ApiKey.HEARTBEAT], **overrides: Any) -> ErrorCode:
        fields: dict[str, Any] = {
            "group_id": self.group,
            "generation_id": self.generation,
            "member_id": self.member_id,
            "group_instance_id": self.instance_id,
        }
        fields.update(overrides)
        request = make(load_request_schema(ApiKey.HEARTBEAT, version), **fields)
        return self.client.request(request).error_code

    def leave(self, version: int = NEWEST[ApiKey.LEAVE_GROUP]) -> Any:
        request_type = load_request_schema(ApiKey.LEAVE_GROUP, version)
        if version >= 3:
            identity = make(
                nested(request_type, "MemberIdentity"),
                member_id=self.member_id,
                group_instance_id=self.instance_id,
                reason=None,
            )
            request = make(request_type, group_id=self.group, members=(identity,))
        else:
            request = make(request_type, group_id=self.group, member_id=self.member_id)
        return self.client.request(request)

    def commit(
        self,
        offsets: dict[tuple[str, int], int],
        version: int = NEWEST[ApiKey.OFFSET_COMMIT],
        metadata: str = "",
        generation: int | None = None,
        member_id: str | None = None,
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit as this member (or with the generation/member id given)."""
        request = commit_request(
            self.group,
            offsets,
            version,
            metadata,
            generation=self.generation if generation is None else generation,
            member_id=self.member_id if member_id is None else member_id,
            instance_id=self.instance_id,
        )
        return commit_errors(self.client.request(request))


def commit_request(
    group: str,
    offsets: dict[tuple[str, int], int],
    version: int = NEWEST[ApiKey.OFFSET_COMMIT],
    metadata: str = "",
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
) -> Any:
    request_type = load_request_schema(ApiKey.OFFSET_COMMIT, version)
    topic_type = nested(request_type, "OffsetCommitRequestTopic")
    partition_type = nested(request_type, "OffsetCommitRequestPartition")
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            make(
                partition_type,
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=metadata,
            )
        )
    return make(
        request_type,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        retention_time=datetime.timedelta(milliseconds=-1),
        topics=tuple(
            make(topic_type, name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )


def commit_errors(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (topic.name, partition.partition_index): partition.error_code
        for topic in response.topics
        for partition in topic.partitions
    }


# --- requests outside a membership ---------------------------------------------------


def ask(port: int, api: ApiKey, version: int | None = None, **fields: Any) -> Any:
    """One request of `api` (newest version unless told) on a fresh connection."""
    request_type = load_request_schema(api, NEWEST[api] if version is None else version)
    with RawClient(port) as client:
        return client.request(make(request_type, **fields))


def describe(port: int, *groups: str, version: int | None = None) -> dict[str, Any]:
    response = ask(
        port, ApiKey.DESCRIBE_GROUPS, version, groups=groups, include_authorized_operations=False
    )
    return {described.group_id: described for described in response.groups}


def state(port: int, group: str) -> str:
    return describe(port, group)[group].group_state


def await_state(port: int, group: str, wanted: str, timeout: float = 10) -> None:
    """Wait for the group to reach a state: a request sent on another connection (a
    parked JoinGroup) is not ordered with this test's next request."""
    deadline = time.monotonic() + timeout
    while (current := state(port, group)) != wanted:
        assert time.monotonic() < deadline, f"{group} stayed {current}, not {wanted}"
        time.sleep(0.01)


def list_groups(
    port: int, version: int | None = None, states: tuple[str, ...] = (), types: tuple[str, ...] = ()
) -> dict[str, Any]:
    response = ask(port, ApiKey.LIST_GROUPS, version, states_filter=states, types_filter=types)
    assert response.error_code == ErrorCode.none
    return {listed.group_id: listed for listed in response.groups}


def delete_groups(port: int, *groups: str, version: int | None = None) -> dict[str, ErrorCode]:
    response = ask(port, ApiKey.DELETE_GROUPS, version, groups_names=groups)
    return {result.group_id: result.error_code for result in response.results}


def offset_delete(port: int, group: str, partitions: list[tuple[str, int]]) -> Any:
    request_type = load_request_schema(ApiKey.OFFSET_DELETE, 0)
    topic_type = nested(request_type, "OffsetDeleteRequestTopic")
    partition_type = nested(request_type, "OffsetDeleteRequestPartition")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    return ask(
        port,
        ApiKey.OFFSET_DELETE,
        group_id=group,
        topics=tuple(
            make(
                topic_type,
                name=name,
                partitions=tuple(make(partition_type, partition_index=p) for p in indexes),
            )
            for name, indexes in by_topic.items()
        ),
    )


def offset_fetch(
    port: int, group: str, partitions: list[tuple[str, int]] | None, version: int | None = None
) -> dict[tuple[str, int], tuple[int, str]]:
    """(offset, metadata) per partition; -1 where nothing is committed."""
    version = NEWEST[ApiKey.OFFSET_FETCH] if version is None else version
    request_type = load_request_schema(ApiKey.OFFSET_FETCH, version)
    if partitions is None:
        topics = None
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topic_type = nested(
            request_type, "OffsetFetchRequestTopics" if version >= 8 else "OffsetFetchRequestTopic"
        )
        topics = tuple(
            make(topic_type, name=name, partition_indexes=tuple(indexes))
            for name, indexes in by_topic.items()
        )
    if version >= 8:
        group_type = nested(request_type, "OffsetFetchRequestGroup")
        groups = (make(group_type, group_id=group, member_id=None, member_epoch=-1, topics=topics),)
        response = ask(port, ApiKey.OFFSET_FETCH, version, groups=groups, require_stable=False)
        [answer] = response.groups
    else:
        answer = ask(
            port, ApiKey.OFFSET_FETCH, version, group_id=group, topics=topics, require_stable=False
        )
    if version >= 2:
        assert answer.error_code == ErrorCode.none
    return {
        (topic.name, p.partition_index): (p.committed_offset, p.metadata)
        for topic in answer.topics
        for p in topic.partitions
        if p.error_code == ErrorCode.none
    }


def form_group(
    port: int, group: str, count: int = 1, topic: str = "t", partitions: int = 6, **options: Any
) -> list[Member]:
    """`count` members that join at once and sync: a Stable group, leader first.

    The leader hands out the partitions round-robin, as the members' own assignor would.
    """
    members = [
        Member(port, group, topics=(topic,), client_id=f"raw-member-{i}", **options)
        for i in range(count)
    ]
    for member in members:
        if member.instance_id is None:
            assert member.join().error_code == ErrorCode.member_id_required
    for member in members:
        member.send_join()
    responses = [member.receive_join() for member in members]
    assert [r.error_code for r in responses] == [ErrorCode.none] * count, responses
    assert len({r.generation_id for r in responses}) == 1
    members.sort(key=lambda m: m.member_id != responses[0].leader)
    leader, followers = members[0], members[1:]
    assert leader.member_id == responses[0].leader
    plan = {
        m.member_id: assignment(topic, range(i, partitions, count)) for i, m in enumerate(members)
    }
    for follower in followers:
        follower.send_sync()
    assert leader.sync(plan).assignment == plan[leader.member_id]
    for follower in followers:
        answer = follower.receive_sync()
        assert answer.error_code == ErrorCode.none
        assert answer.assignment == plan[follower.member_id]
    return members


@pytest.fixture
def port(brook_broker: Any) -> int:
    return brook_broker.port


# --- errors -----------------------------------------------------------------------------


def test_wrong_generation_is_illegal_generation(brook_broker, port, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    [member] = form_group(port, "stale", topic=topic_name, partitions=2)
    wrong = member.generation + 1
    assert member.heartbeat(generation_id=wrong) == ErrorCode.illegal_generation
    assert member.sync(generation_id=wrong).error_code == ErrorCode.illegal_generation
    errors = member.commit({(topic_name, 0): 3, (topic_name, 1): 4}, generation=wrong)
    assert set(errors.values()) == {ErrorCode.illegal_generation}
    assert offset_fetch(port, "stale", [(topic_name, 0)]) == {(topic_name, 0): (-1, "")}
    # The same requests with the right generation pass.
    assert member.heartbeat() == ErrorCode.none
    assert member.sync().error_code == ErrorCode.none
    assert set(member.commit({(topic_name, 0): 3}).values()) == {ErrorCode.none}

    # A second member forces generation 2; the first member rejoins, and until the
    # leader syncs the group is CompletingRebalance. Kafka checks the generation before
    # the state: the old generation is ILLEGAL_GENERATION, the new one REBALANCE_IN_PROGRESS.
    newcomer = Member(port, "stale", topics=(topic_name,))
    assert newcomer.join().error_code == ErrorCode.member_id_required
    newcomer.send_join()
    await_state(port, "stale", "PreparingRebalance")
    old_generation = member.generation
    assert member.heartbeat() == ErrorCode.rebalance_in_progress
    member.send_join()
    assert member.receive_join().error_code == ErrorCode.none
    assert newcomer.receive_join().error_code == ErrorCode.none
    assert member.generation == newcomer.generation == old_generation + 1
    assert state(port, "stale") == "CompletingRebalance"
    errors = member.commit({(topic_name, 0): 5}, generation=old_generation)
    assert errors == {(topic_name, 0): ErrorCode.illegal_generation}
    assert member.commit({(topic_name, 0): 5}) == {(topic_name, 0): ErrorCode.rebalance_in_progress}
    assert member.heartbeat(generation_id=old_generation) == ErrorCode.illegal_generation
    assert offset_fetch(port, "stale", [(topic_name, 0)]) == {(topic_name, 0): (3, "")}


def test_unknown_member_and_unknown_group(brook_broker, port, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    [member] = form_group(port, "known", topic=topic_name)
    ghost = "ghost-member"
    assert member.heartbeat(member_id=ghost) == ErrorCode.unknown_member_id
    assert member.sync(member_id=ghost).error_code == ErrorCode.unknown_member_id
    assert set(member.commit({(topic_name, 0): 1}, member_id=ghost).values()) == {
        ErrorCode.unknown_member_id
    }
    assert member.join(member_id=ghost).error_code == ErrorCode.unknown_member_id
    # A simple commit (no member, generation -1) into a group with members is refused too.
    assert set(member.commit({(topic_name, 0): 1}, generation=-1, member_id="").values()) == {
        ErrorCode.unknown_member_id
    }
    leave = ask(
        port,
        ApiKey.LEAVE_GROUP,
        group_id="known",
        members=(
            make(
                nested(load_request_schema(ApiKey.LEAVE_GROUP, 5), "MemberIdentity"),
                member_id=ghost,
                group_instance_id=None,
                reason=None,
            ),
        ),
    )
    assert leave.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in leave.members] == [
        (ghost, ErrorCode.unknown_member_id)
    ]
    # A group that was never formed: every member of it is unknown.
    nobody = Member(port, "never-formed")
    nobody.member_id, nobody.generation = ghost, 1
    assert nobody.heartbeat() == ErrorCode.unknown_member_id
    assert nobody.sync().error_code == ErrorCode.unknown_member_id
    assert nobody.join().error_code == ErrorCode.unknown_member_id
    assert nobody.leave(version=0).error_code == ErrorCode.unknown_member_id
    batched = nobody.leave()  # v3+: the member is unknown, the request as such is fine
    assert batched.error_code == ErrorCode.none
    assert [(m.member_id, m.error_code) for m in batched.members] == [
        (ghost, ErrorCode.unknown_member_id)
    ]
    # The real member was not disturbed by any of it.
    assert member.heartbeat() == ErrorCode.none
    assert state(port, "known") == "Stable"
    assert describe(port, "never-formed")["never-formed"].group_state == "Dead"


@pytest.mark.brook_config(group_max_size=2)
def test_group_max_size(port, topic_name):
    members = form_group(port, "full", 2, topic=topic_name)
    third = Member(port, "full", topics=(topic_name,))
    answer = third.join()
    assert answer.error_code == ErrorCode.group_max_size_reached
    assert answer.member_id == ""
    static = Member(port, "full", topics=(topic_name,), instance_id="third-instance")
    assert static.join().error_code == ErrorCode.group_max_size_reached
    described = describe(port, "full")["full"]
    assert described.group_state == "Stable"
    assert {m.member_id for m in described.members} == {m.member_id for m in members}
    # Members already in the group keep rejoining freely.
    assert members[1].join().error_code == ErrorCode.none


@pytest.mark.brook_config(group_min_session_timeout_ms=1000, group_max_session_timeout_ms=20000)
def test_invalid_session_timeout(port):
    for session_ms in (999, 20_001):
        member = Member(port, "sessions", session_timeout_ms=session_ms)
        assert member.join().error_code == ErrorCode.invalid_session_timeout
        assert member.join(version=0).error_code == ErrorCode.invalid_session_timeout
    assert state(port, "sessions") == "Dead"  # the refused joins created nothing
    for session_ms in (1000, 20_000):
        member = Member(port, "sessions", session_timeout_ms=session_ms)
        assert member.join().error_code == ErrorCode.member_id_required


def test_member_id_required_then_rejoin(port):
    member = Member(port, "kip-394", client_id="my-client")
    first = member.join()
    assert first.error_code == ErrorCode.member_id_required
    assert first.member_id.startswith("my-client-")
    assert first.generation_id == -1
    # Not a member yet: the group has nobody in it.
    assert describe(port, "kip-394")["kip-394"].members == ()
    second = member.join()
    assert second.error_code == ErrorCode.none
    assert second.member_id == first.member_id
    assert second.leader == first.member_id
    assert second.generation_id == 1
    assert [(m.member_id, m.metadata) for m in second.members] == [
        (first.member_id, member.metadata)
    ]
    # Before v4 there is no round trip: the first join is the join.
    old = Member(port, "pre-kip-394")
    answer = old.join(version=3)
    assert answer.error_code == ErrorCode.none
    assert answer.member_id.startswith("raw-member-")
    # Static members (v5+) need no round trip either.
    static = Member(port, "static-join", instance_id="instance-a")
    assert static.join().error_code == ErrorCode.none


def test_inconsistent_group_protocol(port, topic_name):
    [member] = form_group(port, "protocols", topic=topic_name)
    other_type = Member(port, "protocols", protocol_type="connect")
    assert other_type.join().error_code == ErrorCode.inconsistent_group_protocol
    no_common = Member(port, "protocols", protocols=("roundrobin", "sticky"))
    assert no_common.join().error_code == ErrorCode.inconsistent_group_protocol
    assert member.join(protocol_type="connect").error_code == ErrorCode.inconsistent_group_protocol
    # A new group needs a protocol type and at least one protocol.
    untyped = Member(port, "untyped", protocol_type="")
    assert untyped.join().error_code == ErrorCode.inconsistent_group_protocol
    assert untyped.join(protocols=()).error_code == ErrorCode.inconsistent_group_protocol
    # SyncGroup v5 names the protocol the member was told; another one is refused.
    assert member.sync(protocol_name="roundrobin").error_code == (
        ErrorCode.inconsistent_group_protocol
    )
    assert member.sync(protocol_type="connect").error_code == ErrorCode.inconsistent_group_protocol
    # A member sharing one protocol with the group may join; the common one is chosen.
    both = Member(port, "protocols", topics=(topic_name,), protocols=("roundrobin", "range"))
    assert both.join().error_code == ErrorCode.member_id_required
    both.send_join()
    member.send_join()
    assert member.receive_join().protocol_name == "range"
    assert both.receive_join().protocol_name == "range"


def test_fenced_instance_id(brook_broker, port, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    [first] = form_group(port, "static", topic=topic_name, instance_id="instance-1")
    generation = first.generation
    # The same instance id restarting: a new member id replaces the old one, and the
    # group does not rebalance (KIP-345).
    second = Member(port, "static", topics=(topic_name,), instance_id="instance-1")
    answer = second.join()
    assert answer.error_code == ErrorCode.none
    assert answer.member_id != first.member_id
    assert answer.generation_id == generation
    # The restarted leader gets the members back but need not assign again (KIP-814).
    assert answer.leader == second.member_id
    assert answer.skip_assignment
    assert [m.member_id for m in answer.members] == [second.member_id]
    assert state(port, "static") == "Stable"
    # Every request of the old incarnation is fenced.
    assert first.heartbeat() == ErrorCode.fenced_instance_id
    assert first.sync().error_code == ErrorCode.fenced_instance_id
    assert set(first.commit({(topic_name, 0): 1}).values()) == {ErrorCode.fenced_instance_id}
    assert first.join().error_code == ErrorCode.fenced_instance_id
    assert [m.error_code for m in first.leave().members] == [ErrorCode.fenced_instance_id]
    # The new one carries on with the old assignment, in the same generation.
    assert second.heartbeat() == ErrorCode.none
    assert second.sync().assignment == assignment(topic_name, range(6))
    # An instance id the group does not know is an unknown member, not a fenced one.
    assert second.heartbeat(group_instance_id="instance-2") == ErrorCode.unknown_member_id


def test_static_leader_restart_before_v9_keeps_the_old_leader_id(port, topic_name):
    """Before JoinGroup v9 a restarted static leader cannot skip the assignment, so Kafka
    names the old member id as leader: the client then only syncs (KIP-814)."""
    [first] = form_group(port, "static-v5", topic=topic_name, instance_id="instance-1")
    second = Member(port, "static-v5", topics=(topic_name,), instance_id="instance-1")
    answer = second.join(version=5)
    assert answer.error_code == ErrorCode.none
    assert answer.leader == first.member_id
    assert answer.members == ()
    assert second.sync().assignment == assignment(topic_name, range(6))


def test_heartbeat_during_rebalance(port, topic_name):
    [member] = form_group(port, "rebalancing", topic=topic_name)
    newcomer = Member(port, "rebalancing", topics=(topic_name,))
    assert newcomer.join().error_code == ErrorCode.member_id_required
    newcomer.send_join()  # parked until the current member rejoins
    await_state(port, "rebalancing", "PreparingRebalance")
    assert member.heartbeat() == ErrorCode.rebalance_in_progress
    # A sync in that state is told the same.
    assert member.sync().error_code == ErrorCode.rebalance_in_progress
    member.send_join()
    assert member.receive_join().error_code == ErrorCode.none
    assert newcomer.receive_join().error_code == ErrorCode.none
    # Between join and sync (CompletingRebalance) heartbeats are fine.
    assert member.heartbeat() == ErrorCode.none
    assert newcomer.heartbeat() == ErrorCode.none


def test_delete_groups_errors(brook_broker, port, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    [member] = form_group(port, "busy", topic=topic_name)
    assert delete_groups(port, "busy", "never-was") == {
        "busy": ErrorCode.non_empty_group,
        "never-was": ErrorCode.group_id_not_found,
    }
    assert set(member.commit({(topic_name, 0): 9}).values()) == {ErrorCode.none}
    assert member.leave().members[0].error_code == ErrorCode.none
    assert state(port, "busy") == "Empty"
    assert delete_groups(port, "busy") == {"busy": ErrorCode.none}
    assert state(port, "busy") == "Dead"
    assert offset_fetch(port, "busy", [(topic_name, 0)]) == {(topic_name, 0): (-1, "")}
    assert delete_groups(port, "busy") == {"busy": ErrorCode.group_id_not_found}


def test_offset_delete(brook_broker, port, topic_name):
    other = topic_name + "-other"
    create_topic(brook_broker.bootstrap, topic_name)
    create_topic(brook_broker.bootstrap, other)
    [member] = form_group(port, "deleting", topic=topic_name, partitions=1)
    assert set(member.commit({(topic_name, 0): 5, (other, 0): 7}).values()) == {ErrorCode.none}
    response = offset_delete(port, "deleting", [(topic_name, 0), (other, 0)])
    assert response.error_code == ErrorCode.none
    errors = {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }
    assert errors == {
        (topic_name, 0): ErrorCode.group_subscribed_to_topic,
        (other, 0): ErrorCode.none,
    }
    assert offset_fetch(port, "deleting", None) == {(topic_name, 0): (5, "")}
    # Once nobody subscribes, the offsets can go.
    member.leave()
    assert offset_delete(port, "deleting", [(topic_name, 0)]).error_code == ErrorCode.none
    assert offset_fetch(port, "deleting", None) == {}
    assert offset_delete(port, "no-such-group", [(topic_name, 0)]).error_code == (
        ErrorCode.group_id_not_found
    )


def test_offset_metadata_too_large(brook_broker, port, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    with RawClient(port) as client:
        fits = commit_errors(
            client.request(commit_request("meta", {(topic_name, 0): 1}, metadata="m" * 4096))
        )
        too_large = commit_errors(
            client.request(commit_request("meta", {(topic_name, 1): 2}, metadata="m" * 4097))
        )
    assert fits == {(topic_name, 0): ErrorCode.none}
    assert too_large == {(topic_name, 1): ErrorCode.offset_metadata_too_large}
    assert offset_fetch(port, "meta", [(topic_name, 0), (topic_name, 1)]) == {
        (topic_name, 0): (1, "m" * 4096),
        (topic_name, 1): (-1, ""),
    }


def test_describe_unknown_group_is_dead(port):
    [described] = describe(port, "nobody-here", version=5).values()
    assert described.error_code == ErrorCode.none
    assert described.group_state == "Dead"
    assert (described.protocol_type, described.protocol_data, described.members) == ("", "", ())
    # From v6 (KIP-1043) it says so with an error, as Kafka 4 does.
    [described] = describe(port, "nobody-here", version=6).values()
    assert (described.error_code, described.error_message, described.group_state) == (
        ErrorCode.group_id_not_found,
        "Group nobody-here not found.",
        "Dead",
    )


def test_list_groups_state_filter(brook_broker, port, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    form_group(port, "stable-one", topic=topic_name)
    with RawClient(port) as client:
        client.request(commit_request("empty-one", {(topic_name, 0): 1}))
        # A commit naming only unknown topics does not create a group (Kafka drops
        # those topics before the coordinator sees the request).
        client.request(commit_request("not-created", {("no-such-topic", 0): 1}))
    assert set(list_groups(port)) == {"stable-one", "empty-one"}
    assert set(list_groups(port, states=("Empty",))) == {"empty-one"}
    assert set(list_groups(port, states=("stable",))) == {"stable-one"}
    assert set(list_groups(port, states=("Stable", "Empty"))) == {"stable-one", "empty-one"}
    assert list_groups(port, states=("PreparingRebalance",)) == {}
    assert set(list_groups(port, types=("classic",))) == {"stable-one", "empty-one"}
    assert list_groups(port, types=("consumer",)) == {}


@pytest.mark.brook_config(group_initial_rebalance_delay_ms=0)
def test_three_members_stable_quickly(port, topic_name):
    started = time.monotonic()
    members = form_group(port, "quick", 3, topic=topic_name)
    elapsed = time.monotonic() - started
    described = describe(port, "quick")["quick"]
    assert described.group_state == "Stable"
    assert len(described.members) == 3
    assert {m.generation for m in members} == {1}  # one rebalance, not one per member
    assert elapsed < 5, f"three members took {elapsed:.2f} s to reach Stable"


# --- __consumer_offsets -----------------------------------------------------------------


def consumer_offsets_records(data_dir: Any, group: str) -> list[tuple[Any, Any]]:
    """(key, value) of every record in the group's __consumer_offsets partition, in order."""
    partition = cr.group_partition(group, 50)
    decoded = []
    for segment in sorted((data_dir / f"__consumer_offsets-{partition}").glob("*.log")):
        for record in iter_records(segment.read_bytes()):
            key = cr.decode_key(record.key)
            decoded.append((key, cr.decode_value(key, record.value)))
    return [(key, value) for key, value in decoded if getattr(key, "group", None) == group]


def test_consumer_offsets_records_decode(brook_broker, port, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    leader, follower = form_group(port, "audited", 2, topic=topic_name, partitions=2)
    errors = leader.commit({(topic_name, 0): 42, (topic_name, 1): 7}, metadata="checkpoint-a")
    assert set(errors.values()) == {ErrorCode.none}

    records = consumer_offsets_records(brook_broker.data_dir, "audited")
    offsets = {k: v for k, v in records if isinstance(k, cr.OffsetCommitKey)}
    committed = offsets[cr.OffsetCommitKey("audited", topic_name, 0)]
    assert (committed.offset, committed.metadata) == (42, "checkpoint-a")
    assert committed.commit_timestamp > 0
    assert offsets[cr.OffsetCommitKey("audited", topic_name, 1)].offset == 7
    groups = [v for k, v in records if isinstance(k, cr.GroupMetadataKey)]
    stable = groups[-1]
    assert (stable.protocol_type, stable.protocol, stable.leader) == (
        "consumer",
        "range",
        leader.member_id,
    )
    assert stable.generation == leader.generation
    members = {m.member_id: m for m in stable.members}
    assert set(members) == {leader.member_id, follower.member_id}
    for member, partitions in ((leader, [0]), (follower, [1])):
        stored = members[member.member_id]
        assert stored.subscription == member.metadata
        assert assigned_partitions(stored.assignment) == {topic_name: partitions}
        assert stored.session_timeout == 10_000
        assert stored.client_host == "/127.0.0.1"
    assert {m.client_id for m in stable.members} == {"raw-member-0", "raw-member-1"}

    # Both leave: the empty group is recorded in the next generation, without members.
    follower.leave()
    leader.leave()
    empty = [
        v
        for k, v in consumer_offsets_records(brook_broker.data_dir, "audited")
        if isinstance(k, cr.GroupMetadataKey)
    ][-1]
    assert (empty.members, empty.protocol, empty.leader) == ([], None, None)
    assert empty.generation > stable.generation

    # Deleting the group writes tombstones for its offsets and its metadata.
    assert delete_groups(port, "audited") == {"audited": ErrorCode.none}
    tail = consumer_offsets_records(brook_broker.data_dir, "audited")[-3:]
    assert {key for key, _ in tail} == {
        cr.OffsetCommitKey("audited", topic_name, 0),
        cr.OffsetCommitKey("audited", topic_name, 1),
        cr.GroupMetadataKey("audited"),
    }
    assert [value for _, value in tail] == [None, None, None]


# --- every served version ---------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.FIND_COORDINATOR))
def test_find_coordinator_every_version(brook_broker, port, version):
    response = ask(
        port, ApiKey.FIND_COORDINATOR, version, key="g", key_type=0, coordinator_keys=("g", "h")
    )
    if version >= 4:
        found = [(c.key, c.node_id, c.host, c.port, c.error_code) for c in response.coordinators]
        assert found == [(key, 0, "127.0.0.1", port, ErrorCode.none) for key in ("g", "h")]
    else:
        found = (response.node_id, response.host, response.port, response.error_code)
        assert found == (0, "127.0.0.1", port, ErrorCode.none)
    # The first lookup creates the offsets topic with Kafka's default 50 partitions.
    assert (brook_broker.data_dir / "__consumer_offsets-49").is_dir()


@pytest.mark.parametrize("version", versions(ApiKey.JOIN_GROUP))
def test_join_group_every_version(port, version):
    member = Member(port, f"join-v{version}")
    answer = member.join(version)
    if version >= 4:
        assert answer.error_code == ErrorCode.member_id_required
        answer = member.join(version)
    assert answer.error_code == ErrorCode.none
    assert (answer.generation_id, answer.leader) == (1, member.member_id)
    assert answer.protocol_name == "range"
    if version >= 7:
        assert answer.protocol_type == "consumer"
    assert [(m.member_id, m.metadata) for m in answer.members] == [
        (member.member_id, member.metadata)
    ]
    # Rejoining before SyncGroup (a lost response) gets the same generation back...
    again = member.join(version)
    assert (again.error_code, again.generation_id, again.leader) == (
        ErrorCode.none,
        1,
        member.member_id,
    )
    assert len(again.members) == 1
    # ...while a leader rejoining a Stable group starts the next one.
    assert member.sync({member.member_id: assignment("t", [0])}).error_code == ErrorCode.none
    again = member.join(version)
    assert (again.error_code, again.generation_id) == (ErrorCode.none, 2)
    if version >= 5:
        static = Member(port, f"join-static-v{version}", instance_id="instance")
        answer = static.join(version)
        assert answer.error_code == ErrorCode.none
        assert [m.group_instance_id for m in answer.members] == ["instance"]


@pytest.mark.parametrize("version", versions(ApiKey.SYNC_GROUP))
def test_sync_group_every_version(port, version):
    members = [Member(port, f"sync-v{version}") for _ in range(2)]
    for member in members:
        assert member.join().error_code == ErrorCode.member_id_required
    for member in members:
        member.send_join()
    leader_id = {member.receive_join().leader for member in members}.pop()
    # Whichever join the coordinator took first leads.
    leader, follower = sorted(members, key=lambda m: m.member_id != leader_id)
    plan = {leader.member_id: assignment("t", [0]), follower.member_id: assignment("t", [1])}
    follower.send_sync(version=version)
    answer = leader.sync(plan, version=version)
    assert (answer.error_code, answer.assignment) == (ErrorCode.none, plan[leader.member_id])
    answer = follower.receive_sync()
    assert (answer.error_code, answer.assignment) == (ErrorCode.none, plan[follower.member_id])
    if version >= 5:
        assert (answer.protocol_type, answer.protocol_name) == ("consumer", "range")
    # Once Stable, a sync just returns the member's assignment again.
    again = follower.sync(version=version)
    assert again.assignment == plan[follower.member_id]
    assert follower.sync(version=version, generation_id=99).error_code == (
        ErrorCode.illegal_generation
    )


@pytest.mark.parametrize("version", versions(ApiKey.HEARTBEAT))
def test_heartbeat_every_version(port, version):
    [member] = form_group(port, f"heartbeat-v{version}")
    assert member.heartbeat(version) == ErrorCode.none
    assert member.heartbeat(version, generation_id=member.generation + 1) == (
        ErrorCode.illegal_generation
    )
    assert member.heartbeat(version, member_id="ghost") == ErrorCode.unknown_member_id


@pytest.mark.parametrize("version", versions(ApiKey.LEAVE_GROUP))
def test_leave_group_every_version(port, version):
    group = f"leave-v{version}"
    [member] = form_group(port, group)
    answer = member.leave(version)
    assert answer.error_code == ErrorCode.none
    if version >= 3:
        assert [(m.member_id, m.error_code) for m in answer.members] == [
            (member.member_id, ErrorCode.none)
        ]
    assert state(port, group) == "Empty"
    again = member.leave(version)
    if version >= 3:
        assert [m.error_code for m in again.members] == [ErrorCode.unknown_member_id]
    else:
        assert again.error_code == ErrorCode.unknown_member_id


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_COMMIT))
def test_offset_commit_every_version(brook_broker, port, topic_name, version):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    with RawClient(port) as client:
        simple = client.request(
            commit_request(f"simple-v{version}", {(topic_name, 0): 11}, version, "by hand")
        )
    assert commit_errors(simple) == {(topic_name, 0): ErrorCode.none}
    assert offset_fetch(port, f"simple-v{version}", [(topic_name, 0)]) == {
        (topic_name, 0): (11, "by hand")
    }
    [member] = form_group(port, f"managed-v{version}", topic=topic_name, partitions=2)
    assert member.commit({(topic_name, 1): 22}, version) == {(topic_name, 1): ErrorCode.none}
    assert offset_fetch(port, f"managed-v{version}", [(topic_name, 1)]) == {
        (topic_name, 1): (22, "")
    }
    missing = member.commit({("no-such-topic", 0): 1}, version)
    assert missing == {("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
    # A member of a group that does not exist: GROUP_ID_NOT_FOUND from v9, before that
    # ILLEGAL_GENERATION.
    with RawClient(port) as client:
        orphan = client.request(
            commit_request("no-group", {(topic_name, 0): 1}, version, generation=3, member_id="m")
        )
    expected = ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
    assert commit_errors(orphan) == {(topic_name, 0): expected}


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FETCH))
def test_offset_fetch_every_version(brook_broker, port, topic_name, version):
    create_topic(brook_broker.bootstrap, topic_name, partitions=3)
    with RawClient(port) as client:
        client.request(commit_request("fetched", {(topic_name, 0): 5, (topic_name, 1): 6}, 9, "m"))
    wanted = [(topic_name, 0), (topic_name, 1), (topic_name, 2)]
    assert offset_fetch(port, "fetched", wanted, version) == {
        (topic_name, 0): (5, "m"),
        (topic_name, 1): (6, "m"),
        (topic_name, 2): (-1, ""),
    }
    assert offset_fetch(port, "unknown-group", wanted[:1], version) == {(topic_name, 0): (-1, "")}
    if version >= 2:  # null topics: everything the group committed
        assert offset_fetch(port, "fetched", None, version) == {
            (topic_name, 0): (5, "m"),
            (topic_name, 1): (6, "m"),
        }
    if version >= 8:  # several groups in one request
        request_type = load_request_schema(ApiKey.OFFSET_FETCH, version)
        group_type = nested(request_type, "OffsetFetchRequestGroup")
        response = ask(
            port,
            ApiKey.OFFSET_FETCH,
            version,
            groups=tuple(
                make(group_type, group_id=g, member_id=None, member_epoch=-1, topics=None)
                for g in ("fetched", "unknown-group")
            ),
            require_stable=False,
        )
        found = {g.group_id: sum(len(t.partitions) for t in g.topics) for g in response.groups}
        assert found == {"fetched": 2, "unknown-group": 0}


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_GROUPS))
def test_describe_groups_every_version(brook_broker, port, topic_name, version):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    instance = "described-instance" if version >= 4 else None
    leader, follower = form_group(
        port, "described", 2, topic=topic_name, partitions=2, instance_id=None
    )
    described = describe(port, "described", "unknown", version=version)
    group = described["described"]
    assert (group.error_code, group.group_state) == (ErrorCode.none, "Stable")
    assert (group.protocol_type, group.protocol_data) == ("consumer", "range")
    members = {m.member_id: m for m in group.members}
    assert set(members) == {leader.member_id, follower.member_id}
    for member, partitions in ((leader, [0]), (follower, [1])):
        shown = members[member.member_id]
        assert shown.client_id.startswith("raw-member-")
        assert shown.client_host == "/127.0.0.1"
        assert shown.member_metadata == member.metadata
        assert assigned_partitions(shown.member_assignment) == {topic_name: partitions}
    unknown = described["unknown"]
    assert (unknown.error_code, unknown.group_state, unknown.members) == (
        ErrorCode.group_id_not_found if version >= 6 else ErrorCode.none,
        "Dead",
        (),
    )
    if instance is not None:
        [static] = form_group(port, "described-static", topic=topic_name, instance_id=instance)
        [shown] = describe(port, "described-static", version=version)["described-static"].members
        assert (shown.member_id, shown.group_instance_id) == (static.member_id, instance)


@pytest.mark.parametrize("version", versions(ApiKey.LIST_GROUPS))
def test_list_groups_every_version(brook_broker, port, topic_name, version):
    create_topic(brook_broker.bootstrap, topic_name)
    form_group(port, "listed-stable", topic=topic_name)
    with RawClient(port) as client:
        client.request(commit_request("listed-simple", {(topic_name, 0): 1}))
    listed = list_groups(port, version)
    assert {g: x.protocol_type for g, x in listed.items()} == {
        "listed-stable": "consumer",
        "listed-simple": "",
    }
    if version >= 4:
        assert {g: x.group_state for g, x in listed.items()} == {
            "listed-stable": "Stable",
            "listed-simple": "Empty",
        }
        assert set(list_groups(port, version, states=("Empty",))) == {"listed-simple"}
    if version >= 5:
        assert {x.group_type for x in listed.values()} == {"classic"}
        assert list_groups(port, version, types=("share",)) == {}


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_GROUPS))
def test_delete_groups_every_version(brook_broker, port, topic_name, version):
    create_topic(brook_broker.bootstrap, topic_name)
    form_group(port, "in-use", topic=topic_name)
    with RawClient(port) as client:
        client.request(commit_request("deletable", {(topic_name, 0): 1}))
    assert delete_groups(port, "deletable", "in-use", "absent", version=version) == {
        "deletable": ErrorCode.none,
        "in-use": ErrorCode.non_empty_group,
        "absent": ErrorCode.group_id_not_found,
    }
    assert set(list_groups(port)) == {"in-use"}
