"""scan_record_keys (the log cleaner's read of a batch) gives each record's offset, key and
whether its value is null, as decode_records decodes them, for every codec, and refuses a
batch whose records do not fit it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.protocol.compression import Codec
from brook.protocol.errors import InvalidRecordError
from brook.protocol.record_batch import (
    Record,
    build_batch,
    decode_records,
    parse_header,
    scan_record_keys,
)

records = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=10)), max_size=3),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60)
@given(
    records, st.sampled_from([Codec.NONE, Codec.GZIP, Codec.LZ4, Codec.ZSTD]), st.integers(0, 10**6)
)
def test_the_scan_agrees_with_the_full_decode(
    fields: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: int,
    base: int,
) -> None:
    batch = build_batch(
        [Record(base + i, 1_700_000_000_000 + i, k, v, h) for i, (k, v, h) in enumerate(fields)],
        base_offset=base,
        codec=codec,
    )
    header = parse_header(batch, 0)
    decoded = decode_records(batch, header)
    assert scan_record_keys(batch, header) == [(r.offset, r.key, r.value is None) for r in decoded]


def test_a_record_longer_than_its_batch_is_refused() -> None:
    batch = bytearray(build_batch([Record(0, 1, b"k", b"value")]))
    header = parse_header(batch, 0)
    batch[61] = 0x7E  # the first record's length varint (63 bytes), past the batch's end
    with pytest.raises(InvalidRecordError):
        scan_record_keys(bytes(batch), header)


@settings(max_examples=200)
@given(records, st.data())
def test_a_damaged_batch_is_refused_or_read_as_the_full_decode_reads_it(
    fields: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    data: st.DataObject,
) -> None:
    """Bytes of the records section changed at random: the scan raises INVALID_RECORD
    (never another error), or, where the full decode reads the damaged batch, agrees
    with it."""
    batch = bytearray(
        build_batch(
            [Record(i, 1_700_000_000_000 + i, k, v, h) for i, (k, v, h) in enumerate(fields)]
        )
    )
    header = parse_header(batch, 0)
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(61, len(batch) - 1))  # past the batch header
        batch[position] = data.draw(st.integers(0, 255))
    try:
        scanned = scan_record_keys(bytes(batch), header)
    except InvalidRecordError:
        return
    try:
        decoded = decode_records(bytes(batch), header)
    except InvalidRecordError:
        return
    assert scanned == [(r.offset, r.key, r.value is None) for r in decoded]
