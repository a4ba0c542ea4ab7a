"""A Fetch response's record sets are streamed from their segment files as the socket takes
them (broker/server/connection.py, storage.file_records.FileRegion): a consumer that asks
for megabytes and reads nothing holds a bounded piece of the broker's memory, then gets
every record when it reads; one whose records went away meanwhile is disconnected, and the
broker goes on serving everyone else."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from brook.broker.server.connection import MAX_UNSENT_BYTES, STREAM_PIECE_BYTES
from brook.broker.testing import BrokerThread
from brook.protocol.api_table import ApiKey, response_type
from brook.protocol.record_batch import iter_records

from .clients import consume_all, create_topic, produce
from .raw_client import RawClient, fetch_request

RECORDS = 12_000
VALUE = b"v" * 1000  # 12 MB in all: far more than the socket buffers hold


@pytest.fixture
def broker(own_broker: BrokerThread) -> BrokerThread:
    return own_broker


def _fill(broker: BrokerThread, topic: str) -> None:
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
    for i in range(RECORDS):
        producer.produce(topic, VALUE, key=b"%d" % i, partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _streams(broker: BrokerThread) -> list[dict[str, Any]]:
    """The broker's connections that are streaming a response, as its loop sees them."""

    def look() -> list[dict[str, Any]]:
        found = []
        for connection in broker.broker.connections:
            if connection.streaming is None or connection.transport is None:
                continue
            found.append(
                {
                    "paused": connection.writing_paused,
                    "buffered": connection.transport.get_write_buffer_size(),
                    "still_in_files": sum(
                        len(chunk) - (connection.streamed if i == 0 else 0)
                        for i, chunk in enumerate(connection.streaming)
                        if not isinstance(chunk, bytes | memoryview)
                    ),
                }
            )
        return found

    result: list[dict[str, Any]] = broker.call(look)
    return result


def _stalled_stream(broker: BrokerThread) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        streams = [s for s in _streams(broker) if s["paused"]]
        if streams:
            return streams[0]
        assert time.monotonic() < deadline, _streams(broker)
        time.sleep(0.05)


def _unread_fetch(broker: BrokerThread, topic: str) -> RawClient:
    client = RawClient(broker.port)
    # A small receive buffer, so that the response stops in the broker, not the kernel.
    client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    client.send(fetch_request(topic, max_bytes=50 * 1024 * 1024, max_wait_ms=0))
    return client


def test_an_unread_fetch_holds_a_bounded_piece_and_then_delivers_everything(
    broker: BrokerThread, topic_name: str
) -> None:
    _fill(broker, topic_name)
    with _unread_fetch(broker, topic_name) as client:
        stream = _stalled_stream(broker)
        assert stream["buffered"] <= MAX_UNSENT_BYTES + STREAM_PIECE_BYTES
        assert stream["still_in_files"] > 4 * 1024 * 1024  # not read into memory
        # Another client is served meanwhile.
        produce(broker.bootstrap, f"{topic_name}-other", [(b"k", b"meanwhile")])
        assert [m.value() for m in consume_all(broker.bootstrap, f"{topic_name}-other", 1)] == [
            b"meanwhile"
        ]
        # Read at last: every record, in order, in one response.
        response = client.receive(response_type(ApiKey.FETCH, 11))
        [partition] = response.responses[0].partitions
        records = list(iter_records(partition.records))
        assert [r.offset for r in records] == list(range(len(records)))
        assert len(records) == RECORDS
        assert all(r.value == VALUE for r in records)
        # The connection goes on with its next request.
        again = client.request(fetch_request(topic_name, offset=RECORDS - 1, max_wait_ms=0))
        [last] = again.responses[0].partitions
        assert [r.offset for r in iter_records(last.records)][-1] == RECORDS - 1
    assert _streams(broker) == []


def test_records_deleted_under_a_stalled_stream_close_its_connection_only(
    broker: BrokerThread, topic_name: str
) -> None:
    from confluent_kafka.admin import AdminClient

    _fill(broker, topic_name)
    with _unread_fetch(broker, topic_name) as client:
        _stalled_stream(broker)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics([topic_name])[topic_name].result(30)
        # What the socket took arrives; then the broker, unable to read the rest of the
        # records, closes the connection (the client would fetch again).
        received = 0
        client.sock.settimeout(30)
        while chunk := client.sock.recv(1 << 20):
            received += len(chunk)
        assert 0 < received < RECORDS * len(VALUE)
    assert _streams(broker) == []
    produce(broker.bootstrap, f"{topic_name}-after", [(b"k", b"still serving")])
    assert [m.value() for m in consume_all(broker.bootstrap, f"{topic_name}-after", 1)] == [
        b"still serving"
    ]
