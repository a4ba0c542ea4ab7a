"""Produce (key 0), v3-v12 (advertised from v0 as Kafka 4.1 does).

Each partition appends on its own (its log validates the records first): a bad batch
fails its partition only, and nothing of it is written. An acks=all produce is
answered once its records are committed, as Kafka's DelayedProduce. A transactional
batch is taken only into its producer's open transaction (KIP-890; see
transactions/verification.py): from v12 the broker adds the partition to it first.
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

from ..authorized_operations import AclOperation
from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorized
from ..observability.partition_stats import NOT_FAILED_PRODUCE
from ..partition import ACKS_ALL, Partition
from ..request_context import RequestContext
from ..transactions import verification
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
    # Appends not answered yet: acks=all appends whose records are not yet on every
    # in-sync replica, and transactional ones waiting for their partition to be added to
    # the transaction (transaction version 2).
    uncommitted: list[tuple[PartitionResult, asyncio.Future[None]]] = []
    failed = False
    denied = _denied(ctx, request) if ctx.services.authorizer is not None else None
    for topic_data in request.topic_data:
        partition_results = []
        for partition_data in topic_data.partition_data:
            if acks not in (0, 1, ACKS_ALL):
                result = PartitionResult(ErrorCode.invalid_required_acks)
            elif denied is not None and topic_data.name in denied:
                result = PartitionResult(denied[topic_data.name])
            else:
                result, waiter = _append(
                    ctx,
                    topic_data.name,
                    partition_data.index,
                    partition_data.records,
                    acks,
                    request.transactional_id,
                    request.timeout.total_seconds(),
                )
                if waiter is not None:
                    uncommitted.append((result, waiter))
            failed = failed or result.error is not ErrorCode.none
            partition_results.append((partition_data.index, result))
        results.append((topic_data.name, partition_results))
    if acks == 0:
        if uncommitted:
            return _no_response_when_appended(ctx, uncommitted, failed)
        if failed:
            # A client that asked for no response learns of the failure by losing its
            # connection, as with Kafka.
            ctx.connection.close()
        return NO_RESPONSE
    if uncommitted:
        return _respond_when_committed(ctx, results, uncommitted, request.timeout.total_seconds())
    return _response(ctx, results)


def _denied(ctx: RequestContext, request: Any) -> dict[str, ErrorCode]:
    """The topics this request may not write to, with Kafka's error: every one without
    Write on the transactional id, else those without Write on the topic."""
    names = {topic_data.name for topic_data in request.topic_data}
    transactional_id = request.transactional_id
    if transactional_id is not None and not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return dict.fromkeys(names, ErrorCode.transactional_id_authorization_failed)
    allowed = authorized(ctx, AclOperation.WRITE, ResourceType.TOPIC, names)
    return dict.fromkeys(names - allowed, ErrorCode.topic_authorization_failed)


async def _no_response_when_appended(
    ctx: RequestContext,
    waiting: list[tuple[PartitionResult, asyncio.Future[None]]],
    failed: bool,
) -> Any:
    """acks=0 with appends still to make: the connection's next request waits for them,
    so that requests still change state in the order they were sent."""
    await asyncio.wait([waiter for _, waiter in waiting])
    if failed or any(result.error is not ErrorCode.none for result, _ in waiting):
        ctx.connection.close()
    return NO_RESPONSE


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
    timeout_s: float = 30.0,
) -> tuple[PartitionResult, asyncio.Future[None] | None]:
    injected = ctx.injected_error(name, index)
    if injected is not None:
        return PartitionResult(injected), None
    partition = ctx.services.replicas.hosted(name, index)
    if partition is None:
        return PartitionResult(ErrorCode.unknown_topic_or_partition), None
    if not records:
        return PartitionResult(ErrorCode.none, log_start_offset=partition.log_start_offset), None
    stalled = ctx.services.faults.append_gate(name, index)
    if stalled is not None:
        # A fault holds the partition's appends back (a stalled disk): this one waits,
        # and is then made as if it had just arrived.
        result = PartitionResult(ErrorCode.none)
        later = _append_later(
            ctx, result, stalled, name, index, records, acks, transactional_id, timeout_s
        )
        return result, asyncio.ensure_future(later)
    partition.stats.produce_requests += 1
    if transactional_id is not None:
        try:
            producer = _transactional_producer(records)
            if producer is not None:
                coordinator = verification.coordinator_of(ctx.services, transactional_id)
                operation = verification.for_produce(ctx.api_version)
                if not verification.verify(
                    coordinator, transactional_id, producer, (name, index), operation
                ):
                    result = PartitionResult(ErrorCode.none)
                    added = _append_once_added(
                        ctx,
                        partition,
                        result,
                        records,
                        acks,
                        (coordinator, transactional_id, producer, operation),
                        timeout_s,
                    )
                    return result, asyncio.ensure_future(added)
        except KafkaError as exc:
            return _refused(ctx, name, index, partition, exc), None
    return _append_now(ctx, partition, records, acks)


def _transactional_producer(records: bytes) -> ProducerIdAndEpoch | None:
    """The producer of a transactional data batch (None for any other batch)."""
    if len(records) < RECORD_BATCH_HEADER_SIZE:
        return None  # too short to be a batch: the log validator refuses it
    header = parse_header(records)
    if not header.is_transactional or header.is_control:
        return None
    return ProducerIdAndEpoch(header.producer_id, header.producer_epoch)


async def _append_once_added(
    ctx: RequestContext,
    partition: Partition,
    result: PartitionResult,
    records: bytes,
    acks: int,
    transaction: tuple[
        verification.AnyCoordinator, str, ProducerIdAndEpoch, verification.SupportedOperation
    ],
    timeout_s: float,
) -> None:
    """Transaction version 2: the coordinator adds the partition to the producer's
    transaction, then the batch is appended (and, with acks=all, committed); a remote
    coordinator is asked first (to add, or only to verify for the older versions)."""
    coordinator, transactional_id, producer, operation = transaction
    tp = (partition.topic, partition.index)
    try:
        await verification.add(coordinator, transactional_id, producer, tp, timeout_s, operation)
    except KafkaError as exc:
        refused = _refused(ctx, partition.topic, partition.index, partition, exc)
        result.error, result.log_start_offset = refused.error, refused.log_start_offset
        return
    await _append_into(ctx, partition, result, records, acks)


async def _append_later(
    ctx: RequestContext,
    result: PartitionResult,
    stalled: asyncio.Future[None],
    name: str,
    index: int,
    records: bytes,
    acks: int,
    transactional_id: str | None,
    timeout_s: float,
) -> None:
    await asyncio.shield(stalled)
    appended, waiter = _append(ctx, name, index, records, acks, transactional_id, timeout_s)
    _fill(result, appended)
    if waiter is not None:
        await waiter


async def _append_into(
    ctx: RequestContext, partition: Partition, result: PartitionResult, records: bytes, acks: int
) -> None:
    """Append now and fill `result` (answered already as a placeholder)."""
    appended, waiter = _append_now(ctx, partition, records, acks)
    _fill(result, appended)
    if waiter is not None:
        await waiter


def _fill(result: PartitionResult, appended: PartitionResult) -> None:
    result.error, result.base_offset = appended.error, appended.base_offset
    result.log_start_offset, result.log_append_time = (
        appended.log_start_offset,
        appended.log_append_time,
    )
    result.message, result.record_errors = appended.message, appended.record_errors


def _append_now(
    ctx: RequestContext, partition: Partition, records: bytes, acks: int
) -> tuple[PartitionResult, asyncio.Future[None] | None]:
    try:
        info = partition.append_records_as_leader(
            records,
            AppendOrigin.CLIENT,
            acks,
            ctx.services.clock(),
            max_decompressed_bytes=ctx.services.config["socket.request.max.bytes"],
        )
    except KafkaError as exc:
        return _refused(ctx, partition.topic, partition.index, partition, exc), None
    result = PartitionResult(
        ErrorCode.none, info.first_offset, info.log_start_offset, info.log_append_time
    )
    waiter = partition.wait_for_commit(info.last_offset + 1) if acks == ACKS_ALL else None
    return result, waiter


def _refused(
    ctx: RequestContext, name: str, index: int, partition: Partition, exc: KafkaError
) -> PartitionResult:
    if exc.error_code not in NOT_FAILED_PRODUCE:
        partition.stats.failed_produce_requests += 1
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
