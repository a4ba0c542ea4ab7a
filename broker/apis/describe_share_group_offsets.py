"""DescribeShareGroupOffsets (key 90), v0-v1: each share group's start offset per
partition (the first record not yet done) and, v1, its lag: the records past it not yet
acknowledged (the high watermark, less the start offset, less those done beyond it,
KIP-1226). Topics null: every partition the group reads; a topic unknown to the group or
to the cluster answers start offset -1. As Kafka, the share coordinator's errors are not
passed on: the offset is -1."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorized
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond_later, schema_module
from .share_offsets import NO_TOPIC, high_watermark, topic_id_of


class DescribeShareGroupOffsetsTopicView(Protocol):
    @property
    def topic_name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class DescribeShareGroupOffsetsGroupView(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[DescribeShareGroupOffsetsTopicView] | None: ...


class DescribeShareGroupOffsetsRequestView(Protocol):
    @property
    def groups(self) -> Sequence[DescribeShareGroupOffsetsGroupView]: ...


if TYPE_CHECKING:
    from kio.schema.describe_share_group_offsets import v0, v1

    def _served_requests_are_views(
        r0: v0.DescribeShareGroupOffsetsRequest, r1: v1.DescribeShareGroupOffsetsRequest
    ) -> list[DescribeShareGroupOffsetsRequestView]:
        return [r0, r1]


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
def handle_describe_share_group_offsets(
    ctx: RequestContext, request: DescribeShareGroupOffsetsRequestView
) -> Any:
    return respond_later(_describe(ctx, request), lambda response: response)


async def _describe(ctx: RequestContext, request: DescribeShareGroupOffsetsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    groups = []
    for group in request.groups:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
            groups.append(_group(types, group.group_id, (), ErrorCode.group_authorization_failed))
            continue
        wanted = _wanted(ctx, group)
        readable = set(authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, wanted))
        topics = []
        for name, partitions in wanted.items():
            if name not in readable:
                topics.append(
                    _topic(types, name, NO_TOPIC, partitions, ErrorCode.topic_authorization_failed)
                )
                continue
            found = topic_id_of(ctx, name)
            if found is None:
                topics.append(_topic(types, name, NO_TOPIC, partitions, ErrorCode.none))
                continue
            topic_id, count = found
            rows = [
                await _partition(ctx, types, group.group_id, name, topic_id, index, count)
                for index in partitions
            ]
            topics.append(
                build(
                    types.DescribeShareGroupOffsetsResponseTopic,
                    topic_name=name,
                    topic_id=topic_id,
                    partitions=tuple(rows),
                )
            )
        groups.append(_group(types, group.group_id, tuple(topics), ErrorCode.none))
    return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=tuple(groups))


def _wanted(ctx: RequestContext, group: DescribeShareGroupOffsetsGroupView) -> dict[str, list[int]]:
    """The topics' partitions asked for, or (topics null) those the group reads."""
    if group.topics is not None:
        return {topic.topic_name: list(topic.partitions) for topic in group.topics}
    _, found = ctx.services.groups.share_group_describe(group.group_id)
    wanted: dict[str, list[int]] = {}
    if found is None:
        return wanted
    for topic_id, partitions in found.state_partitions.initialized.items():
        topic = ctx.services.metadata.get_by_id(topic_id)
        if topic is not None:
            wanted[topic.name] = sorted(partitions)
    return dict(sorted(wanted.items()))


async def _partition(
    ctx: RequestContext,
    types: Any,
    group_id: str,
    name: str,
    topic_id: uuid.UUID,
    index: int,
    count: int,
) -> Any:
    start, leader_epoch, lag = -1, 0, -1
    if 0 <= index < count:
        try:
            summary = await ctx.services.share_partitions.persister.read_summary(
                group_id, topic_id, index
            )
        except KafkaError:
            summary = None
        if summary is not None:
            start, leader_epoch = summary.start_offset, summary.leader_epoch
            if start >= 0 and summary.delivery_complete_count >= 0:
                end = await high_watermark(ctx, name, index)
                if end is not None:
                    lag = max(end - start - summary.delivery_complete_count, 0)
    return build(
        types.DescribeShareGroupOffsetsResponsePartition,
        partition_index=index,
        start_offset=start,
        leader_epoch=leader_epoch,
        lag=lag,
        error_code=ErrorCode.none,
        error_message=None,
    )


def _topic(
    types: Any, name: str, topic_id: uuid.UUID, partitions: list[int], error: ErrorCode
) -> Any:
    return build(
        types.DescribeShareGroupOffsetsResponseTopic,
        topic_name=name,
        topic_id=topic_id,
        partitions=tuple(
            build(
                types.DescribeShareGroupOffsetsResponsePartition,
                partition_index=index,
                start_offset=-1,
                leader_epoch=0,
                lag=-1,
                error_code=error,
                error_message=None,
            )
            for index in partitions
        ),
    )


def _group(types: Any, group_id: str, topics: tuple[Any, ...], error: ErrorCode) -> Any:
    return build(
        types.DescribeShareGroupOffsetsResponseGroup,
        group_id=group_id,
        topics=topics,
        error_code=error,
        error_message=None,
    )
