"""DescribeTopicPartitions (key 75), v0: topics and their partitions, a page at a time.

Kafka 3.8's replacement for Metadata in the admin client's describeTopics (KIP-966): the
answer holds at most `min(response_partition_limit, max.request.partition.size.limit)`
partitions, topics in name order, and a cursor naming the first topic and partition left
out; the client asks again from there. An empty topic list asks for every topic the
principal may describe (the others are left out, silently); a named topic the principal
may not describe is answered TOPIC_AUTHORIZATION_FAILED without its id, after the others,
whether or not it exists. Nothing is created: an unknown topic is UNKNOWN_TOPIC_OR_PARTITION
(INVALID_TOPIC_EXCEPTION for a name Kafka refuses). A cursor naming a topic the request
does not list is an invalid request. Partitions carry no error of their own: a leader
that is down or has no endpoint on the request's listener is given as -1, as Kafka's
KRaft metadata cache gives it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType as AclResource
from ..authorizer.checks import authorize, authorized_operations
from ..authorizer.operations import NOT_PROVIDED, AclOperation
from ..metadata.cache import TopicMetadata
from ..metadata.topics import validate_topic_name
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module
from .metadata import ZERO_UUID, LeaderReachability

log = logging.getLogger("brook.apis.describe_topic_partitions")


class TopicRequestView(Protocol):
    @property
    def name(self) -> str: ...


class CursorView(Protocol):
    @property
    def topic_name(self) -> str: ...

    @property
    def partition_index(self) -> int: ...


class DescribeTopicPartitionsRequestView(Protocol):
    @property
    def topics(self) -> Sequence[TopicRequestView]: ...

    @property
    def response_partition_limit(self) -> int: ...

    @property
    def cursor(self) -> CursorView | None: ...


if TYPE_CHECKING:
    from kio.schema.describe_topic_partitions import v0

    def _served_requests_are_views(
        r0: v0.DescribeTopicPartitionsRequest,
    ) -> list[DescribeTopicPartitionsRequestView]:
        return [r0]


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
def handle_describe_topic_partitions(
    ctx: RequestContext, request: DescribeTopicPartitionsRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    metadata = ctx.services.metadata
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not request.topics
    if every_topic:
        asked = {topic.name for topic in metadata.topics()}
    else:
        asked = {topic.name for topic in request.topics}
        if cursor is not None and cursor_topic not in asked:
            message = f"the topic list should contain the cursor topic: {cursor_topic}"
            log.info("DescribeTopicPartitions from %s refused: %s", ctx.who, message)
            return _answer(
                ctx,
                [_error_topic(types, name, ErrorCode.invalid_request) for name in sorted(asked)],
            )
    # A cursor pages on from its topic: topics before it in name order were answered.
    names = sorted(name for name in asked if name >= cursor_topic)
    authorized = [
        name for name in names if authorize(ctx, AclOperation.DESCRIBE, AclResource.TOPIC, name)
    ]
    allowed = set(authorized)
    refused = [] if every_topic else [name for name in names if name not in allowed]
    limit = min(
        request.response_partition_limit,
        int(ctx.services.config["max.request.partition.size.limit"]),
    )
    leaders = LeaderReachability(ctx.services, ctx.listener_name, version=0)
    topics: list[Any] = []
    next_cursor = None
    remaining = limit
    for name in authorized:
        if remaining <= 0:
            # The page is full at a topic boundary: the next one starts here.
            next_cursor = build(types.Cursor, topic_name=name, partition_index=0)
            break
        topic = metadata.get(name)
        if topic is None:
            if not every_topic:
                # Kafka gives the asker's operations on a name it may describe, known or not.
                error = _unknown_topic_error(name)
                topics.append(_error_topic(types, name, error, _operations(ctx, name)))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        # A cursor past the topic's last partition gives the topic without partitions.
        indexes = range(max(first, 0), min(len(topic.partitions), first + remaining))
        topics.append(_describe(ctx, types, topic, indexes, leaders))
        if indexes.stop < len(topic.partitions):
            next_cursor = build(types.Cursor, topic_name=name, partition_index=indexes.stop)
            break
        remaining -= len(indexes)
    topics.extend(
        _error_topic(types, name, ErrorCode.topic_authorization_failed) for name in refused
    )
    return _answer(ctx, topics, next_cursor)


def _answer(ctx: RequestContext, topics: list[Any], next_cursor: object = None) -> Any:
    return build(
        ctx.response_type, throttle_time=NO_THROTTLE, topics=tuple(topics), next_cursor=next_cursor
    )


def _unknown_topic_error(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except KafkaError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


def _error_topic(
    types: ModuleType, name: str, error: ErrorCode, operations: int = NOT_PROVIDED
) -> object:
    # No id: an unknown topic has none, and a refused one's is not disclosed.
    return build(
        types.DescribeTopicPartitionsResponseTopic,
        error_code=error,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=operations,
    )


def _describe(
    ctx: RequestContext,
    types: ModuleType,
    topic: TopicMetadata,
    indexes: range,
    leaders: LeaderReachability,
) -> object:
    partitions = []
    for index in indexes:
        registration = topic.partitions[index]
        local = ctx.services.replicas.hosted(topic.name, index)
        # As Metadata finds them; here an unreachable leader is -1, without an error.
        unreachable, offline = leaders.of_partition(registration, local)
        partitions.append(
            build(
                types.DescribeTopicPartitionsResponsePartition,
                error_code=ErrorCode.none,
                partition_index=index,
                leader_id=-1 if unreachable is not None else registration.leader,
                leader_epoch=registration.leader_epoch,
                replica_nodes=registration.replicas,
                isr_nodes=registration.isr,
                # Brook keeps no eligible leader replicas (KIP-966's ELR is off, as in a
                # Kafka cluster without the feature): both lists are empty.
                eligible_leader_replicas=(),
                last_known_elr=(),
                offline_replicas=offline,
            )
        )
    return build(
        types.DescribeTopicPartitionsResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=tuple(partitions),
        topic_authorized_operations=_operations(ctx, topic.name),
    )


def _operations(ctx: RequestContext, name: str) -> int:
    """The principal's operations on the topic, which Kafka always fills in here."""
    return authorized_operations(ctx, AclResource.TOPIC, name, asked=True)
