"""The one record decoder (brook.protocol.record_batch.decode_records, kio's native
varints): the records a batch was built from, in every codec; kafka-python's batches;
INVALID_RECORD for malformed ones, CORRUPT_MESSAGE for damaged compressed ones."""

from __future__ import annotations

import struct

import pytest
from storage_helpers import BASE_TS, build_kafka_python_segment

from brook.protocol.compression import Codec
from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    encode_record,
    parse_header,
    split_batches,
    write_varint,
)

RECORD_COUNT_OFFSET = 57


def varied_records(first: int = 0) -> list[Record]:
    """Null and empty keys and values, headers with null values, multi-byte varints,
    timestamps going backwards and far apart."""
    return [
        Record(first, BASE_TS, None, b"v" * 300, []),
        Record(first + 1, BASE_TS - 5, b"", None, [("a", None), ("b", b"")]),
        Record(first + 2, BASE_TS + 10**9, b"k" * 200, b"", [("\u00e9t\u00e9", b"x" * 150)]),
        Record(first + 3, BASE_TS + 1, b"key", b"value", [("h", b"1")] * 70),
    ]


@pytest.mark.parametrize("codec", list(Codec))
def test_the_records_a_batch_was_built_from(codec: Codec) -> None:
    expected = varied_records(500)
    data = build_batch(expected, base_offset=500, codec=codec)
    (header,) = split_batches(data)
    assert decode_records(data, header) == expected
    assert [r.offset for r in expected] == [500, 501, 502, 503]
    # Inside a larger buffer, at a batch's own position.
    buffer = b"\x00" * 7 + data
    header = parse_header(buffer, 7)
    assert decode_records(buffer, header) == expected
    assert decode_records(memoryview(buffer), header) == expected


def test_kafka_python_and_control_batches() -> None:
    data, expected = build_kafka_python_segment(100, 6, 5)
    decoded = [r for h in split_batches(data) for r in decode_records(data, h)]
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == expected
    marker = build_batch(
        [Record(9, BASE_TS, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 4))],
        base_offset=9,
        producer_id=5,
        transactional=True,
        control=True,
    )
    (header,) = split_batches(marker)
    assert [(r.offset, r.key, r.value) for r in decode_records(marker, header)] == [
        (9, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 4))
    ]


def batch_of(bodies: list[bytes], count: int | None = None) -> tuple[bytes, BatchHeader]:
    """A batch whose records section is `bodies` as given (possibly malformed)."""
    valid = build_batch([Record(0, BASE_TS, b"k", b"v")])
    section = b"".join(bodies)
    data = bytearray(valid[:HEADER_SIZE] + section)
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">i", data, RECORD_COUNT_OFFSET, len(bodies) if count is None else count)
    return bytes(data), parse_header(data)


def framed(body: bytes) -> bytes:
    out = bytearray()
    write_varint(len(body), out)
    return bytes(out) + body


GOOD = encode_record(Record(0, BASE_TS, b"k", b"v"), 0, 0)
SECOND = encode_record(Record(1, BASE_TS, b"k", b"v"), 1, 0)
MALFORMED = {
    "count above the records": ([GOOD], 2),
    "count below the records": ([GOOD, SECOND], 1),
    "offset delta out of order": (
        [GOOD, encode_record(Record(0, BASE_TS, b"k", b"v"), 5, 0)],
        None,
    ),
    "length past the batch": ([b"\x7e" + GOOD[1:]], None),
    "negative length": ([b"\x01" + GOOD[1:]], None),
    "key past its record": ([framed(b"\x00\x00\x00\x7e" + b"k" * 3)], None),
    "null header key": ([framed(b"\x00\x00\x00\x02k\x02v\x02\x01\x00")], None),
    "bytes after the fields": ([framed(b"\x00\x00\x00\x02k\x02v\x00junk")], None),
    "varint longer than ten bytes": ([framed(b"\x00" + b"\xff" * 11 + b"\x00")], None),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_records_are_invalid_record(case: str) -> None:
    bodies, count = MALFORMED[case]
    data, header = batch_of(bodies, count)
    with pytest.raises(InvalidRecordError):
        decode_records(data, header)


def test_negative_header_count_is_invalid_as_in_kafka() -> None:
    data, header = batch_of([framed(b"\x00\x00\x00\x02k\x02v\x01")])
    with pytest.raises(InvalidRecordError, match="-1 headers"):
        decode_records(data, header)


def test_damaged_compressed_records_are_corrupt_message() -> None:
    data = bytearray(build_batch(varied_records(), codec=Codec.ZSTD))
    data[HEADER_SIZE : HEADER_SIZE + 8] = b"\xff" * 8
    (header,) = split_batches(data)
    with pytest.raises(CorruptRecordError):
        decode_records(data, header)
