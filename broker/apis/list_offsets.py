"""ListOffsets (key 2), v1-v8: earliest, latest, max timestamp, and offsets by time.

-2 is the log start offset, -1 the high watermark (the last stable offset under
read_committed), -3 (v7+) the record with the largest timestamp, -4 (v8) the earliest
local offset, which equals the log start without tiered storage. A timestamp T >= 0
returns the earliest offset whose record timestamp is >= T, found through the time
index; none, if every record is older.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import denied
from ..authorizer.operations import AclOperation
from ..replica.partition import FetchIsolation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module


class ListOffsetsPartitionView(Protocol):
    """A partition of a ListOffsetsRequest; its current leader epoch (v4+) is read where
    the version has it."""

    @property
    def partition_index(self) -> int: ...
    @property
    def timestamp(self) -> int: ...


class ListOffsetsTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[ListOffsetsPartitionView]: ...


class ListOffsetsRequestView(Protocol):
    """What the handler reads of a ListOffsetsRequest in every served version; the
    isolation level (v2+) is read where the version has it."""

    @property
    def replica_id(self) -> int: ...
    @property
    def topics(self) -> Sequence[ListOffsetsTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.list_offsets import v1, v2, v3, v4, v5, v6, v7, v8

    def _served_requests_are_views(
        r1: v1.ListOffsetsRequest,
        r2: v2.ListOffsetsRequest,
        r3: v3.ListOffsetsRequest,
        r4: v4.ListOffsetsRequest,
        r5: v5.ListOffsetsRequest,
        r6: v6.ListOffsetsRequest,
        r7: v7.ListOffsetsRequest,
        r8: v8.ListOffsetsRequest,
    ) -> list[ListOffsetsRequestView]:
        return [r1, r2, r3, r4, r5, r6, r7, r8]


@handles(ApiKey.LIST_OFFSETS)
def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequestView) -> Any:
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
    ctx: RequestContext, topic: str, entry: ListOffsetsPartitionView, isolation: FetchIsolation
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
