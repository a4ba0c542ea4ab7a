"""The columnar decode of the data source's records mode (brook.spark.record_columns) gives
what decode_records gives, record for record, for every codec and shape of record; and on
bytes decode_records refuses it refuses too (Undecodable, so that the caller decodes the
batch the slow way and reports the fault), never a wrong row. No Spark here: plain Arrow."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.protocol.compression import Codec
from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.protocol.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    Record,
    build_batch,
    decode_records,
    inflated_records,
    parse_header,
)
from brook.spark.record_columns import RecordColumns, Undecodable, decode_columns

# Keys and values of every size class: null, empty, inline in a view (up to 12 bytes) and
# not; header keys of any text (their UTF-8 of several bytes).
records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=14)), max_size=3),
        st.integers(0, 3),  # the gap before the record's offset (a compacted batch has some)
        st.integers(-(2**40), 2**40),  # its timestamp delta
    ),
    min_size=1,
    max_size=20,
)
CODECS = st.sampled_from([Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])


def batch_of(fields: list[Any], codec: int, base: int) -> bytes:
    built, offset = [], base
    for key, value, headers, gap, delta in fields:
        offset += gap
        built.append(Record(offset, 1_700_000_000_000 + delta, key, value, headers))
        offset += 1
    return build_batch(built, base_offset=base, codec=codec)


def columns_of(batches: list[bytes]) -> RecordColumns:
    headers = [parse_header(batch, 0) for batch in batches]
    sections = [inflated_records(memoryview(b), h) for b, h in zip(batches, headers, strict=True)]
    return decode_columns(headers, sections)


def rows(columns: RecordColumns) -> list[tuple[Any, ...]]:
    return list(
        zip(
            columns.batch_of_record.tolist(),
            columns.offset.tolist(),
            columns.timestamp.tolist(),
            columns.key.to_pylist(),
            columns.value.to_pylist(),
            [[(h["key"], h["value"]) for h in row] for row in columns.headers.to_pylist()],
            strict=True,
        )
    )


def expected_rows(batches: list[bytes]) -> list[tuple[Any, ...]]:
    return [
        (index, r.offset, r.timestamp, r.key, r.value, r.headers)
        for index, batch in enumerate(batches)
        for r in decode_records(batch, parse_header(batch, 0))
    ]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(records, CODECS, st.integers(0, 10**12)), min_size=1, max_size=4))
def test_a_run_of_batches_decodes_as_each_batch_does(batches: list[Any]) -> None:
    built = [batch_of(fields, codec, base) for fields, codec, base in batches]
    assert rows(columns_of(built)) == expected_rows(built)


@settings(max_examples=300, deadline=None)
@given(records, st.data())
def test_damaged_records_are_refused_or_read_as_decode_records_reads_them(
    fields: list[Any], data: st.DataObject
) -> None:
    """Bytes of the records section changed at random (the CRC is not the decoder's
    business: the data source checks it first)."""
    batch = bytearray(batch_of(fields, Codec.NONE, 0))
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.integers(HEADER_SIZE, len(batch) - 1))
        batch[where] = data.draw(st.integers(0, 255))
    damaged = bytes(batch)
    try:
        expected = expected_rows([damaged])
    except (InvalidRecordError, CorruptRecordError):
        with pytest.raises(Undecodable):
            columns_of([damaged])
        return
    try:
        assert rows(columns_of([damaged])) == expected
    except Undecodable:
        # Only what decode_records has to replace: a header key that is not UTF-8.
        assert any("\ufffd" in name for *_, headers in expected for name, _ in headers)


def test_a_record_running_into_the_next_batch_is_refused() -> None:
    """Each batch's records must end where the batch does, though the next batch's bytes
    follow in the run's buffer."""
    first = bytearray(batch_of([(b"k", b"v" * 30, [], 0, 0)], Codec.NONE, 0))
    first[HEADER_SIZE] += 2  # the record's length varint: one byte more than it has
    second = batch_of([(b"k", b"v", [], 0, 0)], Codec.NONE, 1)
    with pytest.raises(InvalidRecordError):
        decode_records(bytes(first), parse_header(first, 0))
    with pytest.raises(Undecodable):
        columns_of([bytes(first), second])


def test_a_header_key_not_utf8_is_left_to_decode_records() -> None:
    batch = batch_of([(None, b"v", [("ab", b"x")], 0, 0)], Codec.NONE, 0)
    at = batch.index(b"ab")
    damaged = batch[:at] + b"\xff\xfe" + batch[at + 2 :]
    header: BatchHeader = parse_header(damaged, 0)
    assert decode_records(damaged, header)[0].headers == [("\ufffd\ufffd", b"x")]
    with pytest.raises(Undecodable):
        columns_of([damaged])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 300),  # records, their offset deltas past 63 taking two bytes
            st.integers(0, 200),  # value size
            st.lists(st.tuples(st.integers(0, 299), st.integers(0, 300)), max_size=3),
        ),
        min_size=1,
        max_size=6,
    ),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=2),
)
def test_batches_of_records_of_one_size_decode_as_each_batch_does(
    shapes: list[tuple[int, int, list[tuple[int, int]]]], damage: list[tuple[int, int]]
) -> None:
    """Records of one shape (the stretches of one size the decoder places at once), some
    of another size among them, and maybe a byte changed somewhere in the run."""
    built = []
    for count, value_size, odd in shapes:
        sizes = [value_size] * count
        for index, size in odd:
            if index < count:
                sizes[index] = size
        fields = [(b"key", b"v" * size, [("h", b"x")], 0, i * 7) for i, size in enumerate(sizes)]
        built.append(batch_of(fields, Codec.NONE, 0))
    for where, value in damage:
        batch = bytearray(built[where % len(built)])
        batch[HEADER_SIZE + where % (len(batch) - HEADER_SIZE)] = value
        built[where % len(built)] = bytes(batch)
    try:
        expected = expected_rows(built)
    except (InvalidRecordError, CorruptRecordError):
        with pytest.raises(Undecodable):
            columns_of(built)
        return
    try:
        assert rows(columns_of(built)) == expected
    except Undecodable:
        assert any("\ufffd" in name for *_, headers in expected for name, _ in headers)
