"""What Kafka's LogValidator does to a partition's record set before it is appended.

Checks framing, CRC, offsets against the record count, and producer fields on the
batch headers; walks the record lengths of uncompressed batches and decodes
compressed ones; validates CreateTime timestamps (KIP-937) and stamps LogAppendTime;
recompresses when the topic's compression.type names another codec.

Timestamp checks avoid per-record work where the header answers: a batch's
maxTimestamp bounds every record from above, so the "ahead of the broker" check
decodes records only to name the offending one. The "before" bound needs each record,
and is checked record by record only when it is set (its default is off).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from brook.protocol import record_batch as rb
from brook.protocol.compression import Codec
from brook.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
)

from .config import LONG_MAX


@dataclass(slots=True)
class ValidatedRecords:
    buffer: bytearray
    batches: list[rb.BatchHeader]
    log_append_time: int  # -1 for CreateTime topics


@dataclass(frozen=True, slots=True)
class TimestampBounds:
    before_max_ms: int
    after_max_ms: int

    @classmethod
    def from_topic_config(cls, config: dict[str, Any]) -> TimestampBounds:
        return cls(
            config["message.timestamp.before.max.ms"], config["message.timestamp.after.max.ms"]
        )


def validate_records(records: bytes, config: dict[str, Any], now_ms: int) -> ValidatedRecords:
    buffer = bytearray(records)
    batches = rb.split_batches(buffer)
    if not batches:
        raise CorruptRecordError("produce request holds no record batch")
    max_size = config["max.message.bytes"]
    target = config["compression.type"]
    target_codec = None if target == "producer" else Codec.from_name(target)
    log_append_time = config["message.timestamp.type"] == "LogAppendTime"
    bounds = TimestampBounds.from_topic_config(config)
    rewrite = False
    for header in batches:
        if header.size > max_size:
            raise RecordTooLargeError(
                f"The record batch of {header.size} bytes is larger than max.message.bytes"
                f"={max_size}"
            )
        _check_header(buffer, header)
        records_of_batch = None
        if header.codec == Codec.NONE:
            rb.check_uncompressed_framing(buffer, header)
        else:
            records_of_batch = rb.decode_records(buffer, header)
        if not log_append_time:
            _check_timestamps(buffer, header, records_of_batch, bounds, now_ms)
        if target_codec is not None and header.codec != target_codec:
            rewrite = True
    if rewrite:
        assert target_codec is not None
        buffer = bytearray(
            b"".join(rb.rewrite_records(buffer, header, target_codec) for header in batches)
        )
        batches = rb.split_batches(buffer)
    if log_append_time:
        for header in batches:
            stamp_log_append_time(buffer, header, now_ms)
    return ValidatedRecords(buffer, batches, now_ms if log_append_time else -1)


def _check_header(buffer: bytearray, header: rb.BatchHeader) -> None:
    rb.verify_crc(buffer, header)
    if header.is_control:
        raise InvalidRecordError("clients may not send control batches")
    if header.record_count <= 0:
        raise InvalidRecordError(f"batch reports {header.record_count} records")
    if header.last_offset_delta + 1 != header.record_count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range ({header.last_offset_delta + 1}) and record"
            f" count ({header.record_count})"
        )
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError("idempotent batch has no base sequence")


def _check_timestamps(
    buffer: bytearray,
    header: rb.BatchHeader,
    records: list[rb.Record] | None,
    bounds: TimestampBounds,
    now_ms: int,
) -> None:
    latest_allowed = now_ms + bounds.after_max_ms
    check_before = bounds.before_max_ms < LONG_MAX
    if header.max_timestamp <= latest_allowed and not check_before and records is None:
        return
    if records is None:
        records = rb.decode_records(buffer, header)
    earliest_allowed = now_ms - bounds.before_max_ms if check_before else -(2**63)
    # Offsets are relative until the log assigns them, as in Kafka's message.
    for record in records:
        relative = record.offset - header.base_offset
        if record.timestamp > latest_allowed:
            raise InvalidTimestampError(
                f"Timestamp of the message with offset [{relative}] is ahead of the broker's"
                " current time."
            )
        if record.timestamp < earliest_allowed:
            raise InvalidTimestampError(
                f"Timestamp of the message with offset [{relative}] is before the broker's"
                " current time minus message.timestamp.before.max.ms."
            )


def stamp_log_append_time(buffer: bytearray, header: rb.BatchHeader, now_ms: int) -> None:
    """Mark a batch LogAppendTime with the broker's clock and re-seal its CRC.

    Records keep their deltas; consumers read the batch's max timestamp as every
    record's timestamp when the type is LogAppendTime.
    """
    header.attributes |= rb.TIMESTAMP_TYPE_BIT
    header.max_timestamp = now_ms
    struct.pack_into(">h", buffer, header.position + rb.ATTRIBUTES_OFFSET, header.attributes)
    struct.pack_into(">q", buffer, header.position + rb.MAX_TIMESTAMP_OFFSET, now_ms)
    header.crc = rb.compute_crc(buffer, header)
    struct.pack_into(">I", buffer, header.position + rb.CRC_OFFSET, header.crc)
