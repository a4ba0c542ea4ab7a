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

This runs for every record of every produced batch: about 1 us a record in Python.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import InvalidRecordError

INT_BYTES = 5  # a Java int as a varint
LONG_BYTES = 10  # a Java long as a varlong
_LOW = (1 << 63) - 1
_HIGH = -(1 << 63)


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
    return summarize(python_walk(data, position, end, record_count, find_keyless))


def summarize(
    result: tuple[int, int, int, list[int] | None] | tuple[int, int, int, int],
) -> RecordsSummary:
    """A walker's answer as a summary, or its complaint as INVALID_RECORD."""
    kind, first, second, third = result
    if kind:
        assert isinstance(third, int)
        raise InvalidRecordError(Malformed(kind).describe(first, second, third))
    assert not isinstance(third, int)
    return RecordsSummary(first, second, third)


def python_walk(
    data: bytes | bytearray | memoryview,
    position: int,
    end: int,
    record_count: int,
    find_keyless: bool,
) -> tuple[int, int, int, list[int] | None] | tuple[int, int, int, int]:
    """The walk: 0 and the summary's fields, or a Malformed kind and its details."""
    low = _LOW
    high = _HIGH
    keyless: list[int] | None = [] if find_keyless else None
    for index in range(record_count):
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
    if position != end:
        return Malformed.TRAILING, record_count, 0, 0
    return 0, low, high, keyless


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
