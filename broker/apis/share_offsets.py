"""What the share-group offsets APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets,
DeleteShareGroupOffsets) share: topics named by the admin client, looked up by name, and
the end of a partition's log for the lag, asked of its leader."""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.list_offsets.v7 import request as list_offsets7
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from brook.protocol.errors import ErrorCode

from ..replica.partition import ReplicaRole
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build

NO_TOPIC = uuid.UUID(int=0)
LATEST_TIMESTAMP = -1
CONSUMER_REPLICA_ID = -1


def topic_id_of(ctx: RequestContext, name: str) -> tuple[uuid.UUID, int] | None:
    """The topic's id and partition count, or None when there is no such topic."""
    topic = ctx.services.metadata.get(name)
    if topic is None:
        return None
    return topic.topic_id, len(topic.partitions)


async def high_watermark(ctx: RequestContext, topic: str, index: int) -> int | None:
    """The partition's high watermark as its leader has it (a ListOffsets of the latest
    offset when the leader is another broker), or None when it cannot be had."""
    partition = ctx.services.replicas.hosted(topic, index)
    if partition is not None and partition.role is ReplicaRole.LEADER:
        return partition.high_watermark
    found = ctx.services.metadata.get(topic)
    if found is None or index >= len(found.partitions) or found.partitions[index].leader < 0:
        return None
    try:
        response = await ctx.services.inter_broker.request(
            found.partitions[index].leader,
            list_offsets7.ListOffsetsRequest(
                replica_id=BrokerId(CONSUMER_REPLICA_ID),
                isolation_level=i8(0),
                topics=(
                    list_offsets7.ListOffsetsTopic(
                        name=TopicName(topic),
                        partitions=(
                            list_offsets7.ListOffsetsPartition(
                                partition_index=i32(index),
                                current_leader_epoch=i32(-1),
                                timestamp=i64(LATEST_TIMESTAMP),
                            ),
                        ),
                    ),
                ),
            ),
            timeout_s=10,
        )
    except Exception:
        return None
    answer = response.topics[0].partitions[0]
    return int(answer.offset) if answer.error_code == ErrorCode.none else None


def offsets_response(
    ctx: RequestContext, error: ErrorCode, message: str | None, topics: tuple[Any, ...]
) -> Any:
    """An AlterShareGroupOffsets or DeleteShareGroupOffsets response."""
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        responses=topics,
    )
