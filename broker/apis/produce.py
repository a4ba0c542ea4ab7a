"""Produce (key 0), v3-v12 (advertised from v0 as Kafka 4.1 does).

The handler authorizes and answers; the appends, and every wait they need (acks=all
commits, KIP-890 transaction verification, a fault that pauses appends), are the
ReplicaManager's (append_records.py), as in Kafka's KafkaApis.handleProduceRequest.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, RecordError
from brook.storage.log_validator import AppendOrigin

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorized
from ..authorizer.operations import AclOperation
from ..replica.append_records import AppendResults, PartitionResponse
from ..replica.partition import ACKS_ALL
from ..server.request_context import RequestContext
from ..transactions import verification
from . import NO_RESPONSE, NO_THROTTLE, build, handles, schema_module

_VALID_ACKS = (0, 1, ACKS_ALL)
Answers = list[tuple[str, list[tuple[int, PartitionResponse | None]]]]


class ProducePartitionDataView(Protocol):
    """A partition of a ProduceRequest (Kafka's PartitionProduceData)."""

    @property
    def index(self) -> int: ...
    @property
    def records(self) -> bytes | None: ...


class ProduceTopicDataView(Protocol):
    """A topic of a ProduceRequest (Kafka's TopicProduceData)."""

    @property
    def name(self) -> str: ...
    @property
    def partition_data(self) -> Sequence[ProducePartitionDataView]: ...


class ProduceRequestView(Protocol):
    """What the handler reads of a ProduceRequest (every served version has it)."""

    @property
    def transactional_id(self) -> str | None: ...
    @property
    def acks(self) -> int: ...
    @property
    def timeout(self) -> datetime.timedelta: ...
    @property
    def topic_data(self) -> Sequence[ProduceTopicDataView]: ...


if TYPE_CHECKING:
    from kio.schema.produce import v3, v4, v5, v6, v7, v8, v9, v10, v11, v12

    def _served_requests_are_views(
        r3: v3.ProduceRequest,
        r4: v4.ProduceRequest,
        r5: v5.ProduceRequest,
        r6: v6.ProduceRequest,
        r7: v7.ProduceRequest,
        r8: v8.ProduceRequest,
        r9: v9.ProduceRequest,
        r10: v10.ProduceRequest,
        r11: v11.ProduceRequest,
        r12: v12.ProduceRequest,
    ) -> list[ProduceRequestView]:
        return [r3, r4, r5, r6, r7, r8, r9, r10, r11, r12]


@handles(ApiKey.PRODUCE)
def handle_produce(ctx: RequestContext, request: ProduceRequestView) -> Any:
    acks = request.acks
    denied = _denied(ctx, request) if ctx.services.authorizer is not None else {}
    # The request's topics and partitions in order, with the answer of those refused
    # before any append (the others are answered by the appends, in the same order).
    partitions: Answers = []
    entries: list[tuple[tuple[str, int], bytes | None]] = []
    for topic_data in request.topic_data:
        topic_answers: list[tuple[int, PartitionResponse | None]] = []
        for partition_data in topic_data.partition_data:
            refused: PartitionResponse | None = None
            if acks not in _VALID_ACKS:
                refused = PartitionResponse(ErrorCode.invalid_required_acks)
            elif topic_data.name in denied:
                refused = PartitionResponse(denied[topic_data.name])
            else:
                entries.append(((topic_data.name, partition_data.index), partition_data.records))
            topic_answers.append((partition_data.index, refused))
        partitions.append((topic_data.name, topic_answers))
    transactional_id = request.transactional_id
    appended = ctx.services.replicas.append_records(
        entries,
        required_acks=acks,
        origin=AppendOrigin.CLIENT,
        timeout_s=request.timeout.total_seconds(),
        requester=ctx.who,
        verification=(
            verification.TransactionVerification(
                ctx.services, transactional_id, verification.for_produce(ctx.api_version)
            )
            if transactional_id is not None
            else None
        ),
        injected_error=ctx.injected_error if ctx.faults is not None else None,
        max_decompressed_bytes=ctx.services.config["socket.request.max.bytes"],
    )
    refused_any = any(refused is not None for _, answers in partitions for _, refused in answers)
    if acks == 0:
        if appended.completion is not None:
            return _no_response_when_appended(ctx, appended, refused_any)
        if refused_any or appended.failed:
            # A client that asked for no response learns of the failure by losing its
            # connection, as with Kafka.
            ctx.connection.close()
        return NO_RESPONSE
    if appended.completion is not None:
        return _respond_when_completed(ctx, partitions, appended)
    return _response(ctx, partitions, appended)


def _denied(ctx: RequestContext, request: ProduceRequestView) -> dict[str, ErrorCode]:
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
    ctx: RequestContext, appended: AppendResults, refused_any: bool
) -> Any:
    """acks=0 with appends still to make: the connection's next request waits for them,
    so that requests still change state in the order they were sent."""
    assert appended.completion is not None
    await appended.completion
    if refused_any or appended.failed:
        ctx.connection.close()
    return NO_RESPONSE


async def _respond_when_completed(
    ctx: RequestContext,
    partitions: Answers,
    appended: AppendResults,
) -> Any:
    assert appended.completion is not None
    await appended.completion
    return _response(ctx, partitions, appended)


def _response(
    ctx: RequestContext,
    partitions: Answers,
    appended: AppendResults,
) -> Any:
    types = schema_module(ctx.response_type)
    responses = iter(appended.responses)
    return build(
        ctx.response_type,
        responses=tuple(
            build(
                types.TopicProduceResponse,
                name=name,
                partition_responses=tuple(
                    _partition_response(types, index, refused or next(responses))
                    for index, refused in answers
                ),
            )
            for name, answers in partitions
        ),
        throttle_time=NO_THROTTLE,
    )


def _partition_response(types: ModuleType, index: int, result: PartitionResponse) -> Any:
    return build(
        types.PartitionProduceResponse,
        index=index,
        error_code=result.error,
        base_offset=result.base_offset,
        log_append_time=result.log_append_datetime,
        log_start_offset=result.log_start_offset,
        record_errors=_record_errors(types, result.record_errors),
        error_message=result.message,
    )


def _record_errors(types: ModuleType, errors: tuple[RecordError, ...]) -> tuple[Any, ...]:
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
