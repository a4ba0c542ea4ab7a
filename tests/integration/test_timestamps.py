"""Timestamps as Kafka defines them: KIP-937 bounds, LogAppendTime, offsets by time.

The edges are probed with a broker whose clock the test holds still, so "exactly at
the bound" and "one millisecond over" mean what they say.
"""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kio.schema.produce.v9 import request as produce9

from brook.broker.testing import BrokerThread
from brook.protocol.compression import Codec
from brook.protocol.record_batch import Record, build_batch

from .clients import consume_all, create_topic
from .raw_client import RawClient

FROZEN_NOW = 1_800_000_000_000
HOUR = 3_600_000


@pytest.fixture
def frozen_broker(tmp_path):
    broker = BrokerThread(tmp_path / "data", clock=lambda: FROZEN_NOW).start()
    try:
        yield broker
    finally:
        broker.stop()


def _produce_raw(broker, topic: str, batch: bytes):
    request = produce9.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            produce9.TopicProduceData(
                name=topic, partition_data=(produce9.PartitionProduceData(index=0, records=batch),)
            ),
        ),
    )
    with RawClient(broker.port) as client:
        return client.request(request).responses[0].partition_responses[0]


def _batch(timestamps: list[int], codec: int = Codec.NONE) -> bytes:
    return build_batch(
        [Record(i, ts, b"k", b"v%d" % i) for i, ts in enumerate(timestamps)], codec=codec
    )


def _stored(broker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ts"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    finally:
        consumer.close()


def test_after_bound_is_inclusive_and_one_ms_over_fails(frozen_broker, topic_name):
    create_topic(frozen_broker.bootstrap, topic_name)
    at_bound = _produce_raw(frozen_broker, topic_name, _batch([FROZEN_NOW + HOUR]))
    assert at_bound.error_code.value == 0
    over = _produce_raw(frozen_broker, topic_name, _batch([FROZEN_NOW, FROZEN_NOW + HOUR + 1]))
    assert over.error_code.value == 32  # INVALID_TIMESTAMP
    # Kafka's RecordValidationException: a fixed message, and one error per bad record.
    assert over.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [(e.batch_index, e.batch_index_error_message) for e in over.record_errors] == [
        (
            1,
            f"Timestamp {FROZEN_NOW + HOUR + 1} of message with offset 1 is out of range."
            f" The timestamp should be within [{FROZEN_NOW - (2**63 - 1)}, {FROZEN_NOW + HOUR}]",
        )
    ]
    assert _stored(frozen_broker, topic_name) == 1  # nothing of the rejected batch


def test_before_bound_when_set(frozen_broker, topic_name):
    create_topic(
        frozen_broker.bootstrap, topic_name, config={"message.timestamp.before.max.ms": "60000"}
    )
    ok = _produce_raw(frozen_broker, topic_name, _batch([FROZEN_NOW - 60_000]))
    assert ok.error_code.value == 0
    late = _produce_raw(frozen_broker, topic_name, _batch([FROZEN_NOW - 60_001]))
    assert late.error_code.value == 32
    assert [(e.batch_index, e.batch_index_error_message) for e in late.record_errors] == [
        (
            0,
            f"Timestamp {FROZEN_NOW - 60_001} of message with offset 0 is out of range."
            f" The timestamp should be within [{FROZEN_NOW - 60_000}, {FROZEN_NOW + HOUR}]",
        )
    ]


def test_deprecated_difference_key_applies_where_new_keys_are_unset(frozen_broker, topic_name):
    create_topic(
        frozen_broker.bootstrap, topic_name, config={"message.timestamp.difference.max.ms": "1000"}
    )
    assert (
        _produce_raw(frozen_broker, topic_name, _batch([FROZEN_NOW + 1000])).error_code.value == 0
    )
    assert (
        _produce_raw(frozen_broker, topic_name, _batch([FROZEN_NOW + 1001])).error_code.value == 32
    )
    assert (
        _produce_raw(frozen_broker, topic_name, _batch([FROZEN_NOW - 1001])).error_code.value == 32
    )


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.ZSTD])
def test_one_bad_record_in_a_big_compressed_batch_rejects_all(frozen_broker, topic_name, codec):
    create_topic(frozen_broker.bootstrap, topic_name)
    timestamps = [FROZEN_NOW - i for i in range(2000)]
    timestamps[1234] = FROZEN_NOW + HOUR + 1
    result = _produce_raw(frozen_broker, topic_name, _batch(timestamps, codec))
    assert result.error_code.value == 32
    assert [e.batch_index for e in result.record_errors] == [1234]
    assert _stored(frozen_broker, topic_name) == 0


def test_log_append_time_overwrites_batch_timestamps(frozen_broker, topic_name):
    create_topic(
        frozen_broker.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"}
    )
    for codec in (Codec.NONE, Codec.LZ4):
        result = _produce_raw(frozen_broker, topic_name, _batch([5, 6, 7], codec))
        assert result.error_code.value == 0
        assert round(result.log_append_time.timestamp() * 1000) == FROZEN_NOW
    messages = consume_all(frozen_broker.bootstrap, topic_name, 6)
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    assert {m.timestamp() for m in messages} == {(TIMESTAMP_LOG_APPEND_TIME, FROZEN_NOW)}


# --- what each client sees --------------------------------------------------------------


DISORDERED = [5_000, 1_000, 9_000, 3_000, 7_000]  # offsets 0-4, timestamps out of order


def _disordered_topic(broker, topic: str, base: int) -> None:
    """One batch per record, across two segments, timestamps going backwards."""
    create_topic(broker.bootstrap, topic, config={"segment.bytes": "200"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i, delta in enumerate(DISORDERED):
        producer.produce(topic, value=b"r%d" % i, partition=0, timestamp=base + delta)
        producer.flush(10)


# Earliest offset whose timestamp >= T, for T relative to base.
EXPECTED = {0: 0, 1_000: 0, 5_001: 2, 7_000: 2, 9_000: 2, 9_001: None}


def test_offsets_for_times_confluent(brook_broker, topic_name):
    base = int(time.time() * 1000) - 60_000
    _disordered_topic(brook_broker, topic_name, base)
    consumer = Consumer({"bootstrap.servers": brook_broker.bootstrap, "group.id": "ts"})
    try:
        for delta, expected in EXPECTED.items():
            [found] = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + delta)], 10)
            assert found.offset == (-1 if expected is None else expected), delta
    finally:
        consumer.close()


def test_offsets_for_times_kafka_python(brook_broker, topic_name):
    base = int(time.time() * 1000) - 60_000
    _disordered_topic(brook_broker, topic_name, base)
    consumer = KafkaConsumer(bootstrap_servers=brook_broker.bootstrap)
    partition = KpTopicPartition(topic_name, 0)
    try:
        for delta, expected in EXPECTED.items():
            found = consumer.offsets_for_times({partition: base + delta})[partition]
            if expected is None:
                assert found is None
            else:
                assert found.offset == expected, delta
    finally:
        consumer.close()


def test_offsets_for_times_aiokafka(brook_broker, topic_name):
    base = int(time.time() * 1000) - 60_000
    _disordered_topic(brook_broker, topic_name, base)

    async def check() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=brook_broker.bootstrap)
        await consumer.start()
        partition = AioTopicPartition(topic_name, 0)
        try:
            for delta, expected in EXPECTED.items():
                found = (await consumer.offsets_for_times({partition: base + delta}))[partition]
                if expected is None:
                    assert found is None
                else:
                    assert found.offset == expected, delta
        finally:
            await consumer.stop()

    asyncio.run(check())


def test_create_time_and_log_append_time_as_kafka_python_and_aiokafka_see_them(
    brook_broker, topic_name
):
    create_topic(brook_broker.bootstrap, topic_name + "-ct")
    create_topic(
        brook_broker.bootstrap,
        topic_name + "-lat",
        config={"message.timestamp.type": "LogAppendTime"},
    )
    sent_at = int(time.time() * 1000) - 30_000
    producer = KafkaProducer(bootstrap_servers=brook_broker.bootstrap)
    for suffix in ("-ct", "-lat"):
        metadata = producer.send(topic_name + suffix, b"v", partition=0, timestamp_ms=sent_at).get(
            10
        )
        if suffix == "-lat":
            assert metadata.timestamp > sent_at + 20_000  # the broker's stamp, returned
    producer.close()
    kp = KafkaConsumer(
        bootstrap_servers=brook_broker.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    kp.assign([KpTopicPartition(topic_name + "-ct", 0), KpTopicPartition(topic_name + "-lat", 0)])
    seen = {m.topic[len(topic_name) :]: (m.timestamp_type, m.timestamp) for m in kp}
    kp.close()
    assert seen["-ct"] == (0, sent_at)
    assert seen["-lat"][0] == 1 and seen["-lat"][1] > sent_at + 20_000

    async def aio() -> dict:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=brook_broker.bootstrap, auto_offset_reset="earliest"
        )
        await consumer.start()
        consumer.assign(
            [AioTopicPartition(topic_name + "-ct", 0), AioTopicPartition(topic_name + "-lat", 0)]
        )
        out = {}
        try:
            while len(out) < 2:
                batch = await consumer.getmany(timeout_ms=5000)
                for records in batch.values():
                    for m in records:
                        out[m.topic[len(topic_name) :]] = (m.timestamp_type, m.timestamp)
        finally:
            await consumer.stop()
        return out

    assert asyncio.run(aio()) == seen

    async def aio_produce() -> None:
        aio_producer = AIOKafkaProducer(bootstrap_servers=brook_broker.bootstrap)
        await aio_producer.start()
        try:
            metadata = await aio_producer.send_and_wait(
                topic_name + "-lat", b"x", partition=0, timestamp_ms=sent_at
            )
            assert metadata.timestamp > sent_at + 20_000
            assert metadata.timestamp_type == 1
        finally:
            await aio_producer.stop()

    asyncio.run(aio_produce())
