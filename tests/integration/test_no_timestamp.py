"""Records sent without a timestamp (-1) stay -1, and time retention leaves them alone.

Each client that can send "no timestamp" does it its own way: confluent-kafka passes
timestamp=-1 through to librdkafka, which writes -1 into the records but 0 as the
batch's MaxTimestamp; kafka-python and aiokafka take timestamp_ms=-1 and write -1 in
both. (timestamp=0 / None mean "now" in all three; kcat has no way to set a produce
timestamp.) Kafka recomputes MaxTimestamp from the records, so each batch is stored with
-1, the segment has no time-index entry, and retention ages it by its file's mtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from brook.broker.testing import wait_until

from .clients import (
    aiokafka_producer,
    consume_all,
    create_topic,
    kafka_python_producer,
    stored_batches,
)
from .segments import decode_segment, segments_of

CHECK_EVERY_MS = 200
WEEK_MS = 7 * 24 * 3600 * 1000
pytestmark = pytest.mark.brook_config(log_retention_check_interval_ms=CHECK_EVERY_MS)


def _confluent(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:  # one batch each
        producer.produce(topic, value=value, partition=0, timestamp=-1)
        producer.flush(10)


def _kafka_python(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = kafka_python_producer(bootstrap, linger_ms=0)
    for value in values:
        producer.send(topic, value, partition=0, timestamp_ms=-1).get(10)
    producer.close()


def _aiokafka(bootstrap: str, topic: str, values: list[bytes]) -> None:
    async def send() -> None:
        async with aiokafka_producer(bootstrap) as producer:
            for value in values:
                await producer.send_and_wait(topic, value, partition=0, timestamp_ms=-1)

    asyncio.run(send())


CLIENTS: dict[str, Callable[[str, str, list[bytes]], None]] = {
    "confluent-kafka": _confluent,
    "kafka-python": _kafka_python,
    "aiokafka": _aiokafka,
}


def _partition_dir(broker, topic: str) -> Path:
    return broker.data_dir / f"{topic}-0"


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_records_without_timestamp_are_stored_as_such(brook_broker, topic_name, client):
    create_topic(brook_broker.bootstrap, topic_name)
    values = [b"no-ts-%d" % i for i in range(3)]
    CLIENTS[client](brook_broker.bootstrap, topic_name, values)
    headers = stored_batches(brook_broker.data_dir, topic_name)
    assert [h.max_timestamp for h in headers] == [-1, -1, -1]
    # Decoded by kafka-python, CRC checked: the re-sealed batches are whole and valid.
    on_disk = [
        entry
        for path in segments_of(_partition_dir(brook_broker, topic_name))
        for entry in decode_segment(path)
    ]
    assert [r.timestamp for entry in on_disk for r in entry.records] == [-1, -1, -1]
    messages = consume_all(brook_broker.bootstrap, topic_name, 3)
    assert [m.value() for m in messages] == values
    assert {m.timestamp() for m in messages} == {(TIMESTAMP_CREATE_TIME, -1)}


def _retention_checks(broker) -> int:
    return broker.call(lambda: broker.broker.retention_checks)


def test_seven_day_retention_keeps_records_without_timestamp(brook_broker, topic_name):
    """The issue's trial: librdkafka's -1 records on a 7-day retention were all deleted
    at the next check, their batches' MaxTimestamp of 0 read as 1970."""
    bootstrap = brook_broker.bootstrap
    create_topic(
        bootstrap,
        topic_name,
        config={
            "retention.ms": str(WEEK_MS),
            "segment.bytes": "1000",
            "file.delete.delay.ms": "0",
        },
    )
    values = [b"%02d" % i + b"." * 400 for i in range(8)]
    _confluent(bootstrap, topic_name, values)
    segments = segments_of(_partition_dir(brook_broker, topic_name))
    assert len(segments) >= 3
    checks = _retention_checks(brook_broker)
    wait_until(lambda: _retention_checks(brook_broker) >= checks + 3)
    assert segments_of(_partition_dir(brook_broker, topic_name)) == segments
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "no-ts"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), 10) == (0, 8)
        # No record has a timestamp >= 0.
        [found] = consumer.offsets_for_times([TopicPartition(topic_name, 0, 0)], 10)
        assert found.offset == -1
    finally:
        consumer.close()
    assert [m.value() for m in consume_all(bootstrap, topic_name, 8)] == values
    # ListOffsets -3: Kafka answers the first record holding the max timestamp, -1 here.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = {TopicPartition(topic_name, 0): OffsetSpec.max_timestamp()}
    info = admin.list_offsets(request)[TopicPartition(topic_name, 0)].result(10)
    assert (info.offset, info.timestamp) == (0, -1)
