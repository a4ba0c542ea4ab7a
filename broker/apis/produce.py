"""Produce (key 0), v3-v11 (advertised from v0 as Kafka 4.1 does).

Each partition appends on its own (its log validates the records first): a bad batch
fails its partition only, and nothing of it is written. An acks=all produce is
answered once its records are committed, as Kafka's DelayedProduce.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from dataclasses import dataclass
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError, RecordError, RecordValidationError
from brook.protocol.record_batch import HEADER_SIZE as RECORD_BATCH_HEADER_SIZE
from brook.protocol.record_batch import parse_header
from brook.storage.log_validator import AppendOrigin

from ..partition import ACKS_ALL
from ..request_context import RequestContext
from ..transactions.errors import InvalidTxnStateError
from ..transactions.shard import ProducerIdAndEpoch
from . import NO_RESPONSE, NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.produce")


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
    acks = request.acks
    results: list[tuple[str, list[tuple[int, PartitionResult]]]] = []
    # acks=all appends whose records are not yet on every in-sync replica.
    uncommitted: list[tuple[PartitionResult, asyncio.Future[None]]] = []
    failed = False
    for topic_data in request.topic_data:
        partition_results = []
        for partition_data in topic_data.partition_data:
            if acks not in (0, 1, ACKS_ALL):
                result = PartitionResult(ErrorCode.invalid_required_acks)
            else:
                result, waiter = _append(
                    ctx,
                    topic_data.name,
                    partition_data.index,
                    partition_data.records,
                    acks,
                    request.transactional_id,
                )
                if waiter is not None:
                    uncommitted.append((result, waiter))
            failed = failed or result.error is not ErrorCode.none
            partition_results.append((partition_data.index, result))
        results.append((topic_data.name, partition_results))
    if acks == 0:
        if failed:
            # A client that asked for no response learns of the failure by losing its
            # connection, as with Kafka.
            ctx.connection.close()
        return NO_RESPONSE
    if uncommitted:
        return _respond_when_committed(ctx, results, uncommitted, request.timeout.total_seconds())
    return _response(ctx, results)


async def _respond_when_committed(
    ctx: RequestContext,
    results: list[tuple[str, list[tuple[int, PartitionResult]]]],
    uncommitted: list[tuple[PartitionResult, asyncio.Future[None]]],
    timeout_s: float,
) -> Any:
    """Kafka's DelayedProduce: answer once every acks=all append is committed, or
    REQUEST_TIMED_OUT for those still waiting when the request's timeout passes."""
    waiters = [waiter for _, waiter in uncommitted]
    await asyncio.wait(waiters, timeout=max(timeout_s, 0))
    for result, waiter in uncommitted:
        if not waiter.done():
            waiter.cancel()
            result.error = ErrorCode.request_timed_out
        elif (exc := waiter.exception()) is not None:
            result.error = exc.error_code if isinstance(exc, KafkaError) else _UNKNOWN
    return _response(ctx, results)


_UNKNOWN = ErrorCode.unknown_server_error


def _response(
    ctx: RequestContext, results: list[tuple[str, list[tuple[int, PartitionResult]]]]
) -> Any:
    types = schema_module(ctx.response_type)
    return build(
        ctx.response_type,
        responses=tuple(
            build(
                types.TopicProduceResponse,
                name=name,
                partition_responses=tuple(
                    build(
                        types.PartitionProduceResponse,
                        index=index,
                        error_code=result.error,
                        base_offset=result.base_offset,
                        log_append_time=result.log_append_datetime,
                        log_start_offset=result.log_start_offset,
                        record_errors=_record_errors(types, result.record_errors),
                        error_message=result.message,
                    )
                    for index, result in partitions
                ),
            )
            for name, partitions in results
        ),
        throttle_time=NO_THROTTLE,
    )


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
    name: str,
    index: int,
    records: bytes | None,
    acks: int,
    transactional_id: str | None = None,
) -> tuple[PartitionResult, asyncio.Future[None] | None]:
    partition = ctx.services.replicas.hosted(name, index)
    if partition is None:
        return PartitionResult(ErrorCode.unknown_topic_or_partition), None
    if not records:
        return PartitionResult(ErrorCode.none, log_start_offset=partition.log_start_offset), None
    try:
        if transactional_id is not None:
            _verify_in_transaction(ctx, transactional_id, name, index, records)
        info = partition.append_records_as_leader(
            records,
            AppendOrigin.CLIENT,
            acks,
            ctx.services.clock(),
            max_decompressed_bytes=ctx.services.config["socket.request.max.bytes"],
        )
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
            ), None
        return PartitionResult(exc.error_code, log_start_offset=partition.log_start_offset), None
    result = PartitionResult(
        ErrorCode.none, info.first_offset, info.log_start_offset, info.log_append_time
    )
    waiter = partition.wait_for_commit(info.last_offset + 1) if acks == ACKS_ALL else None
    return result, waiter


def _verify_in_transaction(
    ctx: RequestContext, transactional_id: str, topic: str, index: int, records: bytes
) -> None:
    """KIP-890's partition verification (Kafka 3.6+): a transactional batch is taken only
    when its producer's ongoing transaction includes the partition, so a late or zombie
    write cannot open a transaction the coordinator knows nothing of."""
    if len(records) < RECORD_BATCH_HEADER_SIZE:
        return  # too short to be a batch: the log validator refuses it
    header = parse_header(records)
    if not header.is_transactional or header.is_control:
        return
    errors = ctx.services.transactions.verify_partitions(
        transactional_id,
        ProducerIdAndEpoch(header.producer_id, header.producer_epoch),
        [(topic, index)],
    )
    if errors:
        raise InvalidTxnStateError(
            f"The partition {topic}-{index} is not in the ongoing transaction of"
            f" transactional id {transactional_id} (producer {header.producer_id})"
        )
