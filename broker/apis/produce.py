"""Produce (key 0), v3-v11 (advertised from v0 as Kafka 4.1 does).

Each partition is validated (broker/log_validator.py) and appended on its own: a bad
batch fails its partition only, and nothing of it is written.
"""

from __future__ import annotations

import datetime
import logging
from dataclasses import dataclass
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import (
    ErrorCode,
    KafkaError,
    NotEnoughReplicasError,
    RecordError,
    RecordValidationError,
)

from ..log_validator import validate_records
from ..request_context import RequestContext
from ..topics import Topic
from . import NO_RESPONSE, NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.produce")
ACKS_ALL = -1


@dataclass(slots=True)
class PartitionResult:
    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    log_append_time: int = -1
    # Kafka answers a message and per-record errors only for a RecordValidationException
    # (records refused by a per-record rule); every other error goes without a message.
    message: str | None = None
    record_errors: tuple[RecordError, ...] = ()

    @property
    def log_append_datetime(self) -> datetime.datetime | None:
        if self.log_append_time < 0:
            return None
        return datetime.datetime.fromtimestamp(self.log_append_time / 1000, datetime.UTC)


@handles(ApiKey.PRODUCE)
def handle_produce(ctx: RequestContext, request: Any) -> Any:
    types = schema_module(ctx.response_type)
    acks = request.acks
    results = []
    failed = False
    for topic_data in request.topic_data:
        topic = ctx.broker.topics.get(topic_data.name)
        partition_results = []
        for partition_data in topic_data.partition_data:
            if acks not in (0, 1, ACKS_ALL):
                result = PartitionResult(ErrorCode.invalid_required_acks)
            else:
                result = _append(
                    ctx, topic, topic_data.name, partition_data.index, partition_data.records, acks
                )
            failed = failed or result.error is not ErrorCode.none
            partition_results.append(
                build(
                    types.PartitionProduceResponse,
                    index=partition_data.index,
                    error_code=result.error,
                    base_offset=result.base_offset,
                    log_append_time=result.log_append_datetime,
                    log_start_offset=result.log_start_offset,
                    record_errors=_record_errors(types, result.record_errors),
                    error_message=result.message,
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


def _record_errors(types: Any, errors: tuple[RecordError, ...]) -> tuple[Any, ...]:
    """The per-record errors, for versions that carry them (v8+)."""
    if not errors or not hasattr(types, "BatchIndexAndErrorMessage"):
        return ()
    return tuple(
        build(
            types.BatchIndexAndErrorMessage,
            batch_index=error.batch_index,
            batch_index_error_message=error.message,
        )
        for error in errors
    )


def _append(
    ctx: RequestContext,
    topic: Topic | None,
    name: str,
    index: int,
    records: bytes | None,
    acks: int,
) -> PartitionResult:
    if topic is None or not 0 <= index < len(topic.partitions):
        return PartitionResult(ErrorCode.unknown_topic_or_partition)
    partition = topic.partitions[index]
    if not records:
        return PartitionResult(ErrorCode.none, log_start_offset=partition.log_start_offset)
    try:
        min_insync = topic.effective_config["min.insync.replicas"]
        if acks == ACKS_ALL and len(partition.isr) < min_insync:
            # Kafka refuses before writing when the ISR is too small for acks=all.
            raise NotEnoughReplicasError(
                f"The size of the current ISR {set(partition.isr)} is insufficient to satisfy"
                f" the min.isr requirement of {min_insync} for partition {name}-{index}"
            )
        now = ctx.broker.clock()
        validated = validate_records(
            records,
            topic.effective_config,
            now,
            topic_partition=f"{name}-{index}",
            max_decompressed_bytes=ctx.broker.config["socket.request.max.bytes"],
        )
        info = partition.append_as_leader(validated.buffer, validated.batches, now)
    except KafkaError as exc:
        detail = exc.message
        if isinstance(exc, RecordValidationError):
            detail += ": " + ", ".join(str(error) for error in exc.record_errors[:3])
        log.warning(
            "Rejected produce to %s-%d from %s (client %r): %s: %s",
            name,
            index,
            ctx.peer,
            ctx.client_id,
            exc.error_code.name.upper(),
            detail,
        )
        if isinstance(exc, RecordValidationError):
            return PartitionResult(
                exc.error_code,
                log_start_offset=partition.log_start_offset,
                message=exc.message,
                record_errors=tuple(exc.record_errors),
            )
        return PartitionResult(exc.error_code, log_start_offset=partition.log_start_offset)
    return PartitionResult(
        ErrorCode.none, info.first_offset, partition.log_start_offset, validated.log_append_time
    )
