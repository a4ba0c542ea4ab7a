"""AlterShareGroupOffsets (key 91), v0: set where an empty share group starts reading
partitions (kafka-share-groups.sh --reset-offsets). The group coordinator marks them as
read by the group (a missing group is made), then each gets a new state at that start
offset from its share coordinator, fencing what a share partition had read before. A
group with members is NON_EMPTY_GROUP."""

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


class AlterShareGroupOffsetsPartitionView(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def start_offset(self) -> int: ...


class AlterShareGroupOffsetsTopicView(Protocol):
    @property
    def topic_name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[AlterShareGroupOffsetsPartitionView]: ...


class AlterShareGroupOffsetsRequestView(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def topics(self) -> Sequence[AlterShareGroupOffsetsTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.alter_share_group_offsets import v0

    def _served_requests_are_views(
        r0: v0.AlterShareGroupOffsetsRequest,
    ) -> list[AlterShareGroupOffsetsRequestView]:
        return [r0]


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
def handle_alter_share_group_offsets(
    ctx: RequestContext, request: AlterShareGroupOffsetsRequestView
) -> Any:
    return respond_later(_alter(ctx, request), lambda response: response)


async def _alter(ctx: RequestContext, request: AlterShareGroupOffsetsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    group_id = request.group_id
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return offsets_response(ctx, ErrorCode.group_authorization_failed, None, ())
    if not group_id:
        return offsets_response(ctx, ErrorCode.invalid_group_id, None, ())
    names = [topic.topic_name for topic in request.topics]
    readable = set(authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names))
    results: dict[str, dict[int, tuple[ErrorCode, str | None]]] = {}
    ids: dict[str, Any] = {}
    wanted: dict[Any, dict[int, int]] = {}
    for topic in request.topics:
        name = topic.topic_name
        results[name] = {}
        found = topic_id_of(ctx, name) if name in readable else None
        ids[name] = found[0] if found is not None else NO_TOPIC
        for partition in topic.partitions:
            index = partition.partition_index
            if name not in readable:
                results[name][index] = (ErrorCode.topic_authorization_failed, None)
            elif found is None or not 0 <= index < found[1]:
                results[name][index] = (ErrorCode.unknown_topic_or_partition, None)
            else:
                wanted.setdefault(found[0], {})[index] = partition.start_offset
    if wanted:
        try:
            state_epoch = await ctx.services.groups.alter_share_group_offsets(
                group_id, {t: frozenset(p) for t, p in wanted.items()}
            )
        except KafkaError as exc:
            return offsets_response(ctx, exc.error_code, exc.message, ())
        persister = ctx.services.share_partitions.persister
        for name, topic_id in ids.items():
            for index, start in wanted.get(topic_id, {}).items():
                try:
                    await persister.initialize_state(group_id, topic_id, index, state_epoch, start)
                    results[name][index] = (ErrorCode.none, None)
                except KafkaError as exc:
                    results[name][index] = (exc.error_code, exc.message)
    topics = tuple(
        build(
            types.AlterShareGroupOffsetsResponseTopic,
            topic_name=name,
            topic_id=ids[name],
            partitions=tuple(
                build(
                    types.AlterShareGroupOffsetsResponsePartition,
                    partition_index=index,
                    error_code=error,
                    error_message=message,
                )
                for index, (error, message) in partitions.items()
            ),
        )
        for name, partitions in results.items()
    )
    return offsets_response(ctx, ErrorCode.none, None, topics)
