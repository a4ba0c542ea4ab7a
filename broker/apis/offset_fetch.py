"""OffsetFetch (key 9), v1-v9: a group's committed positions; several groups from v8.

A partition without a commit answers offset -1. `topics` null (v2+) asks for every
partition the group has committed.
"""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module


@handles(ApiKey.OFFSET_FETCH)
async def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    # Offsets answer only once their commits are (Kafka reads the committed snapshot).
    group_ids = (
        [group.group_id for group in request.groups] if ctx.api_version >= 8 else [request.group_id]
    )
    for group_id in group_ids:
        await ctx.services.groups.writes_committed(group_id)
    types = schema_module(ctx.response_type)
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error, topics = _topics(
                ctx,
                types,
                "OffsetFetchResponseTopics",
                "OffsetFetchResponsePartitions",
                group.group_id,
                _requested(group.topics, "partition_indexes"),
                request.require_stable,
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
    error, topics = _topics(
        ctx,
        types,
        "OffsetFetchResponseTopic",
        "OffsetFetchResponsePartition",
        request.group_id,
        _requested(request.topics, "partition_indexes"),
        getattr(request, "require_stable", False),  # v7+
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=topics, error_code=error)


def _requested(topics: Any, field: str) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(topic.name, index) for topic in topics for index in getattr(topic, field)]


def _topics(
    ctx: RequestContext,
    types: Any,
    topic_type: str,
    partition_type: str,
    group_id: str,
    requested: list[tuple[str, int]] | None,
    require_stable: bool,
) -> tuple[ErrorCode, tuple[Any, ...]]:
    """The group's error and its offsets; when the coordinator cannot answer, each
    requested partition carries its error too (v1 has no other place for it). With
    require_stable (v7+), a partition whose offset an open transaction may still change
    answers UNSTABLE_OFFSET_COMMIT, as Kafka does, and the client retries."""
    groups = ctx.services.groups
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        error, found = ErrorCode.group_authorization_failed, dict.fromkeys(requested or [])
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
