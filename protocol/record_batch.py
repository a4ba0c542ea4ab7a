"""Record batches of magic v2, the only on-wire and on-disk record format Brook speaks.

The broker treats a batch as bytes plus its parsed 61-byte header. Records inside a
batch are decoded only where semantics need them (validation of compressed batches,
timestamps, control records, compaction, tests). The layout is Kafka's
DefaultRecordBatch:

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordCount int32 | records...

The CRC32C covers everything from `attributes` to the end, so the broker may assign
offsets and leader epochs in place without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kio.serial.readers import read_signed_varint, read_signed_varlong

from . import crc32c
from .compression import Codec, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
# HEADER's 13 fields, all ints: the type that lets BatchHeader(*fields) be checked.
_HeaderFields = tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted by batchLength
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_V2 = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # set: LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_TIMESTAMP = -1


@dataclass(slots=True)
class BatchHeader:
    """The fixed part of one batch, and where the batch sits in its buffer."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    position: int = 0

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (1 << 31)


def parse_header(buffer: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the 61-byte header at `position`; the caller checks there are enough bytes."""
    fields: _HeaderFields = HEADER.unpack_from(buffer, position)
    return BatchHeader(*fields, position=position)


def split_batches(
    buffer: bytes | bytearray | memoryview, *, allow_partial_tail: bool = False
) -> list[BatchHeader]:
    """Split a buffer of concatenated batches into their headers, checking the framing.

    A produce request must hold whole batches only: a header that promises more bytes
    than follow, or fewer than a header needs, is CORRUPT_MESSAGE. With
    `allow_partial_tail` (fetch responses, a torn log tail) an incomplete last batch is
    dropped instead.
    """
    batches: list[BatchHeader] = []
    position = 0
    end = len(buffer)
    while position < end:
        if end - position < HEADER_SIZE:
            if allow_partial_tail:
                break
            raise CorruptRecordError(
                f"{end - position} trailing bytes are too few for a record batch header"
            )
        header = parse_header(buffer, position)
        if header.magic != MAGIC_V2:
            raise InvalidRecordError(
                f"record batch magic {header.magic} is not supported (v2 only)"
            )
        if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordError(
                f"record batch length {header.batch_length} is below the minimum"
            )
        if position + header.size > end:
            if allow_partial_tail:
                break
            raise CorruptRecordError(
                f"record batch claims {header.size} bytes but only {end - position} follow"
            )
        batches.append(header)
        position += header.size
    return batches


def compute_crc(buffer: bytes | bytearray | memoryview, header: BatchHeader) -> int:
    start = header.position + ATTRIBUTES_OFFSET
    return crc32c.crc32c(memoryview(buffer)[start : header.position + header.size])


def verify_crc(buffer: bytes | bytearray | memoryview, header: BatchHeader) -> None:
    actual = compute_crc(buffer, header)
    if actual != header.crc:
        raise CorruptRecordError(
            f"record batch at offset {header.base_offset} has CRC {header.crc:#010x},"
            f" computed {actual:#010x}"
        )


def records_section(buffer: bytes | bytearray | memoryview, header: BatchHeader) -> memoryview:
    start = header.position + HEADER_SIZE
    return memoryview(buffer)[start : header.position + header.size]


def set_base_offset(buffer: bytearray | memoryview, header: BatchHeader, base_offset: int) -> None:
    struct.pack_into(">q", buffer, header.position, base_offset)
    header.base_offset = base_offset


def set_partition_leader_epoch(
    buffer: bytearray | memoryview, header: BatchHeader, epoch: int
) -> None:
    struct.pack_into(">i", buffer, header.position + PARTITION_LEADER_EPOCH_OFFSET, epoch)
    header.partition_leader_epoch = epoch


# --- varints --------------------------------------------------------------------------


def write_varint(value: int, out: bytearray) -> None:
    raw = (value << 1) ^ (value >> 63)
    while True:
        towrite = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(towrite | 0x80)
        else:
            out.append(towrite)
            return


# --- records --------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


# After a batch's records: the longest varlong. A varint that would run off the records
# runs into these zeros instead, and is then caught by the length checks (kio's native
# readers would raise BufferUnderflow, a less precise error than Kafka's).
_PADDING = bytes(10)


def inflated_records(
    buffer: bytes | bytearray | memoryview, header: BatchHeader
) -> bytes | memoryview:
    """The batch's records section, decompressed (a view of `buffer` when it is not
    compressed); CORRUPT_MESSAGE when it does not decompress."""
    section = records_section(buffer, header)
    if header.codec == Codec.NONE:
        return section
    return decompress(header.codec, section)


def _padded_records(
    buffer: bytes | bytearray | memoryview, header: BatchHeader
) -> tuple[bytes, int]:
    """The batch's records section, inflated, and its size, followed by _PADDING."""
    inflated = inflated_records(buffer, header)
    return b"".join((inflated, _PADDING)), len(inflated)


def decode_records(buffer: bytes | bytearray | memoryview, header: BatchHeader) -> list[Record]:
    """Decode every record of one batch (at `header.position` in `buffer`), decompressing it.

    Raises INVALID_RECORD when the records do not match the header (count, offset
    deltas, lengths) and CORRUPT_MESSAGE when decompression fails. The varints are read
    by kio's native readers (kio.serial.readers), fields sliced from one bytes copy of
    the records section: `python -m bench.record_decoding` measures the native readers
    about twice as fast as Python's per varint, and a Spark job over segments decodes
    every record.
    """
    data, size = _padded_records(buffer, header)
    try:
        return _decode(data, size, header)
    except ValueError as exc:  # kio: a varint longer than its type allows
        raise InvalidRecordError(
            f"a record of the batch at offset {header.base_offset} is malformed: {exc}"
        ) from None


def _decode(data: bytes, size: int, header: BatchHeader) -> list[Record]:
    read_int = read_signed_varint
    read_long = read_signed_varlong
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    records: list[Record] = []
    position = 0
    previous_delta = -1
    for index in range(header.record_count):
        if position >= size:
            raise InvalidRecordError(f"record {index} starts past the end of its batch")
        length, n = read_int(data, position)
        position += n
        end = position + length
        if length < 0 or end > size:
            raise InvalidRecordError(f"record {index} claims {length} bytes, past its batch")
        position += 1  # attributes, unused in v2
        timestamp_delta, n = read_long(data, position)
        position += n
        offset_delta, n = read_int(data, position)
        position += n
        # Deltas increase within the batch's range; a compacted batch has gaps (Kafka's
        # cleaner keeps records at their offsets), a produced one has none, as the
        # validator's count check (last offset delta + 1 == record count) makes sure.
        if offset_delta <= previous_delta or offset_delta > header.last_offset_delta:
            raise InvalidRecordError(
                f"record {index} of the batch at offset {base_offset}"
                f" has offset delta {offset_delta}"
            )
        previous_delta = offset_delta
        length, n = read_int(data, position)
        position += n
        if length < 0:
            key = None
        else:
            key = data[position : position + length]
            position += length
            if position > end:
                raise InvalidRecordError("record field runs past the end of its record")
        length, n = read_int(data, position)
        position += n
        if length < 0:
            value = None
        else:
            value = data[position : position + length]
            position += length
        if position > end:
            raise InvalidRecordError("record field runs past the end of its record")
        count, n = read_int(data, position)
        position += n
        if count < 0:
            raise InvalidRecordError(f"record {index} has {count} headers")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            if position >= end:
                raise InvalidRecordError("record field runs past the end of its record")
            length, n = read_int(data, position)
            position += n
            if length < 0:
                raise InvalidRecordError("record header key is null")
            name = data[position : position + length]
            position += length
            if position > end:
                raise InvalidRecordError("record field runs past the end of its record")
            length, n = read_int(data, position)
            position += n
            if length < 0:
                header_value = None
            else:
                header_value = data[position : position + length]
                position += length
            headers.append((name.decode("utf-8", "replace"), header_value))
        if position != end:
            if position > end:
                raise InvalidRecordError("record field runs past the end of its record")
            raise InvalidRecordError(f"record {index} has {end - position} unexplained bytes")
        offset = base_offset + offset_delta
        records.append(Record(offset, base_timestamp + timestamp_delta, key, value, headers))
    if position != size:
        raise InvalidRecordError(
            f"batch at offset {base_offset} has {size - position} bytes"
            f" after its {header.record_count} records"
        )
    return records


def scan_record_keys(
    buffer: bytes | bytearray | memoryview, header: BatchHeader
) -> list[tuple[int, bytes | None, bool]]:
    """(offset, key, whether the value is null) of each record of one batch, decompressing
    it: what the log cleaner needs, read without the values and headers that a full
    decode slices (each record is skipped by its length once its key is read).

    For batches already in a log (validated when appended): it checks that each record
    lies within its batch and the count, and raises INVALID_RECORD as decode_records does
    when they do not hold; the rest is decode_records' to check."""
    data, size = _padded_records(buffer, header)
    read_int = read_signed_varint
    read_long = read_signed_varlong
    base_offset = header.base_offset
    found: list[tuple[int, bytes | None, bool]] = []
    position = 0
    # A varint of one byte (below 0x80: a small offset delta, key length, the timestamp
    # delta of a batch written at once) is read in line, zigzag-decoded as (b >> 1) ^
    # -(b & 1), and so is a record length of two; longer ones by kio's reader. The
    # cleaner reads every record of the log twice, and the call per varint was most of it.
    try:
        for index in range(header.record_count):
            byte = data[position]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                position += 1
            elif data[position + 1] < 0x80:  # two bytes: a record of 64 to 8,191 bytes
                value = (byte & 0x7F) | (data[position + 1] << 7)
                length = (value >> 1) ^ -(value & 1)
                position += 2
            else:
                length, n = read_int(data, position)
                position += n
            end = position + length
            if length < 0 or end > size:
                raise InvalidRecordError(f"record {index} claims {length} bytes, past its batch")
            position += 1  # the attributes; then the timestamp delta
            if data[position] < 0x80:
                position += 1
            else:
                _, n = read_long(data, position)
                position += n
            byte = data[position]
            if byte < 0x80:
                offset_delta = (byte >> 1) ^ -(byte & 1)
                position += 1
            else:
                offset_delta, n = read_int(data, position)
                position += n
            byte = data[position]
            if byte < 0x80:
                length = (byte >> 1) ^ -(byte & 1)
                position += 1
            else:
                length, n = read_int(data, position)
                position += n
            if length < 0:
                key = None
            else:
                key = data[position : position + length]
                position += length
            if position > end:
                raise InvalidRecordError("record field runs past the end of its record")
            # Whether the value length is negative (a null value): zigzag keeps the sign
            # in the lowest bit, which is in the varint's first byte however long it is
            # (the value's own bytes are decode_records' to check).
            found.append((base_offset + offset_delta, key, bool(data[position] & 1)))
            position = end
    # kio: a varint longer than its type allows; a read past the padding: a varint run
    # on from a damaged record.
    except (ValueError, IndexError) as exc:
        raise InvalidRecordError(
            f"a record of the batch at offset {header.base_offset} is malformed: {exc}"
        ) from None
    if position != size:
        raise InvalidRecordError(
            f"batch at offset {base_offset} has {size - position} bytes"
            f" after its {header.record_count} records"
        )
    return found


def encode_record(record: Record, offset_delta: int, timestamp_delta: int) -> bytes:
    body = bytearray(b"\x00")
    write_varint(timestamp_delta, body)
    write_varint(offset_delta, body)
    for item in (record.key, record.value):
        if item is None:
            write_varint(-1, body)
        else:
            write_varint(len(item), body)
            body += item
    write_varint(len(record.headers), body)
    for name, header_value in record.headers:
        encoded = name.encode()
        write_varint(len(encoded), body)
        body += encoded
        if header_value is None:
            write_varint(-1, body)
        else:
            write_varint(len(header_value), body)
            body += header_value
    out = bytearray()
    write_varint(len(body), out)
    return bytes(out + body)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    codec: int = Codec.NONE,
    log_append_time: bool = False,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    level: int | None = None,
) -> bytes:
    """Encode records as one v2 batch. Record offsets are taken relative to the first.
    `level`: the codec's compression level (None: Kafka's default)."""
    if not records:
        raise ValueError("a record batch holds at least one record")
    first_offset = records[0].offset
    base_timestamp = records[0].timestamp
    max_timestamp = max(record.timestamp for record in records)
    body = b"".join(
        encode_record(record, record.offset - first_offset, record.timestamp - base_timestamp)
        for record in records
    )
    body = compress(codec, body, level)
    attributes = codec
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_BIT
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    header = BatchHeader(
        base_offset=base_offset,
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(body),
        partition_leader_epoch=partition_leader_epoch,
        magic=MAGIC_V2,
        crc=0,
        attributes=attributes,
        last_offset_delta=records[-1].offset - first_offset,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        record_count=len(records),
    )
    buffer = bytearray(HEADER.pack(*_header_fields(header)) + body)
    header.crc = compute_crc(buffer, header)
    struct.pack_into(">I", buffer, CRC_OFFSET, header.crc)
    return bytes(buffer)


def rewrite_records(
    buffer: bytes | bytearray | memoryview,
    header: BatchHeader,
    codec: int,
    level: int | None = None,
) -> bytes:
    """Re-encode one batch with another codec (at `level`, None: Kafka's default),
    keeping every other header field."""
    records = decode_records(buffer, header)
    return build_batch(
        records,
        base_offset=header.base_offset,
        codec=codec,
        log_append_time=header.is_log_append_time,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        transactional=header.is_transactional,
        control=header.is_control,
        partition_leader_epoch=header.partition_leader_epoch,
        level=level,
    )


def _header_fields(header: BatchHeader) -> tuple[int, ...]:
    return (
        header.base_offset,
        header.batch_length,
        header.partition_leader_epoch,
        header.magic,
        header.crc,
        header.attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        header.record_count,
    )


def iter_records(buffer: bytes | bytearray | memoryview) -> Iterator[Record]:
    """Every record of every whole batch in a buffer (a log segment, a fetch response)."""
    for header in split_batches(buffer, allow_partial_tail=True):
        yield from decode_records(buffer, header)
