"""The records of many batches decoded into Arrow columns at once, with numpy and Arrow.

The data source's row-level read decodes every record. Decoded one at a time in Python
(protocol.record_batch.decode_records: some ten varints, slices and a Record per record)
and then turned from Python objects into Arrow arrays, a record costs a few microseconds;
here only the walk from one record's start to the next is a Python loop (one length
varint per record, read inline). Every field after the length is read for all records of
the run at once, a byte column at a time, and keys, values and header fields are not
copied out one by one: they become Arrow binary views into the records' bytes (Arrow's
BinaryView layout: a 16-byte view per value, the short ones inline), which one Arrow cast
gathers into the plain binary arrays Spark takes.

What this decoder will not take (a varint longer than its type, a field past its record,
offset deltas out of order, a header key that is not UTF-8, a column of more than 2 GiB)
ends the run with `Undecodable`: the caller then decodes those batches one at a time with
decode_records, which names the fault. Both read the same format the same way; the tests
hold this one to decode_records over random batches, valid and damaged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
from kio.serial.readers import read_signed_varint

from brook.protocol.record_batch import BatchHeader

from . import schema

# After the last record: room for the longest varlong and for the 12 bytes a binary view
# copies inline, so that reads that run off a malformed run land in zeros, not past the
# buffer (the checks then refuse the run).
_PADDING = bytes(16)
VARINT_BYTES = 5  # Kafka's varint (an int32) takes at most 5 bytes, its varlong 10
VARLONG_BYTES = 10
_INLINE = 12  # a binary view holds a value of up to 12 bytes itself
# The values of the one-byte zigzag varints, by their byte.
_ZIGZAG_BYTE = np.array([(b >> 1) ^ -(b & 1) for b in range(128)], np.int64)
# The mask of a little-endian word that keeps its first 0, 1, 2, 3 or 4 bytes.
_KEPT_BYTES = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], np.uint32)
_MAX_COLUMN_BYTES = 2**31 - 1  # Arrow's binary type: int32 offsets
_U64 = np.uint64
# Stretches of records of one size placed at once, before a batch is walked record by
# record instead; and the shortest stretch worth that (shorter: the sizes vary too much).
MAX_STRETCHES = 8
MIN_STRETCH = 8


class Undecodable(Exception):
    """The run holds something only a record-by-record decode can name."""


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """The records of a run of batches, in batch order: per record its batch's index in
    the run, offset, timestamp (Kafka milliseconds), key, value and headers."""

    batch_of_record: np.ndarray
    offset: np.ndarray
    timestamp: np.ndarray
    key: pa.Array
    value: pa.Array
    headers: pa.Array

    def __len__(self) -> int:
        return len(self.offset)


def decode_columns(
    headers: Sequence[BatchHeader], sections: Sequence[bytes | memoryview]
) -> RecordColumns:
    """Every record of the batches (`sections[i]` the records section of `headers[i]`,
    inflated), or Undecodable."""
    counts = np.fromiter((h.record_count for h in headers), np.int64, len(headers))
    sizes = np.fromiter(map(len, sections), np.int64, len(sections))
    section_ends = np.cumsum(sizes)
    data = b"".join((*sections, _PADDING))
    if len(data) > _MAX_COLUMN_BYTES:  # a view's offset into the buffer is an int32
        raise Undecodable("a run past 2 GiB")
    try:
        starts = _record_starts(data, section_ends - sizes, section_ends, counts)
        return _decode(data, starts, headers, counts, section_ends)
    except IndexError:  # a read past the padding: lengths far past their records
        raise Undecodable("a record runs past its batch") from None


def _record_starts(
    data_bytes: bytes, section_starts: np.ndarray, section_ends: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """Where each record starts. Each start follows from the one before and its length,
    a chain no array operation follows. But records produced from one shape come in
    stretches of one size (it changes where an offset or timestamp delta needs one more
    varint byte), and along a stretch the starts are an arithmetic series: guessed for
    every batch at once, each guess checked by the size of the record found there, the
    next stretch started at the first record of another size. A batch of short stretches
    (records of many sizes) is walked record by record instead."""
    data = np.frombuffer(data_bytes, np.uint8)
    starts = np.empty(int(counts.sum()), np.int64)
    first_of_batch = np.cumsum(counts) - counts
    position = section_starts.copy()  # of each batch's first record not yet placed
    placed = np.zeros_like(counts)
    walk = np.zeros(len(counts), bool)
    for _ in range(MAX_STRETCHES):
        active = np.flatnonzero(~walk & (placed < counts))
        if not active.size:
            break
        at = position[active]
        size, sound = _record_sizes(data, at)
        # Guesses up to the batch's last record, or as many of this size as fit in it.
        fit = (section_ends[active] - at) // np.maximum(size, 1)
        reach = np.where(sound, np.minimum(counts[active] - placed[active], fit), 0)
        batch = np.repeat(np.arange(len(active)), reach)
        index = np.arange(len(batch)) - np.repeat(np.cumsum(reach) - reach, reach)
        guess = at[batch] + index * size[batch]
        size_there, sound_there = _record_sizes(data, guess)
        other = ~sound_there | (size_there != size[batch])
        # The stretch: the records before the first of another size (whose start is
        # right, and the next stretch's first).
        stretch = reach.copy()
        np.minimum.at(stretch, batch[other], index[other])
        kept = index < stretch[batch]
        starts[(first_of_batch[active] + placed[active])[batch[kept]] + index[kept]] = guess[kept]
        placed[active] += stretch
        position[active] += stretch * size
        walk[active[(stretch < MIN_STRETCH) & (placed[active] < counts[active])]] = True
    walk |= placed < counts
    for uneven in np.flatnonzero(walk).tolist():
        first = int(first_of_batch[uneven])
        count = int(counts[uneven])
        starts[first : first + count] = _walk(
            data_bytes, int(section_starts[uneven]), int(section_ends[uneven]), count
        )
    done = ~walk
    _require(position[done] == section_ends[done], "the records do not end where their batch does")
    return starts


def _record_sizes(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sizes (length varint included) of the records at `at`, and whether each could
    be read so: a length of one or two bytes (a record under 8 KiB), not negative."""
    first = data[at]
    longer = first >= 0x80
    second = data[at + longer].astype(np.int64)  # the first byte again where it is alone
    raw = np.where(longer, (first & 0x7F) | (second << 7), first)
    sound = ~(longer & (second >= 0x80)) & ((raw & 1) == 0)  # zigzag: odd is negative
    return 1 + longer + (raw >> 1), sound


def _walk(data: bytes, position: int, end: int, count: int) -> list[int]:
    """The starts of one batch's records, from each record's length in turn: the one-
    and two-byte lengths read inline, the others by kio's reader."""
    starts: list[int] = []
    append = starts.append
    for _ in repeat(None, count):
        append(position)
        first = data[position]
        if first < 0x80:
            if first & 1:  # zigzag: a negative length
                raise Undecodable("a negative record length")
            position += 1 + (first >> 1)
            continue
        second = data[position + 1]
        if second < 0x80:
            raw = (first & 0x7F) | (second << 7)
            if raw & 1:
                raise Undecodable("a negative record length")
            position += 2 + (raw >> 1)
            continue
        try:
            length, size = read_signed_varint(data, position)
        except ValueError:
            raise Undecodable("a record length longer than a varint") from None
        if length < 0:
            raise Undecodable("a negative record length")
        position += size + length
    if position != end:
        raise Undecodable("the records do not end where their batch does")
    return starts


def _varints(
    data: np.ndarray, at: np.ndarray, max_bytes: int
) -> tuple[np.ndarray, np.ndarray | int]:
    """The zigzag varints starting at `at`: their values and their sizes in bytes, read a
    byte column at a time over the varints still going on (when all take one byte, as
    deltas and short lengths do, one table lookup and size 1 for all)."""
    first = data[at]
    if not first.size or first.max() < 0x80:
        return _ZIGZAG_BYTE[first], 1
    byte = first.astype(_U64)
    raw = byte & _U64(0x7F)
    size = np.ones(len(at), np.int64)
    going = np.flatnonzero(byte >= 0x80)
    shift = 7
    while going.size:
        if shift == 7 * max_bytes:
            raise Undecodable("a varint longer than its type")
        byte = data[at[going] + (shift // 7)].astype(_U64)
        raw[going] |= (byte & _U64(0x7F)) << _U64(shift)
        size[going] += 1
        going = going[byte >= 0x80]
        shift += 7
    if max_bytes == VARINT_BYTES and raw.size and int(raw.max()) >= 2**32:
        raise Undecodable("a varint past 32 bits")
    values = (raw >> _U64(1)).astype(np.int64) ^ -(raw & _U64(1)).astype(np.int64)
    return values, size


def _require(holds: np.ndarray | bool, what: str) -> None:
    if not np.all(holds):
        raise Undecodable(what)


def _decode(
    data_bytes: bytes,
    starts: np.ndarray,
    headers: Sequence[BatchHeader],
    counts: np.ndarray,
    section_ends: np.ndarray,
) -> RecordColumns:
    data = np.frombuffer(data_bytes, np.uint8)
    batch_of_record = np.repeat(np.arange(len(headers), dtype=np.int32), counts)
    length, size = _varints(data, starts, VARINT_BYTES)
    position = starts + size
    end = position + length
    _require(length >= 0, "a negative record length")
    _require(end <= section_ends[batch_of_record], "a record past its batch")
    position += 1  # the attributes, unused in v2
    timestamp_delta, size = _varints(data, position, VARLONG_BYTES)
    position += size
    offset_delta, size = _varints(data, position, VARINT_BYTES)
    position += size
    _check_offset_deltas(offset_delta, headers, counts, batch_of_record)
    key_length, size = _varints(data, position, VARINT_BYTES)
    key_start = position + size
    position = key_start + np.maximum(key_length, 0)
    _require(position <= end, "a key past its record")
    value_length, size = _varints(data, position, VARINT_BYTES)
    value_start = position + size
    position = value_start + np.maximum(value_length, 0)
    _require(position <= end, "a value past its record")
    header_count, size = _varints(data, position, VARINT_BYTES)
    _require(header_count >= 0, "a negative header count")
    position += size
    buffer = pa.py_buffer(data_bytes)
    record_headers = _headers(data, buffer, position, end, header_count)
    base_offsets = np.fromiter((h.base_offset for h in headers), np.int64, len(headers))
    base_timestamps = np.fromiter((h.base_timestamp for h in headers), np.int64, len(headers))
    return RecordColumns(
        batch_of_record=batch_of_record,
        offset=base_offsets[batch_of_record] + offset_delta,
        timestamp=base_timestamps[batch_of_record] + timestamp_delta,
        key=_binary(data, buffer, key_start, key_length, pa.binary()),
        value=_binary(data, buffer, value_start, value_length, pa.binary()),
        headers=record_headers,
    )


def _check_offset_deltas(
    offset_delta: np.ndarray,
    headers: Sequence[BatchHeader],
    counts: np.ndarray,
    batch_of_record: np.ndarray,
) -> None:
    """Deltas rise within each batch and stay within its range (decode_records' check)."""
    last_delta = np.fromiter((h.last_offset_delta for h in headers), np.int64, len(headers))
    previous = np.empty_like(offset_delta)
    previous[0:1] = -1
    previous[1:] = offset_delta[:-1]
    first_of_batch = np.cumsum(counts) - counts
    previous[first_of_batch[counts > 0]] = -1
    _require(offset_delta > previous, "offset deltas out of order")
    _require(offset_delta <= last_delta[batch_of_record], "an offset delta past its batch")


def _headers(
    data: np.ndarray, buffer: pa.Buffer, position: np.ndarray, end: np.ndarray, count: np.ndarray
) -> pa.Array:
    """The records' headers, walked field by field (the k-th header of every record that
    has k at once), after checking that each record ends where its length says."""
    total = int(count.sum())
    first = np.cumsum(count) - count  # each record's first header, in header order
    key_start = np.zeros(total, np.int64)
    key_length = np.zeros(total, np.int64)
    value_start = np.zeros(total, np.int64)
    value_length = np.zeros(total, np.int64)
    position = position.copy()
    for k in range(int(count.max()) if total else 0):
        records = np.flatnonzero(count > k)
        at = position[records]
        _require(at < end[records], "a header past its record")
        length, size = _varints(data, at, VARINT_BYTES)
        _require(length >= 0, "a null header key")
        index = first[records] + k
        key_start[index] = at + size
        key_length[index] = length
        at = at + size + length
        _require(at <= end[records], "a header key past its record")
        length, size = _varints(data, at, VARINT_BYTES)
        value_start[index] = at + size
        value_length[index] = length
        position[records] = at + size + np.maximum(length, 0)
    _require(position == end, "bytes after a record's last field")
    offsets = np.zeros(len(count) + 1, np.int32)
    np.cumsum(count, out=offsets[1:])
    try:
        keys = _binary(data, buffer, key_start, key_length, pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:  # not UTF-8: decode_records replaces what is not
        raise Undecodable("a header key that is not UTF-8") from None
    values = _binary(data, buffer, value_start, value_length, pa.binary())
    entries = pa.StructArray.from_arrays([keys, values], fields=list(schema.HEADER))
    return pa.ListArray.from_arrays(pa.array(offsets), entries, type=pa.list_(schema.HEADER))


def _binary(
    data: np.ndarray, buffer: pa.Buffer, start: np.ndarray, length: np.ndarray, kind: pa.DataType
) -> pa.Array:
    """Values at `start` of `length` bytes (negative: null) as an Arrow binary array, made
    as binary views into `buffer` and gathered by one cast."""
    count = len(start)
    valid = length >= 0
    size = np.where(valid, length, 0)
    if int(size.sum()) > _MAX_COLUMN_BYTES:
        raise Undecodable("a column past 2 GiB")
    # A view, four 32-bit words: the length, then the value itself if it fits in 12 bytes
    # (zero after it), or else its first 4 bytes, the buffer's index (0, the only one)
    # and the value's offset in the buffer. Arrow is little-endian here, as numpy's words.
    views = np.zeros((count, 4), np.uint32)
    views[:, 0] = size
    words = _words(data)
    long_rows = size > _INLINE
    if long_rows.all():
        views[:, 1] = words[start]
        views[:, 3] = start
    else:
        for word in range(3):
            kept = _KEPT_BYTES[np.clip(size - 4 * word, 0, 4)]
            views[:, 1 + word] = words[start + 4 * word] & kept
        if long_rows.any():
            views[long_rows, 2] = 0
            views[long_rows, 3] = start[long_rows]
    nulls = count - int(valid.sum())
    validity = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    array = pa.Array.from_buffers(
        pa.binary_view(), count, [validity, pa.py_buffer(views), buffer], null_count=nulls
    )
    return array.cast(kind)


def _words(data: np.ndarray) -> np.ndarray:
    """The little-endian 32-bit word at every byte of the buffer (unaligned, overlapping):
    gathering from it reads 4 bytes a value in one step."""
    return np.ndarray(shape=(len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
