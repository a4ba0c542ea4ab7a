"""Share groups (KIP-932) over raw requests: ShareGroupHeartbeat's epochs and Kafka's
errors for bad heartbeats, share sessions' epochs (SHARE_SESSION_NOT_FOUND,
INVALID_SHARE_SESSION_EPOCH, acknowledgements refused on a session's first fetch), an
acknowledgement of records not acquired (INVALID_RECORD_STATE, nothing changed), and the
group seen by ShareGroupDescribe, ListGroups and DescribeGroups."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest
from kio.schema.describe_groups.v6 import request as describe6
from kio.schema.errors import ErrorCode
from kio.schema.list_groups.v5 import request as list5
from kio.schema.share_acknowledge.v1 import request as ack1
from kio.schema.share_fetch.v1 import request as fetch1
from kio.schema.share_group_describe.v1 import request as share_describe1
from kio.schema.share_group_heartbeat.v1 import request as heartbeat1

from brook.broker.testing import BrokerThread, wait_until

from .clients import create_topic
from .processes import Brokers
from .raw_client import RawClient, topic_id

pytestmark = pytest.mark.brook_config(
    group_share_min_heartbeat_interval_ms=200, group_share_heartbeat_interval_ms=200
)


def heartbeat(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    topics: tuple[str, ...] | None = None,
) -> Any:
    return client.request(
        heartbeat1.ShareGroupHeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            rack_id=None,
            subscribed_topic_names=topics,
        )
    )


def share_fetch(
    client: RawClient,
    group: str,
    member: str,
    epoch: int,
    topic: uuid.UUID,
    acks: tuple[Any, ...] = (),
    max_wait_ms: int = 0,
) -> Any:
    return client.request(
        fetch1.ShareFetchRequest(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait=datetime.timedelta(milliseconds=max_wait_ms),
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=100,
            batch_size=100,
            topics=(
                fetch1.FetchTopic(
                    topic_id=topic,
                    partitions=(
                        fetch1.FetchPartition(partition_index=0, acknowledgement_batches=acks),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
    )


@pytest.fixture
def topic(brook_broker: BrokerThread) -> str:
    name = f"share-raw-{uuid.uuid4().hex[:8]}"
    create_topic(brook_broker.bootstrap, name)
    brook_broker.produce(name, [b"a", b"b", b"c"], partition=0)
    return name


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "message"),
    [
        ("", 0, ("t",), "Invalid member id in the request."),
        ("m" * 37, 0, ("t",), "Invalid member id in the request."),
        ("member", 0, None, "SubscribedTopicNames must be set in first request."),
        ("member", -2, None, "MemberEpoch is invalid."),
        ("member", 0, (), "SubscribedTopicNames must be set in first request."),
    ],
)
def test_bad_heartbeats_get_invalid_request(
    brook_broker: BrokerThread, member: str, epoch: int, topics: Any, message: str
) -> None:
    with RawClient(brook_broker.port) as client:
        response = heartbeat(client, "bad-group", member, epoch, topics)
    assert response.error_code == ErrorCode.invalid_request
    assert response.error_message == message


def test_a_member_joins_heartbeats_and_leaves(brook_broker: BrokerThread, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with RawClient(brook_broker.port) as client:
        joined = heartbeat(client, group, "member-1", 0, (topic,))
        assert joined.error_code == ErrorCode.none
        assert joined.member_epoch > 0
        assert joined.heartbeat_interval == datetime.timedelta(milliseconds=200)
        (assigned,) = joined.assignment.topic_partitions
        assert (assigned.topic_id, assigned.partitions) == (topic_id(client, topic), (0,))
        again = heartbeat(client, group, "member-1", joined.member_epoch)
        assert again.error_code == ErrorCode.none and again.assignment is None
        fenced = heartbeat(client, group, "member-1", joined.member_epoch + 5)
        assert fenced.error_code == ErrorCode.fenced_member_epoch
        unknown = heartbeat(client, group, "member-2", 3)
        assert unknown.error_code == ErrorCode.unknown_member_id
        missing = heartbeat(client, f"{group}-none", "member-1", 3)
        assert missing.error_code == ErrorCode.group_id_not_found
        described = client.request(
            share_describe1.ShareGroupDescribeRequest(
                group_ids=(group, f"{group}-none"), include_authorized_operations=False
            )
        )
        found, not_found = described.groups
        assert (found.error_code, found.group_state, found.assignor_name) == (
            ErrorCode.none,
            "Stable",
            "simple",
        )
        assert [m.member_id for m in found.members] == ["member-1"]
        assert not_found.error_code == ErrorCode.group_id_not_found
        listed = client.request(list5.ListGroupsRequest(states_filter=(), types_filter=("share",)))
        assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [
            (group, "share", "share")
        ]
        classic = client.request(
            describe6.DescribeGroupsRequest(groups=(group,), include_authorized_operations=False)
        )
        assert classic.groups[0].error_code == ErrorCode.group_id_not_found
        assert classic.groups[0].error_message == f"Group {group} is not a classic group."
        left = heartbeat(client, group, "member-1", -1)
        assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
        described = client.request(
            share_describe1.ShareGroupDescribeRequest(
                group_ids=(group,), include_authorized_operations=False
            )
        )
        assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", ())


def test_share_session_epochs(brook_broker: BrokerThread, topic: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    with RawClient(brook_broker.port) as client:
        tid = topic_id(client, topic)
        no_session = share_fetch(client, group, "m", 1, tid)
        assert no_session.error_code == ErrorCode.share_session_not_found
        ack = fetch1.AcknowledgementBatch(first_offset=0, last_offset=0, acknowledge_types=(1,))
        acks_first = share_fetch(client, group, "m", 0, tid, acks=(ack,))
        assert acks_first.error_code == ErrorCode.invalid_request
        opened = share_fetch(client, group, "m", 0, tid)
        assert opened.error_code == ErrorCode.none
        wrong = share_fetch(client, group, "m", 5, tid)
        assert wrong.error_code == ErrorCode.invalid_share_session_epoch
        opening_ack = client.request(
            ack1.ShareAcknowledgeRequest(
                group_id=group, member_id="m", share_session_epoch=0, topics=()
            )
        )
        assert opening_ack.error_code == ErrorCode.invalid_share_session_epoch
        # The group started at the end (offset 3): what comes next is acquired by "m".
        brook_broker.produce(topic, [b"d", b"e"], partition=0)
        (got,) = share_fetch(client, group, "m", 1, tid, max_wait_ms=5000).responses
        assert [
            (r.first_offset, r.last_offset, r.delivery_count)
            for r in got.partitions[0].acquired_records
        ] == [(3, 4, 1)]
        # Another member may not acknowledge them; offsets below the start are done.
        assert share_fetch(client, group, "n", 0, tid).error_code == ErrorCode.none
        theirs = fetch1.AcknowledgementBatch(first_offset=3, last_offset=4, acknowledge_types=(1,))
        (refused,) = share_fetch(client, group, "n", 1, tid, acks=(theirs,)).responses
        assert refused.partitions[0].acknowledge_error_code == ErrorCode.invalid_record_state
        (done,) = share_fetch(client, group, "n", 2, tid, acks=(ack,)).responses
        assert done.partitions[0].acknowledge_error_code == ErrorCode.none
        past = fetch1.AcknowledgementBatch(first_offset=9, last_offset=9, acknowledge_types=(1,))
        (beyond,) = share_fetch(client, group, "n", 3, tid, acks=(past,)).responses
        assert beyond.partitions[0].acknowledge_error_code == ErrorCode.invalid_request
        # "m" accepts them with its final fetch, which closes its session.
        (accepted,) = share_fetch(client, group, "m", -1, tid, acks=(theirs,)).responses
        assert accepted.partitions[0].acknowledge_error_code == ErrorCode.none
        assert (
            share_fetch(client, group, "m", 3, tid).error_code == ErrorCode.share_session_not_found
        )


def test_a_share_group_is_kept_in_its_records_across_a_restart(brokers: Brokers) -> None:
    """The group's members, epochs and assignments are __consumer_offsets records: a
    broker killed and started again has the member, which goes on with its epoch."""
    broker = brokers.start()
    topic = f"share-raw-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    group = f"g-{uuid.uuid4().hex[:8]}"
    with RawClient(broker.port) as client:
        joined = heartbeat(client, group, "member-1", 0, (topic,))
        assert joined.error_code == ErrorCode.none
        assigned = {t.topic_id: t.partitions for t in joined.assignment.topic_partitions}
    broker.kill()
    restarted = brokers.restart(broker)
    with RawClient(restarted.port) as client:
        again = wait_until(
            lambda: _answered(heartbeat(client, group, "member-1", joined.member_epoch)),
            "the group loaded",
        )
        assert (again.error_code, again.member_epoch) == (ErrorCode.none, joined.member_epoch)
        described = client.request(
            share_describe1.ShareGroupDescribeRequest(
                group_ids=(group,), include_authorized_operations=False
            )
        ).groups[0]
        assert described.group_epoch == joined.member_epoch
        (member,) = described.members
        assert member.subscribed_topic_names == (topic,)
        assert {t.topic_id: t.partitions for t in member.assignment.topic_partitions} == assigned
        assert assigned and sorted(next(iter(assigned.values()))) == [0, 1]


def _answered(response: Any) -> Any:
    """The response, once the coordinator has loaded (None while it loads)."""
    loading = (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator)
    return None if response.error_code in loading else response


def test_renew_acknowledgements_need_version_2_and_an_empty_fetch(
    brook_broker: BrokerThread, topic: str
) -> None:
    from kio.schema.share_fetch.v2 import request as fetch2

    group = f"g-{uuid.uuid4().hex[:8]}"
    with RawClient(brook_broker.port) as client:
        tid = topic_id(client, topic)
        too_long = share_fetch(client, group, "m" * 37, 0, tid)
        assert (too_long.error_code, too_long.error_message) == (
            ErrorCode.invalid_request,
            "Invalid member id in the request.",
        )
        assert share_fetch(client, group, "m", 0, tid).error_code == ErrorCode.none
        brook_broker.produce(topic, [b"d"], partition=0)
        (got,) = share_fetch(client, group, "m", 1, tid, max_wait_ms=5000).responses
        (acquired,) = got.partitions[0].acquired_records
        renew = fetch1.AcknowledgementBatch(
            first_offset=acquired.first_offset,
            last_offset=acquired.last_offset,
            acknowledge_types=(4,),
        )
        (v1_renew,) = share_fetch(client, group, "m", 2, tid, acks=(renew,)).responses
        assert v1_renew.partitions[0].acknowledge_error_code == ErrorCode.invalid_request

        def v2(epoch: int, max_wait_ms: int) -> Any:
            return client.request(
                fetch2.ShareFetchRequest(
                    group_id=group,
                    member_id="m",
                    share_session_epoch=epoch,
                    max_wait=datetime.timedelta(milliseconds=max_wait_ms),
                    min_bytes=0,
                    max_bytes=0,
                    max_records=0,
                    batch_size=0,
                    share_acquire_mode=0,
                    is_renew_ack=True,
                    topics=(
                        fetch2.FetchTopic(
                            topic_id=tid,
                            partitions=(
                                fetch2.FetchPartition(
                                    partition_index=0,
                                    acknowledgement_batches=(
                                        fetch2.AcknowledgementBatch(
                                            first_offset=acquired.first_offset,
                                            last_offset=acquired.last_offset,
                                            acknowledge_types=(4,),
                                        ),
                                    ),
                                ),
                            ),
                        ),
                    ),
                    forgotten_topics_data=(),
                )
            )

        assert v2(3, 500).error_code == ErrorCode.invalid_request  # a renewal waits for nothing
        renewed = v2(3, 0)
        assert renewed.error_code == ErrorCode.none
        (partition,) = renewed.responses[0].partitions
        assert partition.acknowledge_error_code == ErrorCode.none
        assert partition.acquired_records == ()  # renewing fetches nothing


def test_share_state_batches_of_any_span_are_kept_as_ranges(
    brook_broker: BrokerThread, topic: str
) -> None:
    """WriteShareGroupState (an inter-broker API, open without an authorizer) may name a
    batch of any span: the share coordinator merges ranges, never offset by offset, so the
    write is answered at once and the broker goes on serving."""
    from kio.schema.initialize_share_group_state.v0 import request as init0
    from kio.schema.read_share_group_state.v0 import request as read0
    from kio.schema.write_share_group_state.v0 import request as write0

    group, huge = f"state-{uuid.uuid4().hex[:8]}", 2**62
    with RawClient(brook_broker.port) as client:
        tid = topic_id(client, topic)
        [initialized] = client.request(
            init0.InitializeShareGroupStateRequest(
                group_id=group,
                topics=(
                    init0.InitializeStateData(
                        topic_id=tid,
                        partitions=(
                            init0.PartitionData(partition=0, state_epoch=1, start_offset=0),
                        ),
                    ),
                ),
            )
        ).results
        assert initialized.partitions[0].error_code == ErrorCode.none
        batches = ((0, huge, 2, 1), (10, 10, 0, 2), (huge - 1, huge + 5, 4, 3))
        [written] = client.request(
            write0.WriteShareGroupStateRequest(
                group_id=group,
                topics=(
                    write0.WriteStateData(
                        topic_id=tid,
                        partitions=(
                            write0.PartitionData(
                                partition=0,
                                state_epoch=1,
                                leader_epoch=0,
                                start_offset=0,
                                state_batches=tuple(
                                    write0.StateBatch(
                                        first_offset=first,
                                        last_offset=last,
                                        delivery_state=state,
                                        delivery_count=count,
                                    )
                                    for first, last, state, count in batches
                                ),
                            ),
                        ),
                    ),
                ),
            )
        ).results
        assert written.partitions[0].error_code == ErrorCode.none
        [read] = client.request(
            read0.ReadShareGroupStateRequest(
                group_id=group,
                topics=(
                    read0.ReadStateData(
                        topic_id=tid, partitions=(read0.PartitionData(partition=0, leader_epoch=0),)
                    ),
                ),
            )
        ).results
        stored = [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in read.partitions[0].state_batches
        ]
        assert stored == [
            (0, 9, 2, 1),
            (10, 10, 0, 2),
            (11, huge - 2, 2, 1),
            (huge - 1, huge + 5, 4, 3),
        ]
