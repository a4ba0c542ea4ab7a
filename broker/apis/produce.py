"""Produce (key 0), v3-v11 (advertised from v0 as Kafka 4.1 does).

Each partition is validated and appended on its own: a bad batch fails its partition
only. Validation works on batch headers (framing, CRC, offsets and count) and decodes
records only where it must: compressed batches are inflated to check their records,
and re-encoded only when the topic's compression.type asks for another codec.
"""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol import record_batch as rb
from brook.protocol.api_table import ApiKey
from brook.protocol.compression import Codec
from brook.protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRecordError,
    KafkaError,
    RecordTooLargeError,
)

from ..broker import now_ms
from ..request_context import RequestContext
from ..topics import Topic
from . import NO_RESPONSE, NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.produce")


@handles(ApiKey.PRODUCE)
def handle_produce(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    types = schema_module(ctx.response_type)
    acks = request.acks
    results = []
    failed = False
    for topic_data in request.topic_data:
        topic = broker.topics.get(topic_data.name)
        partition_results = []
        for partition_data in topic_data.partition_data:
            if acks not in (0, 1, -1):
                error, base_offset, message = ErrorCode.invalid_required_acks, -1, None
                start = -1
            else:
                error, base_offset, start, message = _append(
                    ctx, topic, topic_data.name, partition_data.index, partition_data.records
                )
            failed = failed or error is not ErrorCode.none
            partition_results.append(
                build(
                    types.PartitionProduceResponse,
                    index=partition_data.index,
                    error_code=error,
                    base_offset=base_offset,
                    log_append_time=None,
                    log_start_offset=start,
                    record_errors=(),
                    error_message=message,
                )
            )
        results.append(
            build(
                types.TopicProduceResponse,
                name=topic_data.name,
                partition_responses=tuple(partition_results),
            )
        )
    if acks == 0:
        if failed:
            # A client that asked for no response learns of the failure by losing its
            # connection, as with Kafka.
            ctx.connection.close()
        return NO_RESPONSE
    return build(ctx.response_type, responses=tuple(results), throttle_time=NO_THROTTLE)


def _append(
    ctx: RequestContext, topic: Topic | None, name: str, index: int, records: bytes | None
) -> tuple[ErrorCode, int, int, str | None]:
    """Validate and append one partition's batches: (error, base offset, log start, msg)."""
    if topic is None or not 0 <= index < len(topic.partitions):
        return ErrorCode.unknown_topic_or_partition, -1, -1, None
    partition = topic.partitions[index]
    if not records:
        return ErrorCode.none, -1, partition.log_start_offset, None
    try:
        config = topic.effective_config
        buffer, batches = validate_batches(records, config)
        info = partition.append_as_leader(buffer, batches, now_ms())
    except KafkaError as exc:
        log.warning(
            "Rejected produce to %s-%d from %s (client %r): %s: %s",
            name,
            index,
            ctx.peer,
            ctx.client_id,
            exc.error_code.name.upper(),
            exc.message,
        )
        return exc.error_code, -1, partition.log_start_offset, exc.message
    return ErrorCode.none, info.first_offset, partition.log_start_offset, None


def validate_batches(
    records: bytes, config: dict[str, Any]
) -> tuple[bytearray, list[rb.BatchHeader]]:
    """Check a partition's record set as Kafka's LogValidator does, and recompress when
    the topic asks for another codec. Returns a mutable buffer and its batch headers."""
    buffer = bytearray(records)
    batches = rb.split_batches(buffer)
    if not batches:
        raise CorruptRecordError("produce request holds no record batch")
    max_size = config["max.message.bytes"]
    target = config["compression.type"]
    target_codec = None if target == "producer" else Codec.from_name(target)
    rewrite = False
    for header in batches:
        if header.size > max_size:
            raise RecordTooLargeError(
                f"The record batch of {header.size} bytes is larger than max.message.bytes"
                f"={max_size}"
            )
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
        if header.codec == Codec.NONE:
            rb.check_uncompressed_framing(buffer, header)
        else:
            rb.decode_records(buffer, header)
        if target_codec is not None and header.codec != target_codec:
            rewrite = True
    if rewrite:
        assert target_codec is not None
        buffer = bytearray(
            b"".join(rb.rewrite_records(buffer, header, target_codec) for header in batches)
        )
        batches = rb.split_batches(buffer)
    return buffer, batches
