"""OffsetForLeaderEpoch (key 23), v2-v4: where a leader epoch ends in this log.

Consumers (KIP-320) and followers ask it to check that their position is still on
the leader's history after a leader change; the answer comes from the
leader-epoch-checkpoint cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize_cluster, denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module


class OffsetForLeaderPartitionView(Protocol):
    @property
    def partition(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...
    @property
    def leader_epoch(self) -> int: ...


class OffsetForLeaderTopicView(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[OffsetForLeaderPartitionView]: ...


class OffsetForLeaderEpochRequestView(Protocol):
    """What the handler reads of an OffsetForLeaderEpochRequest (every served version has
    it)."""

    @property
    def topics(self) -> Sequence[OffsetForLeaderTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.offset_for_leader_epoch import v2, v3, v4

    def _served_requests_are_views(
        r2: v2.OffsetForLeaderEpochRequest,
        r3: v3.OffsetForLeaderEpochRequest,
        r4: v4.OffsetForLeaderEpochRequest,
    ) -> list[OffsetForLeaderEpochRequestView]:
        return [r2, r3, r4]


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    topics = []
    # ClusterAction (a follower) may ask of every topic; others need Describe on each.
    hidden = (
        frozenset()
        if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_denial=False)
        else denied(
            ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in request.topics)
        )
    )
    for topic in request.topics:
        partitions = []
        for entry in topic.partitions:
            if topic.topic in hidden:
                error, epoch, end_offset = ErrorCode.topic_authorization_failed, -1, -1
            else:
                error, epoch, end_offset = _end_offset(ctx, topic.topic, entry)
            partitions.append(
                build(
                    types.EpochEndOffset,
                    error_code=error,
                    partition=entry.partition,
                    leader_epoch=epoch,
                    end_offset=end_offset,
                )
            )
        topics.append(
            build(types.OffsetForLeaderTopicResult, topic=topic.topic, partitions=tuple(partitions))
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _end_offset(
    ctx: RequestContext, topic: str, entry: OffsetForLeaderPartitionView
) -> tuple[ErrorCode, int, int]:
    try:
        partition = ctx.services.replicas.partition(topic, entry.partition)
        epoch, end_offset = partition.last_offset_for_leader_epoch(
            entry.current_leader_epoch, entry.leader_epoch
        )
    except KafkaError as exc:
        return exc.error_code, -1, -1
    return ErrorCode.none, epoch, end_offset
