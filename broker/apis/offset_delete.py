"""OffsetDelete (key 47), v0: delete a group's committed offsets for some partitions.

Refused with GROUP_SUBSCRIBED_TO_TOPIC for topics the group's live members still
subscribe to, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond, schema_module


class OffsetDeleteRequestPartitionView(Protocol):
    @property
    def partition_index(self) -> int: ...


class OffsetDeleteRequestTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[OffsetDeleteRequestPartitionView]: ...


class OffsetDeleteRequestView(Protocol):
    """What the handler reads of an OffsetDeleteRequest (v0, the one served)."""

    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[OffsetDeleteRequestTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.offset_delete import v0

    def _served_requests_are_views(r0: v0.OffsetDeleteRequest) -> list[OffsetDeleteRequestView]:
        return [r0]


@handles(ApiKey.OFFSET_DELETE)
def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequestView) -> Any:
    wanted = [(topic.name, p.partition_index) for topic in request.topics for p in topic.partitions]
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return _response(ctx, request, ErrorCode.group_authorization_failed, {})
    unreadable = denied(ctx, AclOperation.READ, ResourceType.TOPIC, (t for t, _ in wanted))
    refused = {key: ErrorCode.topic_authorization_failed for key in wanted if key[0] in unreadable}
    answer = ctx.services.groups.delete_offsets(
        request.group_id, [key for key in wanted if key not in refused]
    )
    return respond(
        answer, lambda answered: _response(ctx, request, answered[0], {**answered[1], **refused})
    )


def _response(
    ctx: RequestContext,
    request: OffsetDeleteRequestView,
    error: ErrorCode,
    errors: dict[tuple[str, int], ErrorCode],
) -> Any:
    types = schema_module(ctx.response_type)
    topics = (
        tuple(
            build(
                types.OffsetDeleteResponseTopic,
                name=topic.name,
                partitions=tuple(
                    build(
                        types.OffsetDeleteResponsePartition,
                        partition_index=p.partition_index,
                        error_code=errors.get((topic.name, p.partition_index), ErrorCode.none),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
        if not error
        else ()
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, error_code=error, topics=topics)
