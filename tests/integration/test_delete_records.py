"""DeleteRecords moves the log start offset; reads below it are out of range."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .clients import consume_all, create_topic, produce


def _delete_records(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, offset)])
    return futures[TopicPartition(topic, partition, offset)].result(10).low_watermark


def test_delete_records_moves_log_start_and_drops_segments(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"segment.bytes": "2000"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(30):  # one batch each: a batch larger than segment.bytes is refused
        producer.produce(topic_name, value=b"x" * 300, partition=0)
        producer.flush(10)
    segments_before = sorted((brook_broker.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(segments_before) > 3
    assert _delete_records(bootstrap, topic_name, 0, 17) == 17
    remaining = consume_all(bootstrap, topic_name, 13, offset=-2)  # from the earliest
    assert [m.offset() for m in remaining] == list(range(17, 30))
    segments_after = sorted((brook_broker.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(segments_after) < len(segments_before)
    assert all(int(path.stem) <= 17 for path in segments_after[:1])


def test_delete_records_to_high_watermark_and_beyond(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"v")] * 5)
    assert _delete_records(bootstrap, topic_name, 0, -1) == 5
    with pytest.raises(KafkaException) as beyond:
        _delete_records(bootstrap, topic_name, 0, 99)
    assert beyond.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_consumer_below_log_start_resets(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"v%d" % i) for i in range(10)])
    _delete_records(bootstrap, topic_name, 0, 6)
    earliest = consume_all(bootstrap, topic_name, 4, offset=2, **{"auto.offset.reset": "earliest"})
    assert [m.value() for m in earliest] == [b"v6", b"v7", b"v8", b"v9"]


def test_delete_records_refused_on_compacted_topic(brook_broker, topic_name, caplog):
    """As Kafka's Partition.deleteRecordsOnLeader: only a topic whose cleanup.policy
    includes delete may lose records this way; the log start stays where it was."""
    caplog.set_level(logging.INFO, logger="brook.apis.delete_records")
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"cleanup.policy": "compact"})
    produce(bootstrap, topic_name, [(b"k%d" % i, b"v") for i in range(5)])
    with pytest.raises(KafkaException) as refused:
        _delete_records(bootstrap, topic_name, 0, 3)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    kept = consume_all(bootstrap, topic_name, 5, offset=-2)
    assert [m.offset() for m in kept] == [0, 1, 2, 3, 4]
    assert any(
        f"DeleteRecords {topic_name}-0 to 3" in r.getMessage()
        and "can not be deleted due to the configured policy" in r.getMessage()
        for r in caplog.records
    )

    both = f"{topic_name}-both"
    create_topic(bootstrap, both, config={"cleanup.policy": "compact,delete"})
    produce(bootstrap, both, [(b"k%d" % i, b"v") for i in range(5)])
    assert _delete_records(bootstrap, both, 0, 3) == 3
