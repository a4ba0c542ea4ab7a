"""The record walk: every field of every record must add up.

Records are built field by field (tests/crafted_batches.py), so each malformed case
below breaks exactly one rule, and the walk must name it. The walk reads most records on
fast paths (straight-line code, and whole runs of same-shaped records at once) and
hands the rest to careful_walk; careful_walk alone, record after record, is the
reference the fast paths are held to, on crafted, generated and damaged batches.
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
    careful_walk_all,
    summarize,
    walk,
    walk_records,
)

WALKERS = [pytest.param(walk, id="walk"), pytest.param(careful_walk_all, id="careful")]


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
    """Random damage to well-formed records: the walk answers as careful_walk does, and
    a batch it accepts decodes record by record."""
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
        result = walk(bytes(data), 0, len(data), count, True)
        assert result == careful_walk_all(bytes(data), 0, len(data), count, True), data.hex()
        if result[0] == 0:
            accepted += 1
            sealed = bytearray(batch(bytes(data), count, base_timestamp=0, max_timestamp=0))
            assert len(decode_records(sealed, split_batches(sealed)[0])) == count
    assert accepted > 100  # damage that keeps the structure (values, timestamps) passes


def _shaped_records(rng: random.Random, count: int) -> tuple[bytes, int]:
    """Records as producers send them: mostly one shape (one value size, key, header set,
    timestamp deltas in one range), with now and then one that is not."""
    key = rng.choice([None, b"", b"key-00001", b"k" * 70])
    value_size = rng.choice([0, 5, 100, 1024])
    headers = rng.choice([(), [(b"trace", b"abc")], [(b"a", None), (b"b" * 70, b"c" * 200)]])
    deltas = rng.choice([[0, 1, 2, 5], [60, 63, 64, 70], [100, 900, 8000], [-90, -70], [-5, 300]])
    body = b"".join(
        record(
            offset_delta=i,
            timestamp_delta=rng.choice(deltas),
            key=key,
            value=b"v" * value_size,
            headers=headers,
        )
        if rng.random() > 0.02
        else record(
            offset_delta=i,
            timestamp_delta=rng.choice([-70, 1 << 40, 5]),
            key=rng.choice([None, b"odd"]),
            value=rng.choice([None, b"w" * rng.randrange(300)]),
            headers=rng.choice([(), [(b"h", b"x")]]),
        )
        for i in range(count)
    )
    return body, count


def _starts(data: bytes, count: int) -> list[int]:
    starts = []
    position = 0
    for _ in range(count):
        starts.append(position)
        length, after = _short_length(data, position)
        position = after + length
    return starts


def _short_length(data: bytes, position: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        b = data[position]
        position += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7


@pytest.mark.parametrize("seed", range(6))
def test_walk_answers_as_careful_walk_on_shaped_and_damaged_batches(seed):
    """Runs of same-shaped records (one- and two-byte timestamp deltas, negative ones,
    headers, null keys, offset deltas of 1, 2 and 3 bytes), each then damaged in the
    bytes that give records their shape: every answer is careful_walk's."""
    rng = random.Random(seed)
    for count in (9, 70, 300, 8300 if seed == 0 else 1000):
        body, count = _shaped_records(rng, count)
        padded = b"\xff" * 3 + body + b"\x80" * 4  # the walk must keep to its slice
        for data in (padded, bytearray(padded), memoryview(bytearray(padded))):
            assert walk(data, 3, 3 + len(body), count, True) == careful_walk_all(
                padded, 3, 3 + len(body), count, True
            )
        starts = _starts(body, count)
        for _ in range(12):
            damaged = bytearray(body)
            at = min(rng.choice(starts) + rng.randrange(20), len(damaged) - 1)
            damaged[at] = rng.randrange(256) if rng.random() < 0.5 else damaged[at] ^ 0x80
            claimed = count + rng.choice([0, 0, 0, 1, -1])
            expected = careful_walk_all(bytes(damaged), 0, len(damaged), claimed, True)
            assert walk(damaged, 0, len(damaged), claimed, True) == expected, (at, expected)
        cut = rng.randrange(len(body))
        assert walk(body[:cut], 0, cut, count, True) == careful_walk_all(
            body[:cut], 0, cut, count, True
        )


def test_uniform_records_summarized_exactly():
    # 9000 records of one shape: the extremes and the keyless records come out of runs.
    deltas = [(i * 7) % 50 for i in range(9000)]
    deltas[4321] = -64
    deltas[8888] = 63
    body = records(9000, timestamp_deltas=deltas, key=None, value=b"x" * 100)
    assert walk(body, 0, len(body), 9000, True) == (0, -64, 63, list(range(9000)))
    wide = [100 + i % 1000 for i in range(2000)]
    wide[1500] = 8191
    body = records(2000, timestamp_deltas=wide, key=b"k", value=b"x" * 10)
    assert walk(body, 0, len(body), 2000, False) == (0, 100, 8191, None)
    negative = [-100 - i % 50 for i in range(2000)]
    body = records(2000, timestamp_deltas=negative, key=b"k", value=b"x" * 10)
    assert walk(body, 0, len(body), 2000, False) == (0, -149, -100, None)


def _sealed(body: bytes) -> bytes:
    return varint(len(body)) + body


@pytest.mark.parametrize(
    "damage, kind",
    [
        ("length", Malformed.OVERRUN),
        ("offset", Malformed.OFFSET_DELTA),
        ("key length", Malformed.OVERRUN),
        ("header count", Malformed.HEADER_COUNT_NEGATIVE),
        ("timestamp", Malformed.STRUCTURE),
    ],
)
def test_a_bad_record_inside_a_uniform_run_is_named(damage, kind):
    good = [record(offset_delta=i, key=None, value=b"x" * 100) for i in range(500)]
    bad = {
        "length": record(offset_delta=300, key=None, value=b"x" * 100, length=105),
        "offset": record(offset_delta=301, key=None, value=b"x" * 100),
        "key length": record(offset_delta=300, key=None, value=b"x" * 100, key_length=110),
        "header count": record(offset_delta=300, key=None, value=b"x" * 100, header_count=-1),
        # A timestamp delta of 11 bytes, in a record whose length is true.
        "timestamp": _sealed(
            b"\x00"
            + b"\xff" * 10
            + b"\x01"
            + varint(300)
            + varint(-1)
            + varint(100)
            + b"x" * 100
            + b"\x00"
        ),
    }[damage]
    good[300] = bad
    body = b"".join(good)
    result = walk(body, 0, len(body), 500, False)
    assert result == careful_walk_all(body, 0, len(body), 500, False)
    assert result[:2] == (kind, 300)


def test_varints_in_longer_form_than_needed_are_read_as_kafka_reads_them():
    # Offset deltas of 0-63 written in two bytes (0x80 | v, 0x00): Kafka's readVarint
    # reads them, and so must the walk, though records so written never form a run.
    body = b"".join(
        _sealed(
            b"\x00"
            + varint(i % 3)
            + bytes((0x80 | (2 * i & 0x7F), 2 * i >> 7))
            + varint(-1)
            + varint(20)
            + b"y" * 20
            + b"\x00"
        )
        for i in range(60)
    )
    assert walk(body, 0, len(body), 60, True) == (0, 0, 2, list(range(60)))
    assert careful_walk_all(body, 0, len(body), 60, True) == (0, 0, 2, list(range(60)))


def test_a_large_decompressed_batch_is_read_in_place():
    # Past 8 MiB a decompressed batch (a memoryview) is not copied; the answer is the same.
    body = records(80_000, key=None, value=b"z" * 100, timestamp_deltas=range(80_000))
    assert len(body) > 8 * 1024 * 1024
    view = memoryview(bytearray(body))
    assert walk(view, 0, len(body), 80_000, True) == (0, 0, 79_999, list(range(80_000)))
    damaged = bytearray(body)
    damaged[_starts(body, 40_001)[-1]] = 0  # record 40000's length
    expected = careful_walk_all(damaged, 0, len(body), 80_000, False)
    assert expected[:2] == (Malformed.RECORD_SIZE, 40_000)
    assert walk(memoryview(damaged), 0, len(body), 80_000, False) == expected
