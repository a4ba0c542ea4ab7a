"""Metadata (key 3), v0-v12: brokers, controller, cluster id, topics and partitions.

Asking for a topic that does not exist creates it when auto.create.topics.enable is on
and the request allows it (the flag exists from v4; older versions always allow it).
Kafka answers LEADER_NOT_AVAILABLE until the new topic has leaders; one broker creates
the topic at once, so the first answer already carries its leader.
"""

from __future__ import annotations

import logging
import uuid

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..partition import Partition
from ..request_context import RequestContext
from ..topics import Topic, validate_topic_name
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.metadata")
ZERO_UUID = uuid.UUID(int=0)


@handles(ApiKey.METADATA)
def handle_metadata(ctx: RequestContext, request: object) -> object:
    broker = ctx.broker
    types = schema_module(ctx.response_type)
    version = ctx.api_version
    requested = request.topics  # type: ignore[attr-defined]
    topics = broker.topics
    results = []
    if requested is None or (version == 0 and not requested):
        # All topics (v0 uses an empty list for "all").
        results = [_describe(types, topic, version) for topic in topics.topics.values()]
    else:
        allow_auto_create = getattr(request, "allow_auto_topic_creation", True)
        for entry in requested:
            name = entry.name
            if name is None:
                topic = topics.by_id.get(entry.topic_id)
                if topic is None:
                    results.append(
                        _error_topic(types, None, entry.topic_id, ErrorCode.unknown_topic_id)
                    )
                    continue
            else:
                topic = topics.get(name)
            if topic is None:
                topic, error = _maybe_create(ctx, name, allow_auto_create)
                if topic is None:
                    results.append(_error_topic(types, name, ZERO_UUID, error))
                    continue
            results.append(_describe(types, topic, version))
    brokers = [
        build(
            types.MetadataResponseBroker,
            node_id=broker.broker_id,
            host=listener.host,
            port=listener.port,
            rack=None,
        )
        for listener in broker.advertised[:1]
    ]
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        brokers=tuple(brokers),
        cluster_id=broker.cluster_id,
        controller_id=broker.broker_id,
        topics=tuple(results),
        cluster_authorized_operations=-2147483648,
    )


def _maybe_create(
    ctx: RequestContext, name: str, allow_auto_create: bool
) -> tuple[Topic | None, ErrorCode]:
    broker = ctx.broker
    try:
        validate_topic_name(name)
    except KafkaError:
        return None, ErrorCode.invalid_topic_exception
    if not (allow_auto_create and broker.config["auto.create.topics.enable"]):
        return None, ErrorCode.unknown_topic_or_partition
    try:
        topic = broker.topics.create(name)
    except KafkaError as exc:
        log.info("Auto-creation of %s for %s failed: %s", name, ctx.peer, exc.message)
        return None, exc.error_code
    return topic, ErrorCode.none


def _error_topic(types: object, name: str | None, topic_id: uuid.UUID, error: ErrorCode) -> object:
    return build(
        types.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
    )


def _describe(types: object, topic: Topic, version: int) -> object:
    partitions = tuple(_describe_partition(types, partition) for partition in topic.partitions)
    return build(
        types.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
        topic_authorized_operations=-2147483648,
    )


def _describe_partition(types: object, partition: Partition) -> object:
    if partition.is_offline:
        # Its only replica sits in a failed log dir: no leader, as Kafka reports an
        # offline partition, with the replica listed as offline.
        return build(
            types.MetadataResponsePartition,
            error_code=ErrorCode.leader_not_available,
            partition_index=partition.index,
            leader_id=-1,
            leader_epoch=partition.leader_epoch,
            replica_nodes=tuple(partition.replicas),
            isr_nodes=tuple(partition.isr),
            offline_replicas=tuple(partition.replicas),
        )
    return build(
        types.MetadataResponsePartition,
        error_code=ErrorCode.none,
        partition_index=partition.index,
        leader_id=partition.leader_id,
        leader_epoch=partition.leader_epoch,
        replica_nodes=tuple(partition.replicas),
        isr_nodes=tuple(partition.isr),
        offline_replicas=(),
    )
