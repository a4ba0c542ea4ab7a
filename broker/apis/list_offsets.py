"""ListOffsets (key 2), v1-v8: earliest, latest, max timestamp, and offsets by time.

-2 is the log start offset, -1 the high watermark (the last stable offset under
read_committed), -3 (v7+) the record with the largest timestamp, -4 (v8) the earliest
local offset, which equals the log start without tiered storage. A timestamp T >= 0
returns the earliest offset whose record timestamp is >= T, found through the time
index; none, if every record is older.
"""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import denied
from ..authorizer.operations import AclOperation
from ..replica.partition import FetchIsolation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module


@handles(ApiKey.LIST_OFFSETS)
def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    types = schema_module(ctx.response_type)
    isolation = FetchIsolation.of(request.replica_id, getattr(request, "isolation_level", 0))
    topics = []
    hidden = denied(
        ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        seen: set[int] = set()
        partitions = []
        for entry in topic.partitions:
            injected = ctx.injected_error(topic.name, entry.partition_index)
            if entry.partition_index in seen:
                error, timestamp, offset, epoch = ErrorCode.invalid_request, -1, -1, -1
            elif topic.name in hidden:
                error, timestamp, offset, epoch = ErrorCode.topic_authorization_failed, -1, -1, -1
            elif injected is not None:
                error, timestamp, offset, epoch = injected, -1, -1, -1
            else:
                error, timestamp, offset, epoch = _lookup(ctx, topic.name, entry, isolation)
            seen.add(entry.partition_index)
            partitions.append(
                build(
                    types.ListOffsetsPartitionResponse,
                    partition_index=entry.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                )
            )
        topics.append(
            build(types.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions))
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _lookup(
    ctx: RequestContext, topic: str, entry: Any, isolation: FetchIsolation
) -> tuple[ErrorCode, int, int, int]:
    try:
        partition = ctx.services.replicas.partition(topic, entry.partition_index)
        found = partition.fetch_offset_for_timestamp(
            entry.timestamp, isolation, getattr(entry, "current_leader_epoch", -1)
        )
    except KafkaError as exc:
        return exc.error_code, -1, -1, -1
    if found is None:
        return ErrorCode.none, -1, -1, -1
    epoch = found.leader_epoch if found.leader_epoch is not None else -1
    return ErrorCode.none, found.timestamp, found.offset, epoch
