"""The coordinators' internal topics in a ZooKeeper cluster: replicated as configured
(refused with COORDINATOR_NOT_AVAILABLE while fewer brokers live), committed offsets and
a committed transaction surviving the SIGKILL of their coordinator's broker."""

from __future__ import annotations

import datetime

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brook.protocol.errors import ErrorCode
from tests.integration.processes import read_partition
from tests.integration.raw_client import RawClient

from .harness import Cluster, ZooKeeperView, eventually, metadata_of
from .topics import REPLICATION, state_of

INTERNAL = {
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.num.partitions": 1,
    # The high watermarks on disk soon, for the test to see what the followers know.
    "replica.high.watermark.checkpoint.interval.ms": 100,
    **REPLICATION,
}


def _find_coordinator(port: int, key: str, key_type: int = 0) -> tuple[int, int, str | None]:
    """(error, node id, message) of FindCoordinator v3 from the broker at `port`."""
    from kio.schema.find_coordinator.v3 import request as find3

    with RawClient(port) as client:
        response = client.request(find3.FindCoordinatorRequest(key=key, key_type=key_type))
    return response.error_code, response.node_id, response.error_message


def test_offsets_topic_waits_for_its_replication_factor(cluster: Cluster, zk: ZooKeeperView):
    first = cluster.start(1, INTERNAL)
    zk.wait_broker_ids([1])
    error, _, message = _find_coordinator(first.port, "group-a")
    assert error == ErrorCode.coordinator_not_available
    assert message is not None and "'offsets.topic.replication.factor'" in message
    assert "Number of alive brokers '1' does not meet the required replication factor '3'" in (
        message
    )
    assert zk.children("/brokers/topics") == []

    cluster.start(2, INTERNAL)
    cluster.start(3, INTERNAL)
    zk.wait_broker_ids([1, 2, 3])
    error, node, _ = eventually(
        lambda: _find_coordinator(first.port, "group-a"), lambda found: found[0] == 0
    )
    assert zk.json("/brokers/topics/__consumer_offsets")["partitions"]["0"] != []
    assert sorted(zk.json("/brokers/topics/__consumer_offsets")["partitions"]["0"]) == [1, 2, 3]
    assert node == state_of(zk, "__consumer_offsets", 0)["leader"]
    assert zk.json("/config/topics/__consumer_offsets")["config"]["cleanup.policy"] == "compact"


def test_offsets_and_a_transaction_survive_their_coordinators_kill(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = {i: cluster.start(i, INTERNAL) for i in (1, 2, 3)}
    zk.wait_broker_ids([1, 2, 3])
    for broker in brokers.values():
        eventually(lambda b=broker: sorted(metadata_of(b.port).brokers), lambda ids: len(ids) == 3)
    _, coordinator, _ = eventually(
        lambda: _find_coordinator(brokers[1].port, "shop"), lambda found: found[0] == 0
    )
    _, txn_coordinator, _ = eventually(
        lambda: _find_coordinator(brokers[1].port, "checkout", key_type=1),
        lambda found: found[0] == 0,
    )
    assert txn_coordinator == state_of(zk, "__transaction_state", 0)["leader"]
    # The data topic led by the transaction coordinator's broker: the transaction's
    # markers are written there (markers sent to other brokers are not this test's).
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    others = [i for i in brokers if i != txn_coordinator]
    admin.create_topics(
        [NewTopic("carts", 1, replica_assignment=[[txn_coordinator, *others]])],
        operation_timeout=20,
    )["carts"].result(timeout=30)

    # A committed transaction, and a group's committed offset.
    producer = Producer(
        {
            "bootstrap.servers": brokers[txn_coordinator].bootstrap,
            "transactional.id": "checkout",
            "acks": "all",
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("carts", f"item-{i}".encode(), partition=0)
    producer.commit_transaction(30)

    consumer = Consumer(
        {
            "bootstrap.servers": brokers[others[0]].bootstrap,
            "group.id": "shop",
            "enable.auto.commit": False,
        }
    )
    consumer.commit(offsets=[TopicPartition("carts", 0, 7)], asynchronous=False)
    consumer.close()

    # The followers know the commits are committed (their high watermarks passed them):
    # a coordinator loads its partition up to its high watermark when it takes over.
    watermarks = Consumer({"bootstrap.servers": brokers[1].bootstrap, "group.id": "peek"})
    internal = [("__consumer_offsets", 0), ("__transaction_state", 0)]
    ends = {
        tp: watermarks.get_watermark_offsets(TopicPartition(*tp), timeout=10)[1] for tp in internal
    }
    watermarks.close()
    for broker_id in brokers:
        for tp, end in ends.items():
            eventually(
                lambda b=broker_id, tp=tp: _checkpointed_high_watermark(brokers[b], *tp),
                lambda found, end=end: found >= end,
            )

    killed = {coordinator, txn_coordinator}
    for broker_id in killed:
        brokers[broker_id].kill()
    survivor = next(i for i in brokers if i not in killed)
    zk.wait_broker_ids(sorted(set(brokers) - killed))

    # The offset is read back through the new group coordinator.
    def committed() -> int:
        reader = Consumer(
            {
                "bootstrap.servers": brokers[survivor].bootstrap,
                "group.id": "shop",
                "enable.auto.commit": False,
            }
        )
        try:
            (found,) = reader.committed([TopicPartition("carts", 0)], timeout=10)
            return found.offset  # type: ignore[no-any-return]
        except Exception:
            return -1
        finally:
            reader.close()

    assert eventually(committed, lambda offset: offset == 7) == 7
    # The committed transaction reads as committed (librdkafka reads read_committed) from
    # the new leader of carts.
    records = read_partition(brokers[survivor].bootstrap, "carts", 0, 10)
    assert [r.value() for r in records] == [f"item-{i}".encode() for i in range(10)]
    # And the transactional id goes on at the new transaction coordinator.
    from kio.schema.init_producer_id.v4 import request as init4

    def init() -> int:
        error, node, _ = _find_coordinator(brokers[survivor].port, "checkout", key_type=1)
        if error != 0:
            return error
        with RawClient(brokers[node].port) as client:
            response = client.request(
                init4.InitProducerIdRequest(
                    transactional_id="checkout",
                    transaction_timeout=datetime.timedelta(seconds=60),
                    producer_id=-1,
                    producer_epoch=-1,
                )
            )
        return response.error_code  # type: ignore[no-any-return]

    assert eventually(init, lambda error: error == 0) == 0


def _checkpointed_high_watermark(broker, topic: str, partition: int) -> int:  # type: ignore[no-untyped-def]
    """The high watermark of a partition in the broker's replication-offset-checkpoint."""
    path = broker.data_dir / "replication-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        name, index, offset = line.split()
        if (name, int(index)) == (topic, partition):
            return int(offset)
    return -1
