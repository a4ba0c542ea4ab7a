"""DeleteRecords (key 21), v0-v2: move a partition's log start offset forward.

Records below the new log start can no longer be fetched (OFFSET_OUT_OF_RANGE, and
consumers reset per auto.offset.reset); segments wholly below it are deleted. Offset
-1 means the high watermark; an offset beyond it is OFFSET_OUT_OF_RANGE. The answer
waits until every replica's log start has moved there too (followers learn it from
their fetches), bounded by the request's timeout, as Kafka's DelayedDeleteRecords.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.delete_records")


class DeleteRecordsPartitionView(Protocol):
    """A partition and the offset its records are deleted below."""

    @property
    def partition_index(self) -> int: ...
    @property
    def offset(self) -> int: ...


class DeleteRecordsTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[DeleteRecordsPartitionView]: ...


class DeleteRecordsRequestView(Protocol):
    """What the handler reads of a DeleteRecordsRequest (every served version has it)."""

    @property
    def topics(self) -> Sequence[DeleteRecordsTopicView]: ...
    @property
    def timeout(self) -> datetime.timedelta: ...


if TYPE_CHECKING:
    from kio.schema.delete_records import v0, v1, v2

    def _served_requests_are_views(
        r0: v0.DeleteRecordsRequest, r1: v1.DeleteRecordsRequest, r2: v2.DeleteRecordsRequest
    ) -> list[DeleteRecordsRequestView]:
        return [r0, r1, r2]


@handles(ApiKey.DELETE_RECORDS)
def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequestView) -> Any:
    results: list[tuple[str, list[_Result]]] = []
    waiting: list[tuple[_Result, asyncio.Future[None]]] = []
    refused = denied(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        partitions = []
        for entry in topic.partitions:
            if topic.name in refused:
                error = ErrorCode.topic_authorization_failed
                partitions.append(_Result(entry.partition_index, error))
                continue
            result, waiter = _delete_below(ctx, topic.name, entry.partition_index, entry.offset)
            partitions.append(result)
            if waiter is not None:
                waiting.append((result, waiter))
        results.append((topic.name, partitions))
    if waiting:
        return _respond_when_replicated(ctx, results, waiting, request.timeout.total_seconds())
    return _response(ctx, results)


@dataclass(slots=True)
class _Result:
    partition_index: int
    error: ErrorCode
    low_watermark: int = -1


def _delete_below(
    ctx: RequestContext, topic: str, index: int, offset: int
) -> tuple[_Result, asyncio.Future[None] | None]:
    try:
        partition = ctx.services.replicas.partition(topic, index)
        log_start = partition.delete_records_on_leader(offset)
    except KafkaError as exc:
        log.info(
            "DeleteRecords %s-%d to %d from %s: %s", topic, index, offset, ctx.who, exc.message
        )
        return _Result(index, exc.error_code), None
    log.info("DeleteRecords: %s-%d now starts at %d", topic, index, log_start)
    # As Kafka's DelayedDeleteRecords: answered once every replica starts there too.
    return _Result(index, ErrorCode.none, log_start), partition.wait_for_low_watermark(log_start)


async def _respond_when_replicated(
    ctx: RequestContext,
    results: list[tuple[str, list[_Result]]],
    waiting: list[tuple[_Result, asyncio.Future[None]]],
    timeout_s: float,
) -> Any:
    """REQUEST_TIMED_OUT for the partitions whose replicas are not there when the
    request's timeout passes (the leader's log start has moved all the same)."""
    await asyncio.wait([waiter for _, waiter in waiting], timeout=max(timeout_s, 0))
    for result, waiter in waiting:
        if not waiter.done():
            waiter.cancel()
            result.error, result.low_watermark = ErrorCode.request_timed_out, -1
        elif (exc := waiter.exception()) is not None:
            code = exc.error_code if isinstance(exc, KafkaError) else ErrorCode.unknown_server_error
            result.error, result.low_watermark = code, -1
    return _response(ctx, results)


def _response(ctx: RequestContext, results: list[tuple[str, list[_Result]]]) -> Any:
    types = schema_module(ctx.response_type)
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                types.DeleteRecordsTopicResult,
                name=name,
                partitions=tuple(
                    build(
                        types.DeleteRecordsPartitionResult,
                        partition_index=result.partition_index,
                        low_watermark=result.low_watermark,
                        error_code=result.error,
                    )
                    for result in partitions
                ),
            )
            for name, partitions in results
        ),
    )
