"""Exactly-once consume-transform-produce by a member of a consumer group of Kafka 4's
protocol (KIP-848): confluent-kafka's send_offsets_to_transaction carries the member's id
and epoch (TxnOffsetCommit), checked against the group as OffsetCommit is; the offsets
count once the transaction commits, and an aborted transaction's do not."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from brook.broker.testing import BrokerThread, wait_until

from .clients import create_topic, produce
from .groups import broker_committed

pytestmark = pytest.mark.brook_config(
    group_consumer_min_heartbeat_interval_ms=100, group_consumer_heartbeat_interval_ms=100
)
TIMEOUT_S = 30


def test_a_consumer_group_member_commits_its_offsets_in_transactions(
    brook_broker: BrokerThread, topic_name: str
) -> None:
    bootstrap = brook_broker.bootstrap
    source, sink = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(bootstrap, source)
    create_topic(bootstrap, sink)
    produce(bootstrap, source, [(None, b"v%d" % i) for i in range(10)])
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-kip848",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-kip848-app"})
    try:
        consumer.subscribe([source])
        producer.init_transactions(TIMEOUT_S)
        read: list[bytes] = []

        def poll() -> bool:
            read.extend(m.value() for m in consumer.consume(10, 0.2) if not m.error())
            return len(read) >= 10

        wait_until(poll, "the input", TIMEOUT_S)
        # One transaction aborted: its offset does not count.
        producer.begin_transaction()
        producer.produce(sink, b"aborted")
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 4)], consumer.consumer_group_metadata(), TIMEOUT_S
        )
        producer.abort_transaction(TIMEOUT_S)
        assert broker_committed(brook_broker.port, "eos-kip848") == {}
        producer.begin_transaction()
        for value in read:
            producer.produce(sink, value + b"-done")
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 10)], consumer.consumer_group_metadata(), TIMEOUT_S
        )
        producer.commit_transaction(TIMEOUT_S)
        assert broker_committed(brook_broker.port, "eos-kip848") == {(source, 0): (10, "")}
    finally:
        consumer.close()
    # Once the member has left, its old epoch is no member's: the commit is refused, and
    # the transaction cannot commit.
    producer.begin_transaction()
    with pytest.raises(KafkaException):
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, 3)], _stale_metadata(bootstrap, source), TIMEOUT_S
        )
    producer.abort_transaction(TIMEOUT_S)
    assert broker_committed(brook_broker.port, "eos-kip848") == {(source, 0): (10, "")}


def _stale_metadata(bootstrap: str, source: str) -> object:
    """The group metadata of a member that has left the group."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "eos-kip848",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([source])
    wait_until(lambda: consumer.poll(0.1) is None and bool(consumer.assignment()), "a member", 30)
    metadata = consumer.consumer_group_metadata()
    consumer.close()
    return metadata
