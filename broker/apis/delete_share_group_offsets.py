"""DeleteShareGroupOffsets (key 92), v0: an empty share group forgets topics (their share
state is deleted by the share coordinators, and the group reads them from
share.auto.offset.reset again if it subscribes). A topic the group has no state of is
UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorized
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import build, handles, respond_later, schema_module
from .share_offsets import NO_TOPIC, offsets_response, topic_id_of


class DeleteShareGroupOffsetsTopicView(Protocol):
    @property
    def topic_name(self) -> str: ...


class DeleteShareGroupOffsetsRequestView(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[DeleteShareGroupOffsetsTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.delete_share_group_offsets import v0

    def _served_requests_are_views(
        r0: v0.DeleteShareGroupOffsetsRequest,
    ) -> list[DeleteShareGroupOffsetsRequestView]:
        return [r0]


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
def handle_delete_share_group_offsets(
    ctx: RequestContext, request: DeleteShareGroupOffsetsRequestView
) -> Any:
    return respond_later(_delete(ctx, request), lambda response: response)


async def _delete(ctx: RequestContext, request: DeleteShareGroupOffsetsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    group_id = request.group_id
    if not authorize(ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
        return offsets_response(ctx, ErrorCode.group_authorization_failed, None, ())
    names = [topic.topic_name for topic in request.topics]
    readable = set(authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names))
    results: dict[str, tuple[Any, ErrorCode, str | None]] = {}
    ids = {}
    for name in names:
        found = topic_id_of(ctx, name)
        if name not in readable:
            results[name] = (NO_TOPIC, ErrorCode.topic_authorization_failed, None)
        elif found is None:
            results[name] = (NO_TOPIC, ErrorCode.unknown_topic_or_partition, None)
        else:
            ids[name] = found[0]
    try:
        partitions = ctx.services.groups.share_offsets_to_delete(group_id, list(ids.values()))
    except KafkaError as exc:
        return offsets_response(ctx, exc.error_code, exc.message, ())
    persister = ctx.services.share_partitions.persister
    deleted = []
    for name, topic_id in ids.items():
        if topic_id not in partitions:
            results[name] = (
                topic_id,
                ErrorCode.unknown_topic_or_partition,
                "There is no offset information to delete.",
            )
            continue
        try:
            for index in sorted(partitions[topic_id]):
                await persister.delete_state(group_id, topic_id, index)
        except KafkaError as exc:
            results[name] = (topic_id, exc.error_code, exc.message)
            continue
        deleted.append(topic_id)
        results[name] = (topic_id, ErrorCode.none, None)
    if deleted:
        await ctx.services.groups.share_offsets_deleted(group_id, deleted)
    topics = tuple(
        build(
            types.DeleteShareGroupOffsetsResponseTopic,
            topic_name=name,
            topic_id=topic_id,
            error_code=error,
            error_message=message,
        )
        for name, (topic_id, error, message) in results.items()
    )
    return offsets_response(ctx, ErrorCode.none, None, topics)
