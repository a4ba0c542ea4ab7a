"""Every record of a produced batch is read before the batch is stored, as Kafka does.

A batch with a valid CRC whose records do not add up (a key or value or header that
runs past its record, a record count that lies, offsets out of sequence...) gets
INVALID_RECORD with no error message, as Kafka answers the InvalidRecordException of
DefaultRecord.readFrom; compressed batches are inflated and read the same way, within
a bound: one that inflates past socket.request.max.bytes gets MESSAGE_TOO_LARGE. After
each refusal the partition's segment bytes are unchanged and other clients are served.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import psutil
import pytest
from crafted_batches import batch, record, records, varint, zstd_bomb
from kafka import TopicPartition

from brook.broker.testing import BrokerProcess, BrokerThread
from brook.protocol.compression import Codec

from .clients import (
    consume_all,
    create_topic,
    kafka_python_consumer,
    kafka_python_poll,
    produce,
)
from .raw_client import RawClient, produce_request

NOW = int(time.time() * 1000)
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
INVALID_RECORD = 87
MESSAGE_TOO_LARGE = 10


def _produce_raw(port: int, topic: str, data: bytes):
    with RawClient(port) as client:
        response = client.request(produce_request(topic, 0, data, version=9, acks=1))
    return response.responses[0].partition_responses[0]


def _snapshot(data_dir: Path, topic: str) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted((data_dir / f"{topic}-0").glob("*.log"))
    }


def _header_overrun() -> bytes:
    body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(1)
    body += varint(30) + b"ab" + varint(-1)  # a header key of 30 bytes in a 2-byte space
    return varint(len(body)) + body


# (name, records section, record count): each breaks one rule of Kafka's record format.
MALFORMED = [
    # The batch: a key length that runs past its record.
    ("key past its record", record(key=b"kk", key_length=40) + record(offset_delta=1), 2),
    ("value past its record", record(value=b"abc", value_length=3000), 1),
    ("header count lies", record(header_count=90), 1),
    ("header key past its record", _header_overrun(), 1),
    ("record count too high", records(2), 3),
    ("record count too low", records(3), 2),
    ("offset deltas out of sequence", record(offset_delta=0) + record(offset_delta=5), 2),
    ("record length past the batch", record(length=200), 1),
    ("bytes left inside a record", record(trailing=b"\x00\x00\x00"), 1),
]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_malformed_records_are_refused_and_nothing_is_stored(brook_broker, topic_name, codec):
    create_topic(brook_broker.bootstrap, topic_name)
    produce(brook_broker.bootstrap, topic_name, [(b"k", b"stored-%d" % i) for i in range(5)])
    before = _snapshot(brook_broker.data_dir, topic_name)
    for name, body, count in MALFORMED:
        bad = batch(body, count, base_timestamp=NOW, max_timestamp=NOW, codec=codec)
        result = _produce_raw(brook_broker.port, topic_name, bad)
        # Kafka answers the InvalidRecordException without a message or record errors.
        assert (result.error_code.value, result.error_message, result.record_errors) == (
            INVALID_RECORD,
            None,
            (),
        ), name
        assert _snapshot(brook_broker.data_dir, topic_name) == before, name
    # The same records, well formed, are accepted, and every client reads the partition.
    good = batch(records(3, value=b"fine"), 3, base_timestamp=NOW, max_timestamp=NOW, codec=codec)
    assert _produce_raw(brook_broker.port, topic_name, good).error_code.value == 0
    values = [m.value() for m in consume_all(brook_broker.bootstrap, topic_name, 8)]
    assert values == [b"stored-%d" % i for i in range(5)] + [b"fine"] * 3
    consumer = kafka_python_consumer(brook_broker.bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic_name, 0)])
        assert [m.value for m in kafka_python_poll(consumer, 8)] == values
    finally:
        consumer.close()


def _exact_body(size: int) -> bytes:
    """One record whose records section is exactly `size` bytes."""
    for value_size in range(size, 0, -1):
        body = record(key=None, value=b"x" * value_size)
        if len(body) == size:
            return body
    raise AssertionError(size)


@pytest.mark.parametrize("codec", CODECS[1:], ids=[c.name.lower() for c in CODECS[1:]])
def test_inflated_size_bound_is_socket_request_max_bytes(tmp_path, topic_name, codec):
    bound = 200_000
    broker = BrokerThread(tmp_path / "data", {"socket.request.max.bytes": bound}).start()
    try:
        create_topic(broker.bootstrap, topic_name)
        at_bound = batch(_exact_body(bound), 1, base_timestamp=NOW, max_timestamp=NOW, codec=codec)
        assert _produce_raw(broker.port, topic_name, at_bound).error_code.value == 0
        stored = _snapshot(broker.data_dir, topic_name)
        over = batch(_exact_body(bound + 1), 1, base_timestamp=NOW, max_timestamp=NOW, codec=codec)
        assert len(over) < bound // 10  # tiny on the wire
        result = _produce_raw(broker.port, topic_name, over)
        assert (result.error_code.value, result.error_message) == (MESSAGE_TOO_LARGE, None)
        assert _snapshot(broker.data_dir, topic_name) == stored
    finally:
        broker.stop()


def _peak_rss(pid: int) -> int:
    """The process's high-water mark of resident memory (Linux's VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_zstd_bomb_is_refused_without_inflating_it(tmp_path, topic_name):
    """12.9 KB of zstd holding one 400 MiB record: refused, and the broker's memory never
    grows past the bound (socket.request.max.bytes, 100 MiB by default)."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, topic_name)
        produce(broker.bootstrap, topic_name, [(b"k", b"before")])
        assert broker.process is not None
        process = psutil.Process(broker.process.pid)
        baseline = process.memory_info().rss
        before = _snapshot(broker.data_dir, topic_name)
        bomb = zstd_bomb(400 * 1024 * 1024, timestamp=NOW)
        assert len(bomb) < 20_000
        result = _produce_raw(broker.port, topic_name, bomb)
        assert (result.error_code.value, result.error_message) == (MESSAGE_TOO_LARGE, None)
        assert _snapshot(broker.data_dir, topic_name) == before
        # At most the bound was ever written, and it was given back after the check.
        assert _peak_rss(process.pid) < baseline + (100 + 48) * 1024 * 1024
        assert process.memory_info().rss < baseline + 32 * 1024 * 1024
        assert [m.value() for m in consume_all(broker.bootstrap, topic_name, 1)] == [b"before"]
        assert "MESSAGE_TOO_LARGE" in broker.log_text()
    finally:
        broker.stop()
