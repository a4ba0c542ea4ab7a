"""DescribeProducers (key 61), v0: the idempotent and transactional producers a partition
knows, as `kafka-transactions.sh describe-producers` lists them.

Per partition: producer id and epoch, last sequence, the timestamp of its last batch,
the epoch of the coordinator that wrote its last marker, and where its open transaction
starts (-1: none; -1 coordinator epoch until a marker was written). Like Kafka, any
replica answers, leader or follower. A partition this broker does not host answers
NOT_LEADER_OR_FOLLOWER when the topic and partition exist in the cluster and
UNKNOWN_TOPIC_OR_PARTITION otherwise; an offline log dir KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import (
    ErrorCode,
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)

from ..authorizer.acl import ResourceType
from ..authorizer.checks import denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.describe_producers")


class DescribeProducersTopicRequestView(Protocol):
    """A topic and the partitions asked for (Kafka's TopicRequest)."""

    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


class DescribeProducersRequestView(Protocol):
    """What the handler reads of a DescribeProducersRequest (v0, the one served)."""

    @property
    def topics(self) -> Sequence[DescribeProducersTopicRequestView]: ...


if TYPE_CHECKING:
    from kio.schema.describe_producers import v0

    def _served_requests_are_views(
        r0: v0.DescribeProducersRequest,
    ) -> list[DescribeProducersRequestView]:
        return [r0]


@handles(ApiKey.DESCRIBE_PRODUCERS)
def handle_describe_producers(ctx: RequestContext, request: DescribeProducersRequestView) -> Any:
    types = schema_module(ctx.response_type)
    topics = []
    unreadable = denied(
        ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in request.topics)
    )
    for topic in request.topics:
        partitions = tuple(
            build(
                types.PartitionResponse,
                partition_index=index,
                error_code=ErrorCode.topic_authorization_failed,
                active_producers=(),
            )
            if topic.name in unreadable
            else _describe(ctx, types, topic.name, index)
            for index in topic.partition_indexes
        )
        topics.append(build(types.TopicResponse, name=topic.name, partitions=partitions))
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _describe(ctx: RequestContext, types: ModuleType, topic: str, index: int) -> Any:
    try:
        producers = _hosted(ctx, topic, index).active_producers()
    except KafkaError as exc:
        log.info("DescribeProducers %s-%d from %s: %s", topic, index, ctx.who, exc.message)
        return build(
            types.PartitionResponse,
            partition_index=index,
            error_code=exc.error_code,  # without a message, as Kafka answers
            active_producers=(),
        )
    return build(
        types.PartitionResponse,
        partition_index=index,
        error_code=ErrorCode.none,
        active_producers=tuple(
            build(
                types.ProducerState,
                producer_id=entry.producer_id,
                producer_epoch=entry.producer_epoch,
                last_sequence=entry.last_sequence,
                last_timestamp=entry.last_timestamp,
                coordinator_epoch=entry.coordinator_epoch,
                current_txn_start_offset=(
                    -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
                ),
            )
            for entry in producers
        ),
    )


def _hosted(ctx: RequestContext, topic: str, index: int) -> Any:
    """The partition, or Kafka's error for one this broker does not host
    (ReplicaManager.getPartitionOrError)."""
    try:
        return ctx.services.replicas.partition(topic, index)
    except UnknownTopicOrPartitionError:
        known = ctx.services.metadata.get(topic)
        if known is not None and 0 <= index < len(known.partitions):
            raise NotLeaderOrFollowerError(
                f"Broker {ctx.services.broker_id} does not host {topic}-{index}"
            ) from None
        raise
