"""CreatePartitions (key 37), v0-v3: grow a topic's partition count.

Each topic succeeds or fails on its own (INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a name twice, KAFKA_STORAGE_ERROR when
the new logs cannot be created, in which case none of them is kept). A request that
would add more than 10,000 partitions in all is refused whole with POLICY_VIOLATION.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
)

from ..authorizer.acl import ResourceType
from ..authorizer.checks import denied
from ..authorizer.operations import AclOperation
from ..metadata.topics import check_partitions_per_request
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.create_partitions")


class CreatePartitionsAssignmentView(Protocol):
    @property
    def broker_ids(self) -> Sequence[int]: ...


class CreatePartitionsTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def assignments(self) -> Sequence[CreatePartitionsAssignmentView] | None: ...


class CreatePartitionsRequestView(Protocol):
    """What the handler reads of a CreatePartitionsRequest (every served version has it)."""

    @property
    def topics(self) -> Sequence[CreatePartitionsTopicView]: ...
    @property
    def timeout(self) -> datetime.timedelta: ...
    @property
    def validate_only(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.create_partitions import v0, v1, v2, v3

    def _served_requests_are_views(
        r0: v0.CreatePartitionsRequest,
        r1: v1.CreatePartitionsRequest,
        r2: v2.CreatePartitionsRequest,
        r3: v3.CreatePartitionsRequest,
    ) -> list[CreatePartitionsRequestView]:
        return [r0, r1, r2, r3]


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    names = [topic.name for topic in request.topics]
    try:
        check_partitions_per_request(_partitions_asked(ctx, request.topics, names))
    except KafkaError as exc:
        log.warning(
            "CreatePartitions from %s (client %r) refused: %s",
            ctx.peer,
            ctx.client_id,
            exc.message,
        )
        return _response(ctx, types, [(topic.name, exc) for topic in request.topics])
    outcomes: list[tuple[str, KafkaError | None]] = []
    refused = denied(ctx, AclOperation.ALTER, ResourceType.TOPIC, names)
    for topic in request.topics:
        try:
            if topic.name in refused:
                raise TopicAuthorizationFailedError()
            if names.count(topic.name) > 1:
                raise InvalidRequestError("Duplicate topic name.")
            assignments = (
                None
                if topic.assignments is None
                else [list(assignment.broker_ids) for assignment in topic.assignments]
            )
            quota = None if request.validate_only else ctx.services.quotas.mutation_quota(ctx)
            if quota is not None:
                # Validated first: only a change that will be made spends the sender's
                # controller_mutation_rate (KIP-599).
                await ctx.services.controller.create_partitions(
                    topic.name, topic.count, assignments, validate_only=True
                )
                known = ctx.services.metadata.get(topic.name)
                added = topic.count - (len(known.partitions) if known is not None else 0)
                quota.record(added, time.monotonic() * 1000)
            await ctx.services.controller.create_partitions(
                topic.name,
                topic.count,
                assignments,
                validate_only=request.validate_only,
                timeout_ms=_timeout_ms(request),
            )
            outcomes.append((topic.name, None))
        except KafkaError as exc:
            log.info("CreatePartitions %s from %s failed: %s", topic.name, ctx.who, exc.message)
            outcomes.append((topic.name, exc))
    return _response(ctx, types, outcomes)


def _partitions_asked(
    ctx: RequestContext, topics: Iterable[CreatePartitionsTopicView], names: list[str]
) -> int:
    """The partitions a request would add: each existing topic's increase, once per name."""
    total = 0
    for topic in topics:
        existing = ctx.services.metadata.get(topic.name)
        if existing is not None and names.count(topic.name) == 1:
            total += max(topic.count - len(existing.partitions), 0)
    return total


def _response(
    ctx: RequestContext, types: ModuleType, outcomes: list[tuple[str, KafkaError | None]]
) -> Any:
    results = tuple(
        build(
            types.CreatePartitionsTopicResult,
            name=name,
            error_code=ErrorCode.none if error is None else error.error_code,
            error_message=None if error is None else error.message,
        )
        for name, error in outcomes
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, results=results)


def _timeout_ms(request: CreatePartitionsRequestView) -> int:
    """How long the request waits for the cluster to show the change (0: not at all)."""
    return int(request.timeout.total_seconds() * 1000)
