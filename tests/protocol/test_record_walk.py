"""The record walk: every field of every record must add up.

Records are built field by field (tests/crafted_batches.py), so each malformed case
below breaks exactly one rule, and the walk must name it.
"""

from __future__ import annotations

import random

import pytest
from crafted_batches import batch, record, records, varint

from brook.protocol.errors import InvalidRecordError
from brook.protocol.record_batch import decode_records, split_batches
from brook.protocol.record_walk import (
    Malformed,
    RecordsSummary,
    python_walk,
    summarize,
    walk_records,
)

WALKERS = [pytest.param(python_walk, id="python")]


@pytest.mark.parametrize("walk", WALKERS)
def test_well_formed_records_summarized(walk):
    body = b"".join(
        record(
            offset_delta=i,
            timestamp_delta=[5, -3, 1 << 40, 0][i % 4],
            key=None if i % 3 == 0 else b"key-%d" % i,
            value=None if i % 5 == 0 else b"v" * (i * 7 % 300),
            headers=[(b"h", b"x"), (b"n", None)] if i % 2 else (),
        )
        for i in range(9000)  # offset deltas of one, two and three bytes
    )
    assert walk(body, 0, len(body), 9000, True) == (
        0,
        -3,
        1 << 40,
        [i for i in range(9000) if i % 3 == 0],
    )
    assert walk(body, 0, len(body), 9000, False)[3] is None


@pytest.mark.parametrize("walk", WALKERS)
def test_any_negative_length_is_null_as_kafka_reads_it(walk):
    body = record(offset_delta=0, key=None, key_length=-7, value=None, value_length=-2)
    body += record(offset_delta=1, headers=[(b"h", None)])
    assert walk(body, 0, len(body), 2, True) == (0, 0, 0, [0])


@pytest.mark.parametrize("walk", WALKERS)
def test_walk_stays_within_its_slice(walk):
    body = records(3)
    padded = b"\xff" * 7 + body + b"\xff" * 9
    assert walk(padded, 7, 7 + len(body), 3, False) == (0, 0, 0, None)


def _one(**fields) -> bytes:
    return record(**fields)


MALFORMED = {
    # The case: a key length that runs past its record, inside the batch.
    "key runs past its record": (
        _one(key=b"kk", key_length=40) + record(offset_delta=1, value=b"x" * 60),
        2,
        Malformed.OVERRUN,
    ),
    "key runs past the batch": (_one(key=b"k", key_length=10_000), 1, Malformed.OVERRUN),
    "value runs past its record": (_one(value=b"abc", value_length=50), 1, Malformed.OVERRUN),
    "header count larger than the bytes left": (
        _one(header_count=90),
        1,
        Malformed.HEADER_COUNT_LARGE,
    ),
    "negative header count": (_one(header_count=-2), 1, Malformed.HEADER_COUNT_NEGATIVE),
    "more records claimed than present": (records(2), 3, Malformed.PREMATURE_EOF),
    "fewer records claimed than present": (records(2), 1, Malformed.TRAILING),
    "record length past the batch": (_one(length=500), 1, Malformed.RECORD_SIZE),
    "zero record length": (b"\x00", 1, Malformed.RECORD_SIZE),
    "negative record length": (varint(-4) + b"\x00" * 8, 1, Malformed.RECORD_SIZE),
    "bytes left inside a record": (_one(trailing=b"\x00\x00"), 1, Malformed.OVERRUN),
    "offset deltas that skip": (
        record(offset_delta=0) + record(offset_delta=2),
        2,
        Malformed.OFFSET_DELTA,
    ),
    "timestamp varlong of 11 bytes": (
        varint(14) + b"\x00" + b"\xff" * 10 + b"\x01" + b"\x00\x01\x01\x00",
        1,
        Malformed.STRUCTURE,
    ),
    "record ends inside a varint": (varint(2) + b"\x00\x80", 1, Malformed.STRUCTURE),
}


def _header_cases() -> dict[str, tuple[bytes, int, Malformed]]:
    # Header fields that lie, each sealed inside a record whose length is true.
    def with_header(raw_header: bytes) -> bytes:
        body = b"\x00" + varint(0) + varint(0) + varint(-1) + varint(-1) + varint(1) + raw_header
        return varint(len(body)) + body

    return {
        "header key runs past its record": (
            with_header(varint(30) + b"ab" + varint(-1)),
            1,
            Malformed.OVERRUN,
        ),
        "header value runs past its record": (
            with_header(varint(1) + b"h" + varint(30) + b"ab"),
            1,
            Malformed.OVERRUN,
        ),
        "negative header key length": (
            with_header(varint(-1) + varint(-1)),
            1,
            Malformed.HEADER_KEY_NEGATIVE,
        ),
    }


CASES = {**MALFORMED, **_header_cases()}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("walk", WALKERS)
def test_malformed_records_are_named(walk, name):
    data, count, kind = CASES[name]
    result = walk(data, 0, len(data), count, False)
    assert result[0] == kind, result
    with pytest.raises(InvalidRecordError):
        summarize(result)


def test_walk_records_raises_invalid_record_with_kafkas_wording():
    data = _one(key=b"k", key_length=2_000)
    with pytest.raises(InvalidRecordError, match="Invalid record size: expected to read"):
        walk_records(data, 0, len(data), 1)
    data = records(2)
    with pytest.raises(InvalidRecordError, match="records still remaining"):
        walk_records(data, 0, len(data), 1)
    assert walk_records(records(2), 0, len(records(2)), 2, find_keyless=True) == RecordsSummary(
        0, 0, []
    )


def test_damaged_batches_the_walk_accepts_decode():
    """Random damage to well-formed records: a batch the walk accepts decodes record by
    record."""
    rng = random.Random(937)
    base = b"".join(
        record(
            offset_delta=i,
            timestamp_delta=rng.randrange(-1000, 1000),
            key=None if i % 2 else b"k%d" % i,
            value=b"v" * rng.randrange(0, 200),
            headers=[(b"h", b"x")] if i % 3 == 0 else (),
        )
        for i in range(20)
    )
    accepted = 0
    for _ in range(4000):
        data = bytearray(base)
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        count = 20 + rng.choice([0, 0, 0, -1, 1])
        result = python_walk(bytes(data), 0, len(data), count, True)
        if result[0] == 0:
            accepted += 1
            sealed = bytearray(batch(bytes(data), count, base_timestamp=0, max_timestamp=0))
            assert len(decode_records(sealed, split_batches(sealed)[0])) == count
    assert accepted > 100  # damage that keeps the structure (values, timestamps) passes
