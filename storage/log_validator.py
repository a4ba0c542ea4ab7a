"""Kafka's LogValidator: what a leader does to records before they join its log.

Checks framing, CRC, offsets against the record count, and producer fields on the
batch headers; walks every record of every batch (decompressed, within a bound, when
the batch is compressed) and refuses one whose fields do not add up with INVALID_RECORD;
applies the per-record rules (a key in compacted topics, KIP-937 timestamp bounds for
CreateTime, no client-set LogAppendTime) and answers their failures as Kafka's
RecordValidationException does, with one error per refused record; sets each CreateTime
batch's MaxTimestamp to the largest of its records' timestamps, re-sealing the CRC only
when the header said otherwise; stamps LogAppendTime; recompresses when the topic's
compression.type names another codec; and last assigns the offsets from the log end
offset and the leader epoch, neither of which the CRC covers.

The rules come from the log's typed config (LogConfig) and from who appends (the
AppendOrigin): clients may not write control batches, coordinators may (transaction
markers), and replicated batches never come here (they already carry their offsets).

The walk yields the smallest and largest timestamp delta of a batch, which answer the
timestamp bounds for the whole batch at once; records are decoded one by one only when
a bound is crossed, to name the offending records.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import Enum

from kio.schema.errors import ErrorCode

from brook.protocol import record_batch as rb
from brook.protocol.compression import Codec, decompressed
from brook.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordError,
    RecordTooLargeError,
    RecordValidationError,
)
from brook.protocol.record_walk import RecordsSummary, walk_records

from .log_config import LONG_MAX, LogConfig

NO_TIMESTAMP = rb.NO_TIMESTAMP
# Timestamps within this range cannot overflow a Java long in the bound arithmetic, so
# the whole batch is judged from its extremes; outside it each record is judged on its own.
_SAFE_TIMESTAMP = 1 << 62
# What a compressed batch may inflate to when the caller sets no bound: Kafka's default
# socket.request.max.bytes, no more than the same records could take uncompressed.
DEFAULT_MAX_DECOMPRESSED_BYTES = 100 * 1024 * 1024


class AppendOrigin(Enum):
    """Who appends to a log, as Kafka's AppendOrigin: the rules differ by origin."""

    CLIENT = "client"  # a producer's records (Produce)
    COORDINATOR = "coordinator"  # a group or transaction coordinator's own records
    REPLICATION = "replication"  # a follower copying its leader (offsets already set)


@dataclass(slots=True)
class ValidationAndOffsetAssignResult:
    """The records as they will be written, with the offsets and times they were given."""

    buffer: bytearray
    batches: list[rb.BatchHeader]
    first_offset: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int
    log_append_time: int  # -1 for CreateTime topics
    record_count: int


@dataclass(frozen=True, slots=True)
class TimestampBounds:
    before_max_ms: int
    after_max_ms: int

    @classmethod
    def of(cls, config: LogConfig) -> TimestampBounds:
        return cls(config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms)


def validate_messages_and_assign_offsets(
    records: bytes | bytearray | memoryview,
    config: LogConfig,
    *,
    origin: AppendOrigin,
    next_offset: int,
    leader_epoch: int,
    now_ms: int,
    topic_partition: str,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> ValidationAndOffsetAssignResult:
    """Validate the records of one append and give them offsets from `next_offset`.

    `max_decompressed_bytes` bounds what a compressed batch may inflate to (the broker
    passes its socket.request.max.bytes).
    """
    if origin is AppendOrigin.REPLICATION:
        raise ValueError("replicated records keep their offsets: append them as a follower")
    buffer = bytearray(records)
    batches = rb.split_batches(buffer)
    if not batches:
        raise CorruptRecordError("produce request holds no record batch")
    if len(batches) > 1:
        # Kafka takes one batch per partition from magic v2 on: a producer never sends more.
        raise InvalidRecordError("Compressed outer record has more than one batch")
    max_size = config.max_message_bytes
    target = config.compression_type
    target_codec = None if target == "producer" else Codec.from_name(target)
    log_append_time = config.log_append_time
    compacted = config.compact
    bounds = TimestampBounds.of(config)
    rewrite = False
    for header in batches:
        if header.size > max_size:
            raise RecordTooLargeError(
                f"The record batch of {header.size} bytes is larger than max.message.bytes"
                f"={max_size}"
            )
        _check_header(buffer, header, origin)
        summary = _walk_batch(buffer, header, max_decompressed_bytes, compacted)
        timestamps = _BatchTimestamps.of(header, summary)
        errors = _record_errors(
            buffer, header, summary, timestamps, log_append_time, bounds, now_ms, topic_partition
        )
        if errors:
            raise RecordValidationError.of(errors)
        if not log_append_time:
            set_max_timestamp(buffer, header, _batch_max_timestamp(buffer, header, timestamps))
        if target_codec is not None and header.codec != target_codec:
            rewrite = True
    if rewrite:
        assert target_codec is not None
        buffer = bytearray(
            b"".join(
                rb.rewrite_records(buffer, header, target_codec, config.compression_level(target))
                for header in batches
            )
        )
        batches = rb.split_batches(buffer)
        if not log_append_time:
            # Re-encoding took the records' maximum as is; Kafka's starts at NO_TIMESTAMP.
            for header in batches:
                set_max_timestamp(buffer, header, max(NO_TIMESTAMP, header.max_timestamp))
    if log_append_time:
        for header in batches:
            stamp_log_append_time(buffer, header, now_ms)
    return _assign_offsets(
        buffer, batches, next_offset, leader_epoch, now_ms if log_append_time else NO_TIMESTAMP
    )


def _assign_offsets(
    buffer: bytearray,
    batches: list[rb.BatchHeader],
    first_offset: int,
    leader_epoch: int,
    log_append_time: int,
) -> ValidationAndOffsetAssignResult:
    next_offset = first_offset
    max_timestamp = NO_TIMESTAMP
    offset_of_max_timestamp = first_offset
    record_count = 0
    for header in batches:
        rb.set_base_offset(buffer, header, next_offset)
        rb.set_partition_leader_epoch(buffer, header, leader_epoch)
        next_offset += header.last_offset_delta + 1
        record_count += header.record_count
        if header.max_timestamp > max_timestamp:
            max_timestamp = header.max_timestamp
            offset_of_max_timestamp = next_offset - 1
    last_offset = next_offset - 1
    if log_append_time != NO_TIMESTAMP:
        offset_of_max_timestamp = last_offset
    return ValidationAndOffsetAssignResult(
        buffer,
        batches,
        first_offset,
        last_offset,
        max_timestamp,
        offset_of_max_timestamp,
        log_append_time,
        record_count,
    )


def _check_header(buffer: bytearray, header: rb.BatchHeader, origin: AppendOrigin) -> None:
    rb.verify_crc(buffer, header)
    if origin is not AppendOrigin.CLIENT:
        return  # the broker's own batches: built by its code, not sent by a client
    if header.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.record_count <= 0:
        raise InvalidRecordError(f"batch reports {header.record_count} records")
    if header.last_offset_delta + 1 != header.record_count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range ({header.last_offset_delta + 1}) and record"
            f" count ({header.record_count})"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError("idempotent batch has no base sequence")


def _walk_batch(
    buffer: bytearray, header: rb.BatchHeader, max_decompressed_bytes: int, compacted: bool
) -> RecordsSummary:
    """Kafka reads every record before it writes a batch; so does this."""
    start = header.position + rb.HEADER_SIZE
    end = header.position + header.size
    if header.codec == Codec.NONE:
        return walk_records(buffer, start, end, header.record_count, find_keyless=compacted)
    with decompressed(
        header.codec, rb.records_section(buffer, header), max_decompressed_bytes
    ) as data:
        return walk_records(data, 0, len(data), header.record_count, find_keyless=compacted)


@dataclass(frozen=True, slots=True)
class _BatchTimestamps:
    """The smallest and largest record timestamp of a batch, as Kafka computes them."""

    min_timestamp: int
    max_timestamp: int

    @classmethod
    def of(cls, header: rb.BatchHeader, summary: RecordsSummary) -> _BatchTimestamps:
        if header.is_log_append_time:
            # A batch marked LogAppendTime gives every record its max timestamp.
            return cls(header.max_timestamp, header.max_timestamp)
        return cls(
            header.base_timestamp + summary.min_timestamp_delta,
            header.base_timestamp + summary.max_timestamp_delta,
        )

    @property
    def overflows(self) -> bool:
        """Whether Java's long arithmetic could wrap for some record of the batch."""
        return not -_SAFE_TIMESTAMP < self.min_timestamp <= self.max_timestamp < _SAFE_TIMESTAMP


def _batch_max_timestamp(
    buffer: bytearray, header: rb.BatchHeader, timestamps: _BatchTimestamps
) -> int:
    """The largest record timestamp, or -1 (NO_TIMESTAMP) when none is larger.

    Kafka starts its maximum at NO_TIMESTAMP, so records that carry no timestamp (-1)
    give the batch -1, and time retention then ages the segment by its file's mtime.
    """
    if header.is_log_append_time or not timestamps.overflows:
        return max(NO_TIMESTAMP, timestamps.max_timestamp)
    # Some record's timestamp wraps around a Java long: take them one by one.
    return max(
        [NO_TIMESTAMP, *(_long(record.timestamp) for record in rb.decode_records(buffer, header))]
    )


def _record_errors(
    buffer: bytearray,
    header: rb.BatchHeader,
    summary: RecordsSummary,
    timestamps: _BatchTimestamps,
    log_append_time: bool,
    bounds: TimestampBounds,
    now_ms: int,
    topic_partition: str,
) -> list[tuple[ErrorCode, RecordError]]:
    """Kafka's validateKey and validateTimestamp for every record, fast when all pass."""
    keyless = summary.keyless or []
    client_log_append_time = header.is_log_append_time and (
        log_append_time or header.max_timestamp == NO_TIMESTAMP
    )
    timestamps_in_bounds = log_append_time or (
        not timestamps.overflows
        and timestamps.max_timestamp - now_ms <= bounds.after_max_ms
        and (
            bounds.before_max_ms >= LONG_MAX
            or now_ms - timestamps.min_timestamp <= bounds.before_max_ms
        )
    )
    if not keyless and not client_log_append_time and timestamps_in_bounds:
        return []
    # The slow path: decode the records to name each one that breaks a rule.
    without_key = set(keyless)
    errors: list[tuple[ErrorCode, RecordError]] = []
    for index, record in enumerate(rb.decode_records(buffer, header)):
        if index in without_key:
            errors.append(
                (
                    ErrorCode.invalid_record,
                    RecordError(
                        index,
                        "Compacted topic cannot accept message without key in topic partition"
                        f" {topic_partition}",
                    ),
                )
            )
            continue
        timestamp = header.max_timestamp if header.is_log_append_time else _long(record.timestamp)
        if not log_append_time and timestamp != NO_TIMESTAMP:
            if _out_of_bounds(timestamp, now_ms, bounds):
                errors.append(
                    (
                        ErrorCode.invalid_timestamp,
                        RecordError(
                            index,
                            f"Timestamp {timestamp} of message with offset {record.offset} is"
                            " out of range. The timestamp should be within"
                            f" [{_long(now_ms - bounds.before_max_ms)},"
                            f" {_long(now_ms + bounds.after_max_ms)}]",
                        ),
                    )
                )
        elif header.is_log_append_time:
            errors.append(
                (
                    ErrorCode.invalid_timestamp,
                    RecordError(
                        index,
                        f"Invalid timestamp type in message {_describe(record, timestamp)}."
                        " Producer should not set timestamp type to LogAppendTime.",
                    ),
                )
            )
    return errors


def _out_of_bounds(timestamp: int, now_ms: int, bounds: TimestampBounds) -> bool:
    # Kafka's recordHasInvalidTimestamp, with its long arithmetic.
    difference = _long(now_ms - timestamp)
    return difference > bounds.before_max_ms or _long(-difference) > bounds.after_max_ms


def _describe(record: rb.Record, timestamp: int) -> str:
    # Kafka's DefaultRecord.toString.
    key = 0 if record.key is None else len(record.key)
    value = 0 if record.value is None else len(record.value)
    return (
        f"DefaultRecord(offset={record.offset}, timestamp={timestamp}, key={key} bytes,"
        f" value={value} bytes)"
    )


def _long(value: int) -> int:
    """`value` wrapped to a Java long."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def set_max_timestamp(buffer: bytearray, header: rb.BatchHeader, max_timestamp: int) -> None:
    """Make a batch CreateTime with this max timestamp, re-sealing the CRC only on change.

    Kafka's DefaultRecordBatch.setMaxTimestamp: a client's header is trusted for nothing,
    but a header that already holds the records' maximum costs no CRC.
    """
    if header.max_timestamp == max_timestamp and not header.is_log_append_time:
        return
    header.attributes &= ~rb.TIMESTAMP_TYPE_BIT
    _reseal(buffer, header, max_timestamp)


def stamp_log_append_time(buffer: bytearray, header: rb.BatchHeader, now_ms: int) -> None:
    """Mark a batch LogAppendTime with the broker's clock and re-seal its CRC.

    Records keep their deltas; consumers read the batch's max timestamp as every
    record's timestamp when the type is LogAppendTime.
    """
    header.attributes |= rb.TIMESTAMP_TYPE_BIT
    _reseal(buffer, header, now_ms)


def _reseal(buffer: bytearray, header: rb.BatchHeader, max_timestamp: int) -> None:
    header.max_timestamp = max_timestamp
    struct.pack_into(">h", buffer, header.position + rb.ATTRIBUTES_OFFSET, header.attributes)
    struct.pack_into(">q", buffer, header.position + rb.MAX_TIMESTAMP_OFFSET, max_timestamp)
    header.crc = rb.compute_crc(buffer, header)
    struct.pack_into(">I", buffer, header.position + rb.CRC_OFFSET, header.crc)
