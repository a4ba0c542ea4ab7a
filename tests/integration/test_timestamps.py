"""Timestamps as Kafka defines them: KIP-937 bounds, LogAppendTime, offsets by time.

The edges are probed with a broker whose clock the test holds still, so "exactly at
the bound" and "one millisecond over" mean what they say.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from crafted_batches import batch as crafted_batch
from crafted_batches import record, records
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from brook.broker.testing import BrokerThread
from brook.protocol.compression import Codec
from brook.protocol.record_batch import Record, build_batch, split_batches

from .clients import consume_all, create_topic, stored_batches
from .processes import watermarks
from .raw_client import RawClient, produce_request
from .segments import decode_segment, segments_of

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
    with RawClient(broker.port) as client:
        response = client.request(produce_request(topic, 0, batch, version=9, acks=1))
    return response.responses[0].partition_responses[0]


def _invalid_timestamps(result) -> list[int]:
    """The batch indexes of the records an INVALID_TIMESTAMP (32) answer names."""
    assert result.error_code.value == 32
    return [e.batch_index for e in result.record_errors]


def _batch(timestamps: list[int], codec: int = Codec.NONE) -> bytes:
    return build_batch(
        [Record(i, ts, b"k", b"v%d" % i) for i, ts in enumerate(timestamps)], codec=codec
    )


def _stored(broker, topic: str) -> int:
    return watermarks(broker.bootstrap, topic, 1)[0][1]


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
    assert _invalid_timestamps(result) == [1234]
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


# --- the batch header's MaxTimestamp is the records' --------------------------------------


def _lying(deltas: list[int], base: int, max_timestamp: int, codec: int = Codec.NONE) -> bytes:
    """A sealed batch whose header claims `max_timestamp`, whatever its records hold."""
    body = records(len(deltas), timestamp_deltas=deltas)
    return crafted_batch(
        body, len(deltas), base_timestamp=base, max_timestamp=max_timestamp, codec=codec
    )


def _stored_timestamps(broker, topic: str) -> list[tuple[int, list[int]]]:
    """(batch MaxTimestamp, record timestamps) of every stored batch, decoded and CRC-checked
    by kafka-python."""
    return [
        (entry.batch.max_timestamp, [r.timestamp for r in entry.records])
        for path in segments_of(broker.data_dir / f"{topic}-0")
        for entry in decode_segment(path)
    ]


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD], ids=["none", "zstd"])
def test_max_timestamp_is_recomputed_from_the_records(frozen_broker, topic_name, codec):
    create_topic(frozen_broker.bootstrap, topic_name)
    sent = [
        # librdkafka's batch for produce(timestamp=-1): records -1, MaxTimestamp 0.
        _lying([0, 0], -1, 0, codec),
        # A header that claims the future: the records are what KIP-937 judges.
        _lying([0, 4], FROZEN_NOW - 5, FROZEN_NOW + 2 * HOUR, codec),
        # A header that claims less than its records hold.
        _lying([0, 50], FROZEN_NOW - 100, FROZEN_NOW - 100, codec),
    ]
    for data in sent:
        assert _produce_raw(frozen_broker, topic_name, data).error_code.value == 0
    assert _stored_timestamps(frozen_broker, topic_name) == [
        (-1, [-1, -1]),
        (FROZEN_NOW - 1, [FROZEN_NOW - 5, FROZEN_NOW - 1]),
        (FROZEN_NOW - 50, [FROZEN_NOW - 100, FROZEN_NOW - 50]),
    ]


def test_a_true_header_is_stored_with_its_crc(frozen_broker, topic_name):
    create_topic(frozen_broker.bootstrap, topic_name)
    data = _batch([FROZEN_NOW - 3, FROZEN_NOW - 1, FROZEN_NOW - 2])
    assert _produce_raw(frozen_broker, topic_name, data).error_code.value == 0
    [stored] = stored_batches(frozen_broker.data_dir, topic_name)
    sent = split_batches(data)[0]
    assert (stored.crc, stored.max_timestamp) == (sent.crc, FROZEN_NOW - 1)


def test_bounds_are_checked_against_the_records_not_the_header(frozen_broker, topic_name):
    create_topic(frozen_broker.bootstrap, topic_name)
    # The header says "now"; the second record is an hour and a millisecond ahead.
    data = _lying([0, HOUR + 1], FROZEN_NOW, FROZEN_NOW)
    result = _produce_raw(frozen_broker, topic_name, data)
    assert _invalid_timestamps(result) == [1]
    assert _stored(frozen_broker, topic_name) == 0


def test_only_no_timestamp_is_exempt_from_the_before_bound(frozen_broker, topic_name):
    create_topic(
        frozen_broker.bootstrap, topic_name, config={"message.timestamp.before.max.ms": "60000"}
    )
    # -1 is NO_TIMESTAMP, which Kafka does not judge; -2 is a timestamp like any other.
    assert _produce_raw(frozen_broker, topic_name, _lying([0, 0], -1, -1)).error_code.value == 0
    result = _produce_raw(frozen_broker, topic_name, _lying([1, 0], -2, -1))
    assert _invalid_timestamps(result) == [1]
    assert _stored_timestamps(frozen_broker, topic_name) == [(-1, [-1, -1])]


@pytest.mark.parametrize("compression", ["producer", "zstd"])
def test_timestamps_below_no_timestamp_leave_max_timestamp_at_minus_one(
    frozen_broker, topic_name, compression
):
    # Kafka starts the maximum at NO_TIMESTAMP, so -5 and -3 give the batch -1, also when
    # the topic's compression.type has the batch re-encoded.
    create_topic(frozen_broker.bootstrap, topic_name, config={"compression.type": compression})
    assert _produce_raw(frozen_broker, topic_name, _lying([0, 2], -5, 7)).error_code.value == 0
    assert _stored_timestamps(frozen_broker, topic_name) == [(-1, [-5, -3])]


def test_client_marked_log_append_time(frozen_broker, topic_name):
    create_topic(frozen_broker.bootstrap, topic_name)
    create_topic(
        frozen_broker.bootstrap,
        topic_name + "-lat",
        config={"message.timestamp.type": "LogAppendTime"},
    )
    body = records(2)
    marked = crafted_batch(
        body, 2, base_timestamp=FROZEN_NOW, max_timestamp=FROZEN_NOW - 7, log_append_time=True
    )
    # CreateTime topic: every record takes the batch's timestamp, which passes the bounds;
    # the batch is stored as CreateTime, as Kafka's setMaxTimestamp leaves it.
    assert _produce_raw(frozen_broker, topic_name, marked).error_code.value == 0
    [stored] = stored_batches(frozen_broker.data_dir, topic_name)
    assert (stored.is_log_append_time, stored.max_timestamp) == (False, FROZEN_NOW - 7)
    # LogAppendTime topic: a producer may not set the type.
    result = _produce_raw(frozen_broker, topic_name + "-lat", marked)
    assert result.error_code.value == 32
    assert result.error_message == "One or more records have been rejected due to invalid timestamp"
    assert [(e.batch_index, e.batch_index_error_message) for e in result.record_errors] == [
        (
            i,
            f"Invalid timestamp type in message DefaultRecord(offset={i},"
            f" timestamp={FROZEN_NOW - 7}, key=1 bytes, value=1 bytes). Producer should not"
            " set timestamp type to LogAppendTime.",
        )
        for i in range(2)
    ]
    assert stored_batches(frozen_broker.data_dir, topic_name + "-lat") == []


def test_compacted_topic_refuses_records_without_a_key(frozen_broker, topic_name):
    create_topic(frozen_broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    body = b"".join(
        record(offset_delta=i, key=None if i in (0, 2) else b"k", timestamp_delta=0)
        for i in range(3)
    )
    data = crafted_batch(body, 3, base_timestamp=FROZEN_NOW, max_timestamp=FROZEN_NOW)
    result = _produce_raw(frozen_broker, topic_name, data)
    message = f"Compacted topic cannot accept message without key in topic partition {topic_name}-0"
    assert result.error_code.value == 87  # INVALID_RECORD
    assert [(e.batch_index, e.batch_index_error_message) for e in result.record_errors] == [
        (0, message),
        (2, message),
    ]
    assert result.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only"
        f" showing the first three errors at most: [RecordError(batchIndex=0, message='{message}'),"
        f" RecordError(batchIndex=2, message='{message}')]"
    )
    assert _stored(frozen_broker, topic_name) == 0


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
