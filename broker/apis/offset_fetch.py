"""OffsetFetch (key 9), v1-v9: a group's committed positions; several groups from v8.

A partition without a commit answers offset -1. `topics` null (v2+) asks for every
partition the group has committed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module


class OffsetFetchRequestTopicView(Protocol):
    """A topic asked for (Kafka's OffsetFetchRequestTopic, OffsetFetchRequestTopics v8+)."""

    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


class OffsetFetchRequestBeforeV8View(Protocol):
    """v1-v7: one group; require_stable (v7+) is read where the version has it."""

    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[OffsetFetchRequestTopicView] | None: ...


class OffsetFetchRequestGroupView(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[OffsetFetchRequestTopicView] | None: ...


class OffsetFetchRequestFromV8View(Protocol):
    """v8+: several groups."""

    @property
    def groups(self) -> Sequence[OffsetFetchRequestGroupView]: ...
    @property
    def require_stable(self) -> bool: ...


OffsetFetchRequestView: TypeAlias = OffsetFetchRequestBeforeV8View | OffsetFetchRequestFromV8View


if TYPE_CHECKING:
    from kio.schema.offset_fetch import v1, v2, v3, v4, v5, v6, v7, v8, v9

    def _served_requests_are_views(
        r1: v1.OffsetFetchRequest,
        r2: v2.OffsetFetchRequest,
        r3: v3.OffsetFetchRequest,
        r4: v4.OffsetFetchRequest,
        r5: v5.OffsetFetchRequest,
        r6: v6.OffsetFetchRequest,
        r7: v7.OffsetFetchRequest,
        r8: v8.OffsetFetchRequest,
        r9: v9.OffsetFetchRequest,
    ) -> tuple[list[OffsetFetchRequestBeforeV8View], list[OffsetFetchRequestFromV8View]]:
        return [r1, r2, r3, r4, r5, r6, r7], [r8, r9]


@handles(ApiKey.OFFSET_FETCH)
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequestView) -> Any:
    if ctx.api_version >= 8:
        return await _offsets_of_groups(ctx, cast(OffsetFetchRequestFromV8View, request))
    return await _offsets_of_group(ctx, cast(OffsetFetchRequestBeforeV8View, request))


async def _offsets_of_groups(ctx: RequestContext, request: OffsetFetchRequestFromV8View) -> Any:
    # Offsets answer only once their commits are (Kafka reads the committed snapshot).
    for group in request.groups:
        await ctx.services.groups.writes_committed(group.group_id)
    types = schema_module(ctx.response_type)
    groups = []
    for group in request.groups:
        # v9+: a consumer group's member fetches with its id and epoch (KIP-848).
        member_id = getattr(group, "member_id", None)
        member_epoch = getattr(group, "member_epoch", -1)
        member_error = ErrorCode.none
        if member_id is not None or member_epoch >= 0:
            member_error = ctx.services.groups.validate_fetch_member(
                group.group_id, member_id, member_epoch
            )
        error, topics = _topics(
            ctx,
            types,
            "OffsetFetchResponseTopics",
            "OffsetFetchResponsePartitions",
            group.group_id,
            _requested(group.topics),
            request.require_stable,
            member_error,
        )
        groups.append(
            build(
                types.OffsetFetchResponseGroup,
                group_id=group.group_id,
                topics=topics,
                error_code=error,
            )
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=tuple(groups))


async def _offsets_of_group(ctx: RequestContext, request: OffsetFetchRequestBeforeV8View) -> Any:
    # Offsets answer only once their commits are (Kafka reads the committed snapshot).
    await ctx.services.groups.writes_committed(request.group_id)
    types = schema_module(ctx.response_type)
    error, topics = _topics(
        ctx,
        types,
        "OffsetFetchResponseTopic",
        "OffsetFetchResponsePartition",
        request.group_id,
        _requested(request.topics),
        getattr(request, "require_stable", False),  # v7+
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=topics, error_code=error)


def _requested(
    topics: Iterable[OffsetFetchRequestTopicView] | None,
) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(topic.name, index) for topic in topics for index in topic.partition_indexes]


def _topics(
    ctx: RequestContext,
    types: ModuleType,
    topic_type: str,
    partition_type: str,
    group_id: str,
    requested: list[tuple[str, int]] | None,
    require_stable: bool,
    member_error: ErrorCode = ErrorCode.none,
) -> tuple[ErrorCode, tuple[Any, ...]]:
    """The group's error and its offsets; when the coordinator cannot answer, each
    requested partition carries its error too (v1 has no other place for it). With
    require_stable (v7+), a partition whose offset an open transaction may still change
    answers UNSTABLE_OFFSET_COMMIT, as Kafka does, and the client retries."""
    groups = ctx.services.groups
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error, found = ErrorCode.group_authorization_failed, dict.fromkeys(requested or [])
    elif member_error:
        error, found = member_error, dict.fromkeys(requested or [])
    else:
        error, found = groups.fetch_offsets(group_id, requested)
        if error:
            found = dict.fromkeys(requested or [])
    # Topics the principal may not describe: an error where asked for, else left out.
    hidden = denied(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t for t, _ in found))
    if hidden and requested is None:
        found = {key: value for key, value in found.items() if key[0] not in hidden}
    unstable = groups.unstable_offsets(group_id, list(found)) if require_stable else set()
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), committed in found.items():
        if topic in hidden:
            committed, partition_error = None, ErrorCode.topic_authorization_failed
        elif (topic, index) in unstable:
            partition_error = ErrorCode.unstable_offset_commit
        else:
            partition_error = error
        by_topic.setdefault(topic, []).append(
            build(
                getattr(types, partition_type),
                partition_index=index,
                committed_offset=committed.offset if committed else -1,
                committed_leader_epoch=committed.leader_epoch if committed else -1,
                metadata=committed.metadata if committed else "",
                error_code=partition_error,
            )
        )
    return error, tuple(
        build(getattr(types, topic_type), name=topic, partitions=tuple(partitions))
        for topic, partitions in by_topic.items()
    )
