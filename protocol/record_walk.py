"""One pass over the records of a v2 batch: checks their structure, learns their timestamps.

Kafka's broker reads every record of a produced batch (DefaultRecord.readFrom for an
uncompressed batch, readPartiallyFrom for a decompressed one) before it writes the batch,
so a record whose fields do not add up to its length is refused with INVALID_RECORD
instead of being stored for consumers to choke on. This module does the same reading
without building a record object. For each record it reads the length, attributes,
timestamp delta, offset delta, key length, value length, header count and header lengths,
skips the bytes they name, and checks that they end exactly where the length said:

- a record starts before the batch ends and its length (> 0) fits in what is left;
- every varint ends inside its record (a Java int takes at most 5 bytes, a long 10);
- offset deltas run 0, 1, 2, ... (Kafka keeps other deltas of an uncompressed batch and
  rewrites a compressed batch that has them; no v2 producer writes them, and Brook's log
  takes a record's offset to be the batch's base offset plus its index, so it refuses
  them);
- a negative key, value or header-value length is null (as Kafka reads it), a header
  key length is 0 or more, the header count 0 or more and no larger than the bytes left,
  and nothing runs past its record;
- the records end exactly where the batch does.

This runs for every record of every produced batch, so it is written for speed, in
three layers that give one answer. careful_walk reads every varint in full and is the
judge: every refusal, and its message, comes from it. walk reads most records with
straight-line code (short varints inline, no calls) and hands careful_walk any record
that does not fit it. And when consecutive records have one shape (the same size, key
and header lengths: values of one size, as from many producers and benchmarks),
_uniform_run checks a whole run of them at once with strided slices of the bytes, so
that the per-record work happens inside bytes' own methods. Records whose sizes vary get
the straight-line code only, about 1.6 times as fast as careful_walk.

Nanoseconds a record, `python -m bench.record_walk` (one batch of 9000 records of 100 B
or 976 of 1 KiB, random values, timestamps within about 10 ms; best of 40 in one process
on the shared 2-core machine at a load of about 1; "careful" is careful_walk_all, careful_walk
record after record, which is what the walk was before the fast paths):

| records                                  | careful | walk |
| ---------------------------------------- | ------- | ---- |
| 100 B, no key                            |    1110 |   48 |
| 100 B, 12 B key                          |    1200 |   45 |
| 1 KiB, no key                            |    1130 |   71 |
| 1 KiB, 12 B key                          |    1220 |   72 |
| 100 B, 2 headers                         |    2830 |   59 |
| 100 B, timestamps over 1 s (2-byte)      |    1400 |   74 |
| 100 B, zstd (after inflating)            |    1120 |   50 |
| 50-150 B values (no runs: straight-line) |    1080 |  671 |
| 100 B, a batch of 10                     |    1010 |  510 |
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from typing import cast

from .errors import InvalidRecordError

INT_BYTES = 5  # a Java int as a varint
LONG_BYTES = 10  # a Java long as a varlong
_LOW = (1 << 63) - 1
_HIGH = -(1 << 63)

# (0, lowest and highest timestamp delta, keyless indexes) or (Malformed, index, a, b).
WalkResult = tuple[int, int, int, list[int] | None] | tuple[int, int, int, int]

# A position past any buffer: the straight-line walk sets it where a field is not one it
# reads, so that the next read raises IndexError and the record goes to careful_walk.
_NOWHERE = 1 << 62
# The largest decompressed batch copied to bytes for the walk (as compression.py's
# retained scratch buffer).
_MAX_COPY = 8 * 1024 * 1024
# Uniform runs: tried from this many records on (a try costs a few records' worth of
# work), over a window that grows with the runs found, and after a failed try only once
# this many records later, doubling up to the maximum.
_MIN_RUN = 8
_MAX_RUN_BACKOFF = 64
_NO_RUN = (0, 0, 0)
# The bytes of the offset deltas 0, 1, 2, ... as zig-zag varints, one table per byte:
# 1 byte for 0-63; 2 bytes for 64-8191; 3 bytes for 8192 on, whose first two bytes
# repeat every 8192 deltas and whose third changes only then.
_OFFSET_1 = bytes(range(0, 128, 2))
_OFFSET_LOW = bytes(range(0x80, 0x100, 2)) * 128
_OFFSET_2_HIGH = b"".join(bytes((v,)) * 64 for v in range(128))
_OFFSET_3_MIDDLE = b"".join(bytes((0x80 | v,)) * 64 for v in range(128))
# A one-byte zig-zag timestamp delta mapped to delta + 64 (0-127), which orders as the
# deltas do; a byte that starts a longer varint maps to 0xFF.
_DELTA_ORDER = bytes(64 + ((z >> 1) ^ -(z & 1)) if z < 0x80 else 0xFF for z in range(256))
# For two-byte deltas: whether a byte ends a varint (1) or not (0); the even bytes; a
# first byte's value bits without the sign bit, and where those go in a 16-bit number.
_ENDS = bytes(b < 0x80 for b in range(256))
_EVEN = bytes(range(0, 256, 2))
_DELTA_LOW_6 = bytes((b & 0x7F) >> 1 for b in range(256))
_LOW_BYTE_AT = 0 if sys.byteorder == "little" else 1


class Malformed(enum.IntEnum):
    """Why a batch's records do not add up."""

    PREMATURE_EOF = 1
    RECORD_SIZE = 2
    OFFSET_DELTA = 3
    OVERRUN = 4
    HEADER_COUNT_NEGATIVE = 5
    HEADER_COUNT_LARGE = 6
    HEADER_KEY_NEGATIVE = 7
    TRAILING = 8
    STRUCTURE = 9

    def describe(self, index: int, a: int, b: int) -> str:
        """Kafka's wording where it has one (DefaultRecord, DefaultRecordBatch)."""
        where = f" (record {index})"
        match self:
            case Malformed.PREMATURE_EOF:
                return "Incorrect declared batch size, premature EOF reached" + where
            case Malformed.RECORD_SIZE:
                return (
                    f"Invalid record size: expected {a} bytes in record payload, but instead"
                    f" the buffer has only {b} remaining bytes." + where
                )
            case Malformed.OFFSET_DELTA:
                return f"Record {index} has offset delta {a}, not {index}"
            case Malformed.OVERRUN:
                return (
                    f"Invalid record size: expected to read {a} bytes in record payload, but"
                    f" instead read {b}" + where
                )
            case Malformed.HEADER_COUNT_NEGATIVE:
                return f"Found invalid number of record headers {a}" + where
            case Malformed.HEADER_COUNT_LARGE:
                return (
                    f"Found invalid number of record headers. {a} is larger than the remaining"
                    " size of the buffer" + where
                )
            case Malformed.HEADER_KEY_NEGATIVE:
                return f"Invalid negative header key size {a}" + where
            case Malformed.TRAILING:
                return "Incorrect declared batch size, records still remaining in file"
            case Malformed.STRUCTURE:
                return "Found invalid record structure" + where


@dataclass(slots=True)
class RecordsSummary:
    """What the walk learned about a batch's records, for timestamp and key checks."""

    min_timestamp_delta: int
    max_timestamp_delta: int
    # Batch indexes of records whose key is null, when the caller asked for them.
    keyless: list[int] | None


def walk_records(
    data: bytes | bytearray | memoryview,
    position: int,
    end: int,
    record_count: int,
    *,
    find_keyless: bool = False,
) -> RecordsSummary:
    """Check the `record_count` records in `data[position:end]`; raise INVALID_RECORD."""
    return summarize(walk(data, position, end, record_count, find_keyless))


def summarize(result: WalkResult) -> RecordsSummary:
    """A walker's answer as a summary, or its complaint as INVALID_RECORD."""
    kind, first, second, third = result
    if kind:
        assert isinstance(third, int)
        raise InvalidRecordError(Malformed(kind).describe(first, second, third))
    assert not isinstance(third, int)
    return RecordsSummary(first, second, third)


def walk(
    data: bytes | bytearray | memoryview,
    position: int,
    end: int,
    record_count: int,
    find_keyless: bool,
) -> WalkResult:
    """The walk: (0, low, high, keyless), or (Malformed kind, record index, details).

    Three speeds, one answer. A record whose varints are short and canonical-sized (1 or
    2 bytes; 1 to 3 for the offset delta) is read by the straight-line code below, with no
    calls. When such a record is followed by records of its shape, _uniform_run checks
    them all at once. Anything else (a long varint, a negative length, a bad field, a
    record near the end of the data) goes to careful_walk, which decides. The straight-line
    code reads no further than the data (a read past it raises IndexError, caught) and
    accepts a record only when its fields end exactly at the record's end, so reads past
    the record cannot make it accept one that careful_walk would refuse.
    """
    run_at = 0  # the first index after which a uniform run is tried
    if type(data) is memoryview:  # a decompressed batch
        if end - position <= _MAX_COPY:
            # Indexing bytes costs about half as much as indexing a memoryview, and runs
            # need bytes' methods: one copy pays for itself.
            data = bytes(data[position:end])
            end -= position
            position = 0
        else:
            # Read in place, without runs: a copy would double the memory that
            # decompression is bounded to.
            run_at = record_count
    low = _LOW
    high = _HIGH
    keyless: list[int] | None = [] if find_keyless else None
    index = 0
    run_window = _MIN_RUN * 4
    run_backoff = 1
    record_end = 0
    while index < record_count:
        try:
            b = data[position]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p = position + 2  # past the length and the attributes
            else:
                c = data[position + 1]
                raw = (b & 0x7F) | c << 7
                length = (raw >> 1) ^ -(raw & 1) if c < 0x80 else 0
                p = position + 3
            record_end = p - 1 + length
            # A length of 0 or less puts record_end before p, which only grows: such a
            # record never ends where it should here, and careful_walk names it.
            if record_end > end:
                p = _NOWHERE
            b = data[p]
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                c = data[p + 1]
                raw = (b & 0x7F) | c << 7
                delta = (raw >> 1) ^ -(raw & 1)
                p += 2 if c < 0x80 else _NOWHERE
            b = data[p]
            expected = index << 1  # the offset delta, zig-zag encoded
            if b == expected < 0x80:
                p += 1
            elif b >= 0x80:
                c = data[p + 1]
                if c < 0x80:
                    p += 2 if (b & 0x7F) | c << 7 == expected else _NOWHERE
                else:
                    d = data[p + 2]
                    raw = (b & 0x7F) | (c & 0x7F) << 7 | d << 14
                    p += 3 if d < 0x80 and raw == expected else _NOWHERE
            else:
                p = _NOWHERE
            b = data[p]
            key_null = b & 1
            if b < 0x80:
                p += 1 if key_null else 1 + (b >> 1)
            else:
                c = data[p + 1]
                raw = (b & 0x7F) | c << 7
                p += 2 + (raw >> 1) if c < 0x80 and not raw & 1 else _NOWHERE
            b = data[p]
            if b < 0x80:
                p += 1 if b & 1 else 1 + (b >> 1)
            else:
                c = data[p + 1]
                raw = (b & 0x7F) | c << 7
                p += 2 + (raw >> 1) if c < 0x80 and not raw & 1 else _NOWHERE
            b = data[p]
            p += 1
            if b:  # headers: a count below 64, 1- or 2-byte lengths
                if b >= 0x80 or b & 1:
                    p = _NOWHERE
                for _ in range(b >> 1):
                    b = data[p]
                    if b < 0x80:
                        p += 1 + (b >> 1) if not b & 1 else _NOWHERE
                    else:
                        c = data[p + 1]
                        raw = (b & 0x7F) | c << 7
                        p += 2 + (raw >> 1) if c < 0x80 and not raw & 1 else _NOWHERE
                    b = data[p]
                    if b < 0x80:
                        p += 1 if b & 1 else 1 + (b >> 1)
                    else:
                        c = data[p + 1]
                        raw = (b & 0x7F) | c << 7
                        p += 2 + (raw >> 1) if c < 0x80 and not raw & 1 else _NOWHERE
        except IndexError:
            p = _NOWHERE
        if p == record_end:
            if delta < low:
                low = delta
            if delta > high:
                high = delta
            if key_null and keyless is not None:
                keyless.append(index)
            index += 1
            if index < run_at or index + _MIN_RUN > record_count:
                position = record_end
                continue
            # Runs are tried on bytes only: a memoryview left uncopied above set run_at
            # past the last record.
            run, run_low, run_high = _uniform_run(
                cast("bytes | bytearray", data),
                position,
                record_end,
                index,
                record_count,
                end,
                run_window,
            )
            position = record_end + run * (record_end - position)
            if run:
                if run_low < low:
                    low = run_low
                if run_high > high:
                    high = run_high
                if key_null and keyless is not None:
                    keyless.extend(range(index, index + run))
                index += run
            if run >= _MIN_RUN:
                # A failed try costs about as much as slicing its window; a run
                # of a quarter of it saved far more than that.
                run_window = run * 4
                run_backoff = 1
            else:  # records of varied shapes: try again less and less often
                run_window = _MIN_RUN * 4
                run_at = index + run_backoff
                run_backoff = min(run_backoff * 2, _MAX_RUN_BACKOFF)
            continue
        result = careful_walk(data, position, end, index, index + 1, low, high, keyless)
        if result[0]:
            return result
        _, position, low, high = result
        index += 1
    if position != end:
        return Malformed.TRAILING, record_count, 0, 0
    return 0, low, high, keyless


def _uniform_run(
    data: bytes | bytearray,
    template: int,
    record_end: int,
    first: int,
    record_count: int,
    end: int,
    window: int,
) -> tuple[int, int, int]:
    """How many records from `record_end` on have the shape of the one before them.

    The record at `template` (index first - 1) was read and accepted. Records of its
    size whose varints other than the timestamp and offset deltas (record length, key,
    value and header lengths, header count) are the same bytes at the same places, whose
    timestamp delta takes as many bytes and whose offset delta is their index, add up
    exactly as it does. So each of those bytes is checked for all of them at once, down
    a stride of the record size, by slicing: the per-record work happens inside bytes'
    methods.

    (count, low, high): how many of the next records (at most `window`) pass, and the
    extremes of their timestamp deltas; (0, 0, 0) when none does or the template's
    shape is not one this reads. Never raises: a layout that runs off the data is none.
    """
    size = record_end - template
    if data[record_end : record_end + 2] != data[template : template + 2]:
        return _NO_RUN  # the next record's length differs: records of varied sizes
    last = first - 1
    if last < 64:
        offset_bytes, stop_index = 1, 64
    elif last < 8192:
        offset_bytes, stop_index = 2, 8192
    elif last < 1 << 20:
        offset_bytes, stop_index = 3, (last | 8191) + 1
    else:
        return _NO_RUN
    n = min(window, stop_index - first, record_count - first, (end - record_end) // size)
    if n < _MIN_RUN:
        return _NO_RUN
    try:
        layout = _layout(data, template, record_end, last, offset_bytes)
    except IndexError:
        return _NO_RUN
    if layout is None:
        return _NO_RUN
    fixed, at_timestamp, timestamp_bytes = layout
    if offset_bytes == 3:
        fixed.append(at_timestamp + timestamp_bytes + 2)  # one value for 8192 deltas
    stop = record_end + n * size
    count = n
    for at in fixed:
        # The records before the first that differs in this byte.
        column = data[at + size : stop : size]
        same = len(column) - len(column.lstrip(data[at : at + 1]))
        if same < count:
            if not same:
                return _NO_RUN
            count = same
            stop = record_end + count * size
    at_offset = at_timestamp + timestamp_bytes + size
    if offset_bytes == 1:
        offsets_match = data[at_offset:stop:size] == _OFFSET_1[first : first + count]
    elif offset_bytes == 2:
        offsets_match = (
            data[at_offset:stop:size] == _OFFSET_LOW[first : first + count]
            and data[at_offset + 1 : stop : size] == _OFFSET_2_HIGH[first : first + count]
        )
    else:
        k = first & 8191
        offsets_match = (
            data[at_offset:stop:size] == _OFFSET_LOW[k : k + count]
            and data[at_offset + 1 : stop : size] == _OFFSET_3_MIDDLE[k : k + count]
        )
    if not offsets_match:
        return _NO_RUN  # the records go one by one, and the first wrong one is named
    at_timestamp += size
    if timestamp_bytes == 1:
        return _one_byte_deltas(data[at_timestamp:stop:size], count)
    return _two_byte_deltas(
        data[at_timestamp:stop:size], data[at_timestamp + 1 : stop : size], count
    )


def _layout(
    data: bytes | bytearray, template: int, record_end: int, last: int, offset_bytes: int
) -> tuple[list[int], int, int] | None:
    """Where the template's fixed bytes and its timestamp delta are, or None when it is
    not made of short varints or does not add up to its size on its own (the columns
    only compare the other records with it)."""
    fixed: list[int] = []
    length, at = _short_varint(data, template, fixed)
    if length != record_end - at:
        return None
    at_timestamp = at + 1  # past the attributes
    if data[at_timestamp] < 0x80:
        timestamp_bytes = 1
    elif data[at_timestamp + 1] < 0x80:
        timestamp_bytes = 2
    else:
        return None
    at = at_timestamp + timestamp_bytes
    if data[at : at + offset_bytes] != _offset_delta_bytes(last, offset_bytes):
        return None
    key_length, at = _short_varint(data, at + offset_bytes, fixed)
    value_length, at = _short_varint(data, at + max(key_length, 0), fixed)
    header_count, at = _short_varint(data, at + max(value_length, 0), fixed)
    if not 0 <= header_count <= record_end - at:
        return None
    for _ in range(header_count):
        header_key_length, at = _short_varint(data, at, fixed)
        if header_key_length < 0:
            return None
        header_value_length, at = _short_varint(data, at + header_key_length, fixed)
        at += max(header_value_length, 0)
    if at != record_end:
        return None
    return fixed, at_timestamp, timestamp_bytes


def _short_varint(data: bytes | bytearray, position: int, fixed: list[int]) -> tuple[int, int]:
    """A zig-zag varint of 1 or 2 bytes and the position after it, its bytes' positions
    added to `fixed`; for a longer one, _NOWHERE (the next read raises, the layout's end
    is not its record's)."""
    b = data[position]
    if b < 0x80:
        fixed.append(position)
        return (b >> 1) ^ -(b & 1), position + 1
    c = data[position + 1]
    if c >= 0x80:
        return 0, _NOWHERE
    fixed += (position, position + 1)
    raw = (b & 0x7F) | c << 7
    return (raw >> 1) ^ -(raw & 1), position + 2


def _offset_delta_bytes(index: int, size: int) -> bytes:
    if size == 1:
        return _OFFSET_1[index : index + 1]
    if size == 2:
        return bytes((_OFFSET_LOW[index], _OFFSET_2_HIGH[index]))
    k = index & 8191
    return bytes((_OFFSET_LOW[k], _OFFSET_3_MIDDLE[k], index >> 13))


def _one_byte_deltas(column: bytes | bytearray, count: int) -> tuple[int, int, int]:
    """The records before the first whose delta is longer, and their deltas' extremes."""
    order = column.translate(_DELTA_ORDER)
    longer = order.find(0xFF)
    if longer >= 0:
        if not longer:
            return _NO_RUN
        count = longer
        order = order[:longer]
    return count, min(order) - 64, max(order) - 64


def _two_byte_deltas(
    lows: bytes | bytearray, highs: bytes | bytearray, count: int
) -> tuple[int, int, int]:
    """As _one_byte_deltas, for deltas of two bytes (64 ms to 8 s from the first record)."""
    for at in (lows.translate(_ENDS).find(1), highs.translate(_ENDS).find(0)):
        if 0 <= at < count:
            if not at:
                return _NO_RUN
            count = at
    lows = lows[:count]
    highs = highs[:count]
    if lows.translate(None, _EVEN):
        # A record before the first: rare enough for a loop.
        deltas = [((raw >> 1) ^ -(raw & 1)) for raw in map(_join_7, lows, highs)]
        return count, min(deltas), max(deltas)
    # Deltas of 0 or more, as 16-bit numbers that order as they do: low 6 bits and high 7.
    keys = bytearray(2 * count)
    keys[_LOW_BYTE_AT::2] = lows.translate(_DELTA_LOW_6)
    keys[1 - _LOW_BYTE_AT :: 2] = highs
    numbers = memoryview(keys).cast("H")
    low = min(numbers)
    high = max(numbers)
    return count, (low & 0xFF) | (low >> 8) << 6, (high & 0xFF) | (high >> 8) << 6


def _join_7(b: int, c: int) -> int:
    return (b & 0x7F) | c << 7


def careful_walk_all(
    data: bytes | bytearray | memoryview,
    position: int,
    end: int,
    record_count: int,
    find_keyless: bool,
) -> WalkResult:
    """walk's answer from careful_walk alone, record after record: the reference that the
    fast paths are held to (tests) and timed against (bench.record_walk)."""
    keyless: list[int] | None = [] if find_keyless else None
    result = careful_walk(data, position, end, 0, record_count, _LOW, _HIGH, keyless)
    if result[0]:
        return result
    _, position, low, high = result
    if position != end:
        return Malformed.TRAILING, record_count, 0, 0
    return 0, low, high, keyless


def careful_walk(
    data: bytes | bytearray | memoryview,
    position: int,
    end: int,
    first: int,
    stop: int,
    low: int,
    high: int,
    keyless: list[int] | None,
) -> tuple[int, int, int, int]:
    """Records `first` to `stop` - 1 from `position`, every varint read in full.

    (0, the position after them, low, high) with the timestamp-delta extremes widened by
    theirs and `keyless` extended, or (Malformed kind, record index, details).
    """
    # None from _varint: a varint that runs past its limit or is too long.
    length: int | None
    delta: int | None
    offset_delta: int | None
    key_length: int | None
    value_length: int | None
    header_count: int | None
    for index in range(first, stop):
        if position >= end:
            return Malformed.PREMATURE_EOF, index, 0, 0
        # One- and two-byte varints are read inline: the same answer as _varint, sooner.
        b = data[position]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            position += 1
        elif position + 1 < end and data[position + 1] < 0x80:
            raw = (b & 0x7F) | data[position + 1] << 7
            length = (raw >> 1) ^ -(raw & 1)
            position += 2
        else:
            length, position = _varint(data, position, end, INT_BYTES)
        if length is None:
            return Malformed.STRUCTURE, index, 0, 0
        if length <= 0 or length > end - position:
            return Malformed.RECORD_SIZE, index, length, end - position
        start = position
        record_end = position + length
        position += 1  # attributes: one byte, no bits in use
        b = data[position] if position < record_end else 0x80
        if b < 0x80:
            delta = (b >> 1) ^ -(b & 1)
            position += 1
        else:
            delta, position = _varint(data, position, record_end, LONG_BYTES)
        if delta is None:
            return Malformed.STRUCTURE, index, 0, 0
        if delta < low:
            low = delta
        if delta > high:
            high = delta
        b = data[position] if position < record_end else 0x80
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            position += 1
        elif position + 1 < record_end and data[position + 1] < 0x80:
            raw = (b & 0x7F) | data[position + 1] << 7
            offset_delta = (raw >> 1) ^ -(raw & 1)
            position += 2
        else:
            offset_delta, position = _varint(data, position, record_end, INT_BYTES)
        if offset_delta is None:
            return Malformed.STRUCTURE, index, 0, 0
        if offset_delta != index:
            return Malformed.OFFSET_DELTA, index, offset_delta, 0
        b = data[position] if position < record_end else 0x80
        if b < 0x80:
            key_length = (b >> 1) ^ -(b & 1)
            position += 1
        else:
            key_length, position = _varint(data, position, record_end, INT_BYTES)
        if key_length is None:
            return Malformed.STRUCTURE, index, 0, 0
        if key_length > 0:
            position += key_length
            if position > record_end:
                return Malformed.OVERRUN, index, length, position - start
        elif key_length < 0 and keyless is not None:
            keyless.append(index)
        b = data[position] if position < record_end else 0x80
        if b < 0x80:
            value_length = (b >> 1) ^ -(b & 1)
            position += 1
        elif position + 1 < record_end and data[position + 1] < 0x80:
            raw = (b & 0x7F) | data[position + 1] << 7
            value_length = (raw >> 1) ^ -(raw & 1)
            position += 2
        else:
            value_length, position = _varint(data, position, record_end, INT_BYTES)
        if value_length is None:
            return Malformed.STRUCTURE, index, 0, 0
        if value_length > 0:
            position += value_length
            if position > record_end:
                return Malformed.OVERRUN, index, length, position - start
        b = data[position] if position < record_end else 0x80
        if b < 0x80:
            header_count = (b >> 1) ^ -(b & 1)
            position += 1
        else:
            header_count, position = _varint(data, position, record_end, INT_BYTES)
        if header_count is None:
            return Malformed.STRUCTURE, index, 0, 0
        if header_count < 0:
            return Malformed.HEADER_COUNT_NEGATIVE, index, header_count, 0
        if header_count > record_end - position:
            return Malformed.HEADER_COUNT_LARGE, index, header_count, 0
        for _ in range(header_count):
            header_key_length, position = _varint(data, position, record_end, INT_BYTES)
            if header_key_length is None:
                return Malformed.STRUCTURE, index, 0, 0
            if header_key_length < 0:
                return Malformed.HEADER_KEY_NEGATIVE, index, header_key_length, 0
            position += header_key_length
            if position > record_end:
                return Malformed.OVERRUN, index, length, position - start
            header_value_length, position = _varint(data, position, record_end, INT_BYTES)
            if header_value_length is None:
                return Malformed.STRUCTURE, index, 0, 0
            if header_value_length > 0:
                position += header_value_length
                if position > record_end:
                    return Malformed.OVERRUN, index, length, position - start
        if position != record_end:
            return Malformed.OVERRUN, index, length, position - start
    return 0, position, low, high


def _varint(
    data: bytes | bytearray | memoryview, position: int, limit: int, max_bytes: int
) -> tuple[int | None, int]:
    """A zig-zag varint below `limit`, wrapped to 32 or 64 bits as Java's ByteUtils does.

    (None, position) when the limit comes first or the varint is longer than `max_bytes`.
    """
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        if position >= limit:
            return None, position
        b = data[position]
        position += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            raw &= 0xFFFFFFFF if max_bytes == INT_BYTES else 0xFFFFFFFFFFFFFFFF
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
    return None, position
