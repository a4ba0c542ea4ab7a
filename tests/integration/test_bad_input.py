"""Bad input over a raw socket: the offender gets Kafka's answer or a closed connection,
everyone else keeps being served, and no stored byte changes."""

from __future__ import annotations

import hashlib
import socket
import struct
from pathlib import Path

import pytest
from kio.schema.metadata.v4.request import MetadataRequest
from kio.schema.produce.v7.request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kio.schema.produce.v7.response import ProduceResponse

from brook.protocol.client_wire import (
    decode_response,
    encode_raw_request,
    encode_request,
    frame_size,
)
from brook.protocol.record_batch import Record, build_batch

from .clients import consume_all, create_topic, produce

CLIENT_ID = "bad-input-test"


def _request(api_key: int, version: int, body: bytes, correlation_id: int = 7) -> bytes:
    """Header v1 and `body` as given, for API keys and versions a kio entity cannot name."""
    return encode_raw_request(api_key, version, body, correlation_id, CLIENT_ID)


def _read_response(sock: socket.socket) -> bytes | None:
    """The response body after the correlation id, or None if the broker closed."""
    size_bytes = _recv_exactly(sock, 4)
    if size_bytes is None:
        return None
    return _recv_exactly(sock, frame_size(size_bytes))


def _recv_exactly(sock: socket.socket, count: int) -> bytes | None:
    chunks = b""
    while len(chunks) < count:
        try:
            chunk = sock.recv(count - len(chunks))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        chunks += chunk
    return chunks


def _connect(broker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    return sock


def _closed(sock: socket.socket) -> bool:
    return _read_response(sock) is None


def _snapshot(data_dir: Path) -> dict[str, str]:
    """Every user topic's segment bytes (the coordinator's internal topic may appear when
    the checking consumer looks up its group)."""
    return {
        str(path.relative_to(data_dir)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(data_dir.rglob("*.log"))
        if not path.parent.name.startswith("__")
    }


def _produce_request(topic: str, records: bytes, acks: int = 1) -> bytes:
    import datetime

    request = ProduceRequest(
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=0, records=records),)
            ),
        ),
    )
    return encode_request(request, 7, CLIENT_ID)


def _produce_error(sock: socket.socket) -> int:
    data = _read_response(sock)
    assert data is not None, "broker closed the connection instead of answering"
    response = decode_response(data, ProduceResponse).body
    return response.responses[0].partition_responses[0].error_code.value


@pytest.fixture
def loaded(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    produce(brook_broker.bootstrap, topic_name, [(b"k", b"stored-%d" % i) for i in range(20)])
    return brook_broker, topic_name


def _still_serving(broker, topic: str) -> None:
    values = [m.value() for m in consume_all(broker.bootstrap, topic, 20)]
    assert values == [b"stored-%d" % i for i in range(20)]


def _assert_refused(broker, topic: str, batch: bytes | bytearray, error_code: int) -> None:
    """A Produce of `batch` gets `error_code`, and the broker stores nothing of it and
    still serves what it had."""
    before = _snapshot(broker.data_dir)
    sock = _connect(broker)
    sock.sendall(_produce_request(topic, bytes(batch)))
    assert _produce_error(sock) == error_code
    assert _snapshot(broker.data_dir) == before
    _still_serving(broker, topic)


def test_garbage_bytes_close_only_that_connection(loaded):
    broker, topic = loaded
    before = _snapshot(broker.data_dir)
    bystander = _connect(broker)
    offender = _connect(broker)
    offender.sendall(struct.pack(">i", 40) + b"\xde\xad\xbe\xef" * 10)
    assert _closed(offender)
    bystander.sendall(
        encode_request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 7, CLIENT_ID)
    )
    assert _read_response(bystander) is not None
    _still_serving(broker, topic)
    assert _snapshot(broker.data_dir) == before


def test_truncated_frame_then_disconnect_is_harmless(loaded):
    broker, topic = loaded
    before = _snapshot(broker.data_dir)
    offender = _connect(broker)
    offender.sendall(struct.pack(">i", 1000) + b"\x00\x03\x00\x04")
    offender.close()
    _still_serving(broker, topic)
    assert _snapshot(broker.data_dir) == before


def test_oversized_frame_closes_connection(loaded):
    broker, topic = loaded
    offender = _connect(broker)
    offender.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 16)
    assert _closed(offender)
    _still_serving(broker, topic)


def test_unknown_api_key_and_version_close_connection(loaded):
    broker, topic = loaded
    for api_key, version in [(999, 0), (3, 99), (0, 1)]:
        offender = _connect(broker)
        offender.sendall(_request(api_key, version, b""))
        assert _closed(offender), (api_key, version)
    _still_serving(broker, topic)


def test_unknown_api_versions_version_gets_supported_list(brook_broker):
    sock = _connect(brook_broker)
    sock.sendall(_request(18, 77, b"\x00\x00\x00"))
    data = _read_response(sock)
    assert data is not None
    correlation_id, error_code, count = struct.unpack_from(">ihi", data, 0)
    assert correlation_id == 7
    assert error_code == 35  # UNSUPPORTED_VERSION
    served = {struct.unpack_from(">h", data, 10 + 6 * i)[0] for i in range(count)}
    assert {0, 1, 3, 18} <= served


def test_batch_with_wrong_crc_is_corrupt_message(loaded):
    broker, topic = loaded
    batch = bytearray(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    batch[-1] ^= 0xFF  # flip a byte of the last record, covered by the CRC
    _assert_refused(broker, topic, batch, 2)  # CORRUPT_MESSAGE


def test_batch_whose_length_lies_is_rejected(loaded):
    broker, topic = loaded
    batch = bytearray(build_batch([Record(0, 1_700_000_000_000, b"k", b"v")]))
    struct.pack_into(">i", batch, 8, len(batch) + 100)  # claims more bytes than follow
    _assert_refused(broker, topic, batch, 2)  # CORRUPT_MESSAGE


def test_record_count_that_lies_is_invalid_record(loaded):
    broker, topic = loaded
    batch = bytearray(
        build_batch(
            [Record(0, 1_700_000_000_000, b"k", b"v"), Record(1, 1_700_000_000_000, b"k", b"w")]
        )
    )
    struct.pack_into(">i", batch, 57, 5)  # record count
    struct.pack_into(">i", batch, 23, 4)  # last offset delta, consistent with the count
    from brook.protocol.record_batch import compute_crc, parse_header

    struct.pack_into(">I", batch, 17, compute_crc(batch, parse_header(batch)))
    _assert_refused(broker, topic, batch, 87)  # INVALID_RECORD


def test_two_batches_for_one_partition_are_invalid_record(loaded, caplog):
    """Kafka takes one batch per partition from magic v2: a second one fails the whole
    partition's append, and none of it is stored."""
    broker, topic = loaded
    first = build_batch([Record(0, 1_700_000_000_000, b"k", b"first")])
    second = build_batch([Record(0, 1_700_000_000_000, b"k", b"second")])
    _assert_refused(broker, topic, first + second, 87)  # INVALID_RECORD
    assert "Compressed outer record has more than one batch" in caplog.text


def test_invalid_required_acks(loaded):
    broker, topic = loaded
    batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"v")])
    sock = _connect(broker)
    sock.sendall(_produce_request(topic, batch, acks=2))
    assert _produce_error(sock) == 21  # INVALID_REQUIRED_ACKS


def test_produce_to_unknown_topic(brook_broker):
    batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"v")])
    sock = _connect(brook_broker)
    sock.sendall(_produce_request("no-such-topic", batch))
    assert _produce_error(sock) == 3  # UNKNOWN_TOPIC_OR_PARTITION
