"""ACL checks of the APIs the client libraries have no admin call for, over the wire as
alice (SASL PLAIN, Brook's own blocking client): each request is refused with Kafka's
error and changes nothing, then served once the ACL Kafka asks for is granted.

OffsetDelete, DescribeProducers, ListTransactions, DescribeTransactions,
DescribeLogDirs, AlterReplicaLogDirs, WriteTxnMarkers, ControlledShutdown,
OffsetForLeaderEpoch, AddOffsetsToTxn, TxnOffsetCommit and DescribeTopicPartitions.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AclOperation, ResourceType
from kio.schema.add_offsets_to_txn.v3.request import AddOffsetsToTxnRequest
from kio.schema.add_partitions_to_txn.v3 import request as add_partitions3
from kio.schema.alter_replica_log_dirs.v2 import request as alter_dirs2
from kio.schema.describe_log_dirs.v4 import request as describe_dirs4
from kio.schema.describe_producers.v0 import request as producers0
from kio.schema.describe_topic_partitions.v0 import request as dtp0
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.end_txn.v3.request import EndTxnRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.list_offsets.v8 import request as list_offsets8
from kio.schema.list_transactions.v1.request import ListTransactionsRequest
from kio.schema.offset_delete.v0 import request as offset_delete0
from kio.schema.offset_for_leader_epoch.v4 import request as epoch4
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.txn_offset_commit.v3 import request as txn_commit3
from kio.schema.write_txn_markers.v1 import request as markers1

from brook.broker.client import BlockingClient
from brook.broker.tools.wire_client import describe_transactions_response
from brook.protocol.controlled_shutdown_schema import ControlledShutdownRequestV3
from brook.protocol.errors import ErrorCode

from .conftest import PLAIN_USERS, SecureBroker
from .test_acl_matrix import _group, _topic
from .test_acls import ALICE, _admin, _allow, acl_broker, started_acl_broker  # noqa: F401

CLUSTER = "kafka-cluster"
TIMEOUT = datetime.timedelta(seconds=60)


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@contextmanager
def _logged_in(broker: SecureBroker, listener: str = "SASL_PLAINTEXT") -> Iterator[BlockingClient]:
    """A wire client: alice over SASL PLAIN, or the super user on the PLAINTEXT listener."""
    host, port = broker.bootstrap(listener).split(":")
    with BlockingClient(host, int(port), "acl-wire-test") as client:
        if listener == "SASL_PLAINTEXT":
            assert client.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            token = f"\0alice\0{PLAIN_USERS['alice']}".encode()
            assert client.request(SaslAuthenticateRequest(auth_bytes=token)).error_code == 0
        yield client


def _as_alice(broker: SecureBroker, request: Any) -> Any:
    with _logged_in(broker) as client:
        return client.request(request)


def _described(client: BlockingClient, transactional_id: str) -> Any:
    """DescribeTransactions of one id, read with the start time as a plain int64 (-1 for
    no transaction under way, which kio's timestamp reader refuses)."""
    client.send(DescribeTransactionsRequest(transactional_ids=(transactional_id,)))
    (state,) = client.receive(describe_transactions_response()).transaction_states
    return state


def _as_super_user(broker: SecureBroker, request: Any) -> Any:
    with _logged_in(broker, "PLAINTEXT") as client:
        return client.request(request)


def _end_offset(broker: SecureBroker, topic: str) -> int:
    request = list_offsets8.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=(
            list_offsets8.ListOffsetsTopic(
                name=topic,
                partitions=(
                    list_offsets8.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    ),
                ),
            ),
        ),
    )
    (partition,) = _as_super_user(broker, request).topics[0].partitions
    assert partition.error_code == ErrorCode.none
    return partition.offset  # type: ignore[no-any-return]


def _end_transaction(
    client: BlockingClient, transactional_id: str, producer_id: int, epoch: int, committed: bool
) -> None:
    ended = client.request(
        EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            committed=committed,
        )
    )
    assert ended.error_code == ErrorCode.none


def _offsets(broker: SecureBroker, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, as the super user's admin client lists them."""
    admin = _admin(broker)
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {(p.topic, p.partition): p.offset for p in found.result(15).topic_partitions}


def _init_producer_id(client: BlockingClient, transactional_id: str) -> tuple[int, int]:
    answer = client.request(
        InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout=TIMEOUT)
    )
    assert answer.error_code == ErrorCode.none
    return answer.producer_id, answer.producer_epoch


# --- groups ----------------------------------------------------------------------------


def test_offset_delete_needs_delete_on_the_group_and_read_on_the_topic(acl_broker):  # noqa: F811
    name = _name("offset-delete")
    _group(acl_broker, name)  # offset 2 committed for partition 0 of the topic `name`
    request = offset_delete0.OffsetDeleteRequest(
        group_id=name,
        topics=(
            offset_delete0.OffsetDeleteRequestTopic(
                name=name,
                partitions=(offset_delete0.OffsetDeleteRequestPartition(partition_index=0),),
            ),
        ),
    )
    refused = _as_alice(acl_broker, request)
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert _offsets(acl_broker, name) == {(name, 0): 2}
    _allow(acl_broker, ALICE, ResourceType.GROUP, name, AclOperation.DELETE)
    topic_refused = _as_alice(acl_broker, request)
    assert topic_refused.error_code == ErrorCode.none
    (partition,) = topic_refused.topics[0].partitions
    assert partition.error_code == ErrorCode.topic_authorization_failed
    assert _offsets(acl_broker, name) == {(name, 0): 2}
    _allow(acl_broker, ALICE, ResourceType.TOPIC, name, AclOperation.READ)
    (partition,) = _as_alice(acl_broker, request).topics[0].partitions
    assert partition.error_code == ErrorCode.none
    assert _offsets(acl_broker, name) == {}


# --- producers and transactions --------------------------------------------------------


def test_describe_producers_needs_read_on_the_topic(acl_broker):  # noqa: F811
    name = _name("producers")
    _topic(acl_broker, name)
    producer = Producer(
        {"bootstrap.servers": acl_broker.bootstrap("PLAINTEXT"), "enable.idempotence": True}
    )
    producer.produce(name, b"idempotent", partition=0)
    assert producer.flush(15) == 0
    request = producers0.DescribeProducersRequest(
        topics=(producers0.TopicRequest(name=name, partition_indexes=(0,)),)
    )
    (refused,) = _as_alice(acl_broker, request).topics[0].partitions
    assert refused.error_code == ErrorCode.topic_authorization_failed
    assert refused.active_producers == ()
    _allow(acl_broker, ALICE, ResourceType.TOPIC, name, AclOperation.READ)
    (allowed,) = _as_alice(acl_broker, request).topics[0].partitions
    assert allowed.error_code == ErrorCode.none
    (seen,) = _as_super_user(acl_broker, request).topics[0].partitions
    assert len(allowed.active_producers) == 1
    assert allowed.active_producers == seen.active_producers


def test_transactions_are_listed_and_described_to_whom_may_describe_them(acl_broker):  # noqa: F811
    transactional_id, topic = _name("described-txn"), _name("txn-topic")
    _topic(acl_broker, topic)
    with _logged_in(acl_broker, "PLAINTEXT") as client:  # the super user's transaction
        producer_id, epoch = _init_producer_id(client, transactional_id)
        added = client.request(
            add_partitions3.AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=transactional_id,
                v3_and_below_producer_id=producer_id,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(
                    add_partitions3.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),
                ),
            )
        )
        (result,) = added.results_by_topic_v3_and_below[0].results_by_partition
        assert result.partition_error_code == ErrorCode.none
        listing = ListTransactionsRequest(state_filters=(), producer_id_filters=())
        every = {t.transactional_id for t in client.request(listing).transaction_states}
        assert transactional_id in every

        listed = _as_alice(acl_broker, listing)
        assert listed.error_code == ErrorCode.none
        assert transactional_id not in {t.transactional_id for t in listed.transaction_states}
        with _logged_in(acl_broker) as alice:
            refused = _described(alice, transactional_id)
        assert refused.error_code == ErrorCode.transactional_id_authorization_failed
        assert refused.producer_id == -1 and refused.topics == ()

        _allow(
            acl_broker,
            ALICE,
            ResourceType.TRANSACTIONAL_ID,
            transactional_id,
            AclOperation.DESCRIBE,
        )
        listed = _as_alice(acl_broker, listing)
        assert transactional_id in {t.transactional_id for t in listed.transaction_states}
        with _logged_in(acl_broker) as alice:
            described = _described(alice, transactional_id)
        assert described.error_code == ErrorCode.none
        assert (described.producer_id, described.transaction_state) == (producer_id, "Ongoing")
        # The transaction's topic alice may not describe is left out, as Kafka leaves it.
        assert described.topics == ()
        _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
        with _logged_in(acl_broker) as alice:
            described = _described(alice, transactional_id)
        assert [(t.topic, t.partitions) for t in described.topics] == [(topic, (0,))]

        _end_transaction(client, transactional_id, producer_id, epoch, committed=False)


def test_offsets_in_a_transaction_need_the_id_the_group_and_the_topic(acl_broker):  # noqa: F811
    transactional_id, group, topic = _name("offsets-txn"), _name("txn-group"), _name("txn-read")
    _topic(acl_broker, topic)

    def commit_request(producer_id: int, epoch: int) -> Any:
        return txn_commit3.TxnOffsetCommitRequest(
            transactional_id=transactional_id,
            group_id=group,
            producer_id=producer_id,
            producer_epoch=epoch,
            topics=(
                txn_commit3.TxnOffsetCommitRequestTopic(
                    name=topic,
                    partitions=(
                        txn_commit3.TxnOffsetCommitRequestPartition(
                            partition_index=0, committed_offset=3, committed_metadata=""
                        ),
                    ),
                ),
            ),
        )

    def add_offsets(producer_id: int, epoch: int) -> Any:
        return AddOffsetsToTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            group_id=group,
        )

    def commit_error(client: BlockingClient, producer_id: int, epoch: int) -> ErrorCode:
        answer = client.request(commit_request(producer_id, epoch))
        (partition,) = answer.topics[0].partitions
        return partition.error_code  # type: ignore[no-any-return]

    with _logged_in(acl_broker) as alice:
        # No Write on the transactional id: refused before anything else is looked at.
        assert alice.request(add_offsets(1, 0)).error_code == (
            ErrorCode.transactional_id_authorization_failed
        )
        assert commit_error(alice, 1, 0) == ErrorCode.transactional_id_authorization_failed
        _allow(
            acl_broker, ALICE, ResourceType.TRANSACTIONAL_ID, transactional_id, AclOperation.WRITE
        )
        producer_id, epoch = _init_producer_id(alice, transactional_id)
        # Then Read on the group.
        assert alice.request(add_offsets(producer_id, epoch)).error_code == (
            ErrorCode.group_authorization_failed
        )
        assert commit_error(alice, producer_id, epoch) == ErrorCode.group_authorization_failed
        _allow(acl_broker, ALICE, ResourceType.GROUP, group, AclOperation.READ)
        assert alice.request(add_offsets(producer_id, epoch)).error_code == ErrorCode.none
        # Then Read on each topic.
        assert commit_error(alice, producer_id, epoch) == ErrorCode.topic_authorization_failed
        _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.READ)
        assert commit_error(alice, producer_id, epoch) == ErrorCode.none
        _end_transaction(alice, transactional_id, producer_id, epoch, committed=True)
    # Only the commit that was allowed is the group's.
    assert _offsets(acl_broker, group) == {(topic, 0): 3}


# --- the cluster's own APIs --------------------------------------------------------------


def test_describe_log_dirs_needs_describe_on_the_cluster(acl_broker):  # noqa: F811
    name = _name("log-dirs")
    _topic(acl_broker, name)
    request = describe_dirs4.DescribeLogDirsRequest(
        topics=(describe_dirs4.DescribableLogDirTopic(topic=name, partitions=(0,)),)
    )
    refused = _as_alice(acl_broker, request)
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert refused.results == ()
    _allow(acl_broker, ALICE, ResourceType.BROKER, CLUSTER, AclOperation.DESCRIBE)
    allowed = _as_alice(acl_broker, request)
    assert allowed.error_code == ErrorCode.none
    (result,) = allowed.results
    assert [t.name for t in result.topics] == [name]
    assert result.topics[0].partitions[0].partition_size > 0


def test_alter_replica_log_dirs_needs_alter_on_the_cluster(acl_broker):  # noqa: F811
    name = _name("alter-dirs")
    _topic(acl_broker, name)
    everything = describe_dirs4.DescribeLogDirsRequest(topics=None)
    (log_dir,) = _as_super_user(acl_broker, everything).results
    request = alter_dirs2.AlterReplicaLogDirsRequest(
        dirs=(
            alter_dirs2.AlterReplicaLogDir(
                path="/nowhere/brook-no-such-dir",
                topics=(alter_dirs2.AlterReplicaLogDirTopic(name=name, partitions=(0,)),),
            ),
        )
    )
    (refused,) = _as_alice(acl_broker, request).results[0].partitions
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    _allow(acl_broker, ALICE, ResourceType.BROKER, CLUSTER, AclOperation.ALTER)
    # Allowed now, and looked at: the path is none of log.dirs.
    (looked_at,) = _as_alice(acl_broker, request).results[0].partitions
    assert looked_at.error_code == ErrorCode.log_dir_not_found
    (still,) = _as_super_user(acl_broker, everything).results
    assert still.log_dir == log_dir.log_dir
    assert name in {t.name for t in still.topics}


@pytest.fixture
def own_acl_broker(tmp_path: Path, pki: Any) -> Iterator[SecureBroker]:
    """A broker of the test's own: ClusterAction on the cluster, once granted to alice,
    would let her act as a broker (and answer for her elsewhere) in the shared one."""
    broker = started_acl_broker(tmp_path, pki)
    try:
        yield broker
    finally:
        broker.stop()


def test_write_txn_markers_is_a_cluster_action(own_acl_broker):
    broker = own_acl_broker
    name = _name("markers")
    _topic(broker, name)
    request = markers1.WriteTxnMarkersRequest(
        markers=(
            markers1.WritableTxnMarker(
                producer_id=987_654,
                producer_epoch=0,
                transaction_result=False,
                topics=(markers1.WritableTxnMarkerTopic(name=name, partition_indexes=(0,)),),
                coordinator_epoch=0,
            ),
        )
    )
    before = _end_offset(broker, name)
    (refused,) = _as_alice(broker, request).markers[0].topics[0].partitions
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    assert _end_offset(broker, name) == before  # no marker written
    _allow(broker, ALICE, ResourceType.BROKER, CLUSTER, AclOperation.CLUSTER_ACTION)
    (written,) = _as_alice(broker, request).markers[0].topics[0].partitions
    assert written.error_code == ErrorCode.none
    assert _end_offset(broker, name) == before + 1  # the abort marker


def test_controlled_shutdown_is_a_cluster_action(own_acl_broker):
    broker = own_acl_broker
    own_id = broker.broker.config["broker.id"]
    request = ControlledShutdownRequestV3(broker_id=own_id, broker_epoch=-1)
    refused = _as_alice(broker, request)
    assert refused.error_code == ErrorCode.cluster_authorization_failed
    _allow(broker, ALICE, ResourceType.BROKER, CLUSTER, AclOperation.CLUSTER_ACTION)
    allowed = _as_alice(broker, request)
    assert allowed.error_code == ErrorCode.none
    assert allowed.remaining_partitions == ()


def test_offset_for_leader_epoch_needs_describe_on_the_topic(acl_broker):  # noqa: F811
    name = _name("epochs")
    _topic(acl_broker, name)  # three records, leader epoch 0
    request = epoch4.OffsetForLeaderEpochRequest(
        topics=(
            epoch4.OffsetForLeaderTopic(
                topic=name,
                partitions=(epoch4.OffsetForLeaderPartition(partition=0, leader_epoch=0),),
            ),
        )
    )
    (refused,) = _as_alice(acl_broker, request).topics[0].partitions
    assert refused.error_code == ErrorCode.topic_authorization_failed
    assert refused.end_offset == -1
    # Claiming to be a follower (a replica id) does not help: ClusterAction would.
    as_follower = epoch4.OffsetForLeaderEpochRequest(replica_id=2, topics=request.topics)
    (follower_refused,) = _as_alice(acl_broker, as_follower).topics[0].partitions
    assert follower_refused.error_code == ErrorCode.topic_authorization_failed
    _allow(acl_broker, ALICE, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    (allowed,) = _as_alice(acl_broker, request).topics[0].partitions
    assert allowed.error_code == ErrorCode.none
    assert (allowed.leader_epoch, allowed.end_offset) == (0, 3)


def test_describe_topic_partitions_needs_describe_on_the_topic(acl_broker):  # noqa: F811
    name = _name("described")
    _topic(acl_broker, name)
    named = dtp0.DescribeTopicPartitionsRequest(topics=(dtp0.TopicRequest(name=name),))
    (refused,) = _as_alice(acl_broker, named).topics
    # Refused without disclosing the topic's id or partitions.
    assert (refused.error_code, refused.partitions) == (ErrorCode.topic_authorization_failed, ())
    assert refused.topic_id is None  # the zero id, as kio reads it
    # Asked for every topic, alice is not told of it at all.
    every = dtp0.DescribeTopicPartitionsRequest(topics=())
    assert name not in {topic.name for topic in _as_alice(acl_broker, every).topics}
    _allow(acl_broker, ALICE, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    (allowed,) = _as_alice(acl_broker, named).topics
    assert allowed.error_code == ErrorCode.none
    assert [p.partition_index for p in allowed.partitions] == [0]
    assert name in {topic.name for topic in _as_alice(acl_broker, every).topics}
    # Her operations on it: DESCRIBE only (bit 8 of Kafka's AclOperation codes).
    assert allowed.topic_authorized_operations == 1 << 8


# --- share groups (KIP-932) --------------------------------------------------------------


def test_share_groups_need_read_on_the_group_and_describe_or_read_on_the_topic(
    acl_broker,  # noqa: F811
):
    """ShareGroupHeartbeat: Read on the group, Describe on each subscribed topic;
    ShareFetch: Read on the group, Read on each topic (TOPIC_AUTHORIZATION_FAILED per
    partition otherwise); ShareGroupDescribe: Describe on the group."""
    from kio.schema.share_fetch.v1 import request as share_fetch1
    from kio.schema.share_group_describe.v1 import request as share_describe1
    from kio.schema.share_group_heartbeat.v1 import request as share_heartbeat1

    from tests.integration.raw_client import topic_id

    group, topic = _name("share-acl"), _name("share-topic")
    _topic(acl_broker, topic)
    heartbeat = share_heartbeat1.ShareGroupHeartbeatRequest(
        group_id=group,
        member_id="member-1",
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=(topic,),
    )
    assert _as_alice(acl_broker, heartbeat).error_code == ErrorCode.group_authorization_failed
    _allow(acl_broker, ALICE, ResourceType.GROUP, group, AclOperation.READ)
    assert _as_alice(acl_broker, heartbeat).error_code == ErrorCode.topic_authorization_failed
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.DESCRIBE)
    joined = _as_alice(acl_broker, heartbeat)
    assert joined.error_code == ErrorCode.none
    with _logged_in(acl_broker, "PLAINTEXT") as client:
        tid = topic_id(client, topic)
    fetch = share_fetch1.ShareFetchRequest(
        group_id=group,
        member_id="member-1",
        share_session_epoch=0,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=10,
        batch_size=10,
        topics=(
            share_fetch1.FetchTopic(
                topic_id=tid,
                partitions=(
                    share_fetch1.FetchPartition(partition_index=0, acknowledgement_batches=()),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )
    (refused,) = _as_alice(acl_broker, fetch).responses[0].partitions
    assert refused.error_code == ErrorCode.topic_authorization_failed
    _allow(acl_broker, ALICE, ResourceType.TOPIC, topic, AclOperation.READ)
    (allowed,) = _as_alice(acl_broker, fetch).responses[0].partitions
    assert allowed.error_code == ErrorCode.none
    describe = share_describe1.ShareGroupDescribeRequest(
        group_ids=(group,), include_authorized_operations=False
    )
    # Read on the group implies Describe, as in Kafka.
    assert _as_alice(acl_broker, describe).groups[0].error_code == ErrorCode.none
    other = share_describe1.ShareGroupDescribeRequest(
        group_ids=(_name("not-alices"),), include_authorized_operations=False
    )
    assert _as_alice(acl_broker, other).groups[0].error_code == (
        ErrorCode.group_authorization_failed
    )
    # Without Describe on a topic its members read, the group is not shown to alice.
    from confluent_kafka.admin import AclBindingFilter, AclPermissionType, ResourcePatternType

    alices_on_topic = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        ALICE,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    admin = _admin(acl_broker)
    for future in admin.delete_acls([alices_on_topic]).values():
        assert len(future.result(15)) == 2
    hidden = _as_alice(acl_broker, describe).groups[0]
    assert hidden.error_code == ErrorCode.topic_authorization_failed
    assert hidden.members == ()
