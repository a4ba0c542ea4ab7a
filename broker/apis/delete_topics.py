"""DeleteTopics (key 20), v1-v6: by name, and by topic id from v6. Files are removed."""

from __future__ import annotations

import datetime
import logging
import time
import uuid
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError
from brook.storage.checkpoints import topic_id_to_string

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.delete_topics")
ZERO_UUID = uuid.UUID(int=0)
BOTH_GIVEN = "Topic name and topic ID can not both be specified."


class DeleteTopicsRequestBeforeV6View(Protocol):
    """v1-v5: topics by name."""

    @property
    def topic_names(self) -> Sequence[str]: ...
    @property
    def timeout(self) -> datetime.timedelta: ...


class DeleteTopicStateView(Protocol):
    """A topic by name or by id (kio reads the zero id as None)."""

    @property
    def name(self) -> str | None: ...
    @property
    def topic_id(self) -> uuid.UUID | None: ...


class DeleteTopicsRequestFromV6View(Protocol):
    """v6+: topics by name or by id."""

    @property
    def topics(self) -> Sequence[DeleteTopicStateView]: ...
    @property
    def timeout(self) -> datetime.timedelta: ...


DeleteTopicsRequestView: TypeAlias = DeleteTopicsRequestBeforeV6View | DeleteTopicsRequestFromV6View


if TYPE_CHECKING:
    from kio.schema.delete_topics import v1, v2, v3, v4, v5, v6

    def _served_requests_are_views(
        r1: v1.DeleteTopicsRequest,
        r2: v2.DeleteTopicsRequest,
        r3: v3.DeleteTopicsRequest,
        r4: v4.DeleteTopicsRequest,
        r5: v5.DeleteTopicsRequest,
        r6: v6.DeleteTopicsRequest,
    ) -> tuple[list[DeleteTopicsRequestBeforeV6View], list[DeleteTopicsRequestFromV6View]]:
        return [r1, r2, r3, r4, r5], [r6]


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(ctx: RequestContext, request: DeleteTopicsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    metadata = ctx.services.metadata
    wanted: list[tuple[str | None, uuid.UUID]]
    if hasattr(request, "topics"):  # v6: names or ids (kio reads the zero id as None)
        states = cast(DeleteTopicsRequestFromV6View, request).topics
        wanted = [(state.name, state.topic_id or ZERO_UUID) for state in states]
    else:
        wanted = [(name, ZERO_UUID) for name in request.topic_names]
    if any(name is not None and topic_id != ZERO_UUID for name, topic_id in wanted):
        # Kafka refuses the whole request, every topic answered INVALID_REQUEST.
        log.info("DeleteTopics from %s refused: %s", ctx.peer, BOTH_GIVEN)
        return _refused(ctx, wanted, ErrorCode.invalid_request, BOTH_GIVEN)
    results = []
    quota = ctx.services.quotas.mutation_quota(ctx)
    for name, topic_id in wanted:
        error, message = ErrorCode.none, None
        if name is None and topic_id == ZERO_UUID:
            # Neither given: Kafka looks the null name up and does not find it.
            error = ErrorCode.unknown_topic_or_partition
        elif name is None:
            topic = metadata.get_by_id(topic_id)
            if topic is None:
                error, message = (
                    ErrorCode.unknown_topic_id,
                    f"Topic id {topic_id_to_string(topic_id)} not found",
                )
            else:
                name = topic.name
        # While no error is found, the name is known (given, or the topic id's).
        if (
            error is ErrorCode.none
            and name is not None
            and not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name)
        ):
            error = ErrorCode.topic_authorization_failed
            if topic_id != ZERO_UUID and not authorize(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denial=False
            ):
                name = None  # asked by id: its name is not disclosed
        if error is ErrorCode.none and name is not None:
            try:
                known = metadata.get(name)
                if known is not None and quota is not None:
                    # Its partitions spent from the controller_mutation_rate (KIP-599).
                    quota.record(len(known.partitions), time.monotonic() * 1000)
                topic_id = await ctx.services.controller.delete_topic(name, _timeout_ms(request))
            except KafkaError as exc:
                error, message = exc.error_code, exc.message
                log.info("DeleteTopics %s from %s failed: %s", name, ctx.who, exc.message)
        results.append(_result(types, name, topic_id, error, message))
    return build(ctx.response_type, throttle_time=NO_THROTTLE, responses=tuple(results))


def _result(
    types: ModuleType, name: str | None, topic_id: uuid.UUID, error: ErrorCode, message: str | None
) -> Any:
    return build(
        types.DeletableTopicResult,
        name=name,
        topic_id=topic_id,
        error_code=error,
        error_message=message,
    )


def _refused(
    ctx: RequestContext,
    wanted: list[tuple[str | None, uuid.UUID]],
    error: ErrorCode,
    message: str,
) -> Any:
    types = schema_module(ctx.response_type)
    results = tuple(_result(types, name, topic_id, error, message) for name, topic_id in wanted)
    return build(ctx.response_type, throttle_time=NO_THROTTLE, responses=results)


def _timeout_ms(request: DeleteTopicsRequestView) -> int:
    """How long the request waits for the cluster to show the change (0: not at all)."""
    return int(request.timeout.total_seconds() * 1000)
