"""A response written as chunks is byte for byte what kio writes, with its record sets
passed through as the very objects the handler gave (no copy before the socket)."""

from __future__ import annotations

import datetime
import io
import struct
import uuid

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v4 import response as fetch4
from kio.schema.fetch.v16 import response as fetch16
from kio.serial import entity_writer

from brook.protocol.wire import encode_response, encode_response_chunks


def _kio_bytes(correlation_id: int, response: object, flexible_header: bool) -> bytes:
    body = io.BytesIO()
    body.write(struct.pack(">i", correlation_id))
    if flexible_header:
        body.write(b"\x00")
    entity_writer(type(response))(body, response)
    return struct.pack(">i", len(body.getvalue())) + body.getvalue()


def test_fetch_v4_record_sets_are_passed_through() -> None:
    big = b"r" * 300_000
    view = memoryview(b"s" * 200_000)[:150_000]
    response = fetch4.FetchResponse(
        throttle_time=datetime.timedelta(0),
        responses=(
            fetch4.FetchableTopicResponse(
                topic="t",
                partitions=tuple(
                    fetch4.PartitionData(
                        partition_index=index,
                        error_code=ErrorCode.none,
                        high_watermark=10,
                        last_stable_offset=10,
                        aborted_transactions=None,
                        records=records,
                    )
                    for index, records in enumerate([big, b"small", view])
                ),
            ),
        ),
    )
    chunks = encode_response_chunks(7, response)
    assert any(chunk is big for chunk in chunks)
    assert any(chunk is view for chunk in chunks)
    assert b"".join(chunks) == _kio_bytes(7, response, flexible_header=False)
    assert encode_response(7, response) == b"".join(chunks)


def test_flexible_fetch_v16_matches_kio() -> None:
    records = b"q" * 100_000
    response = fetch16.FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=3,
        responses=(
            fetch16.FetchableTopicResponse(
                topic_id=uuid.UUID(int=5),
                partitions=(
                    fetch16.PartitionData(
                        partition_index=0,
                        error_code=ErrorCode.none,
                        high_watermark=1,
                        last_stable_offset=1,
                        log_start_offset=0,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=records,
                    ),
                ),
            ),
        ),
    )
    chunks = encode_response_chunks(9, response)
    assert any(chunk is records for chunk in chunks)
    assert b"".join(chunks) == _kio_bytes(9, response, flexible_header=True)
