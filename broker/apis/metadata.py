"""Metadata (key 3), v0-v12: brokers, controller, cluster id, topics and partitions.

Asking for a topic that does not exist creates it when auto.create.topics.enable is on
and the request allows it (the flag exists from v4; older versions always allow it).
Kafka answers LEADER_NOT_AVAILABLE until the new topic has leaders; one broker creates
the topic at once, so the first answer already carries its leader. The broker's endpoint
is the one advertised for the listener the request came in on; so are those of the
other live brokers (the metadata cache's registrations), with their racks, and the
controller is the elected one (a single broker: itself).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorized_operations import NOT_PROVIDED, ResourceType, authorized_operations
from ..metadata.cache import PartitionRegistration, TopicMetadata
from ..partition import Partition
from ..request_context import RequestContext
from ..topics import validate_topic_name
from . import NO_THROTTLE, build, handles, schema_module

if TYPE_CHECKING:
    from ..services import BrokerServices

log = logging.getLogger("brook.apis.metadata")
ZERO_UUID = uuid.UUID(int=0)
# Kafka answers LISTENER_NOT_FOUND from Metadata v6 (older clients know only
# LEADER_NOT_AVAILABLE) for a leader without an endpoint on the request's listener.
FIRST_LISTENER_NOT_FOUND_VERSION = 6


@handles(ApiKey.METADATA)
def handle_metadata(ctx: RequestContext, request: object) -> object:
    services = ctx.services
    types = schema_module(ctx.response_type)
    version = ctx.api_version
    requested = request.topics  # type: ignore[attr-defined]
    metadata = services.metadata
    # Kafka's rule: every endpoint handed out is that of the listener the request came
    # in on; a listener this broker does not advertise leaves its partitions leaderless.
    endpoint = services.listeners.advertised_endpoint(ctx.listener_name)
    unreachable = None
    if endpoint is None:
        unreachable = (
            ErrorCode.listener_not_found
            if version >= FIRST_LISTENER_NOT_FOUND_VERSION
            else ErrorCode.leader_not_available
        )
    results = []
    if requested is None or (version == 0 and not requested):
        # All topics (v0 uses an empty list for "all").
        results = [
            _error_topic(types, topic.name, topic.topic_id, injected)
            if (injected := ctx.injected_error(topic.name)) is not None
            else _describe(services, types, topic, unreachable)
            for topic in metadata.topics()
        ]
    elif (refusal := _unsupported_lookup(requested, version)) is not None:
        # Kafka refuses the whole request: every topic gets INVALID_REQUEST (a null
        # name as "", which the response cannot hold), and no broker is listed.
        log.info("Metadata v%d from %s refused: %s", version, ctx.peer, refusal)
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            brokers=(),
            cluster_id=None,
            controller_id=-1,
            topics=tuple(
                _error_topic(
                    types, entry.name or "", entry.topic_id or ZERO_UUID, ErrorCode.invalid_request
                )
                for entry in requested
            ),
            cluster_authorized_operations=NOT_PROVIDED,
        )
    else:
        allow_auto_create = getattr(request, "allow_auto_topic_creation", True)
        for entry in requested:
            name = entry.name
            if name is None:
                topic = metadata.get_by_id(entry.topic_id)
                if topic is None:
                    results.append(
                        _error_topic(types, None, entry.topic_id, ErrorCode.unknown_topic_id)
                    )
                    continue
                name = topic.name
            else:
                # "" is a name too: INVALID_TOPIC_EXCEPTION below.
                topic = metadata.get(name)
            if (injected := ctx.injected_error(name)) is not None:
                topic_id = topic.topic_id if topic is not None else ZERO_UUID
                results.append(_error_topic(types, name, topic_id, injected))
                continue
            if topic is None:
                topic, error = _maybe_create(ctx, name, allow_auto_create)
                if topic is None:
                    results.append(_error_topic(types, name, ZERO_UUID, error))
                    continue
            results.append(_describe(services, types, topic, unreachable))
    # Every live broker with its endpoint on the request's listener; one without such
    # a listener is left out, as Kafka leaves it out.
    brokers = [
        build(
            types.MetadataResponseBroker,
            node_id=broker.broker_id,
            host=reachable.host,
            port=reachable.port,
            rack=broker.rack,
        )
        for broker, reachable in metadata.reachable_on(ctx.listener_name)
    ]
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        brokers=tuple(brokers),
        cluster_id=services.cluster_id,
        controller_id=services.membership.controller_id,
        topics=tuple(_with_operations(request, results)),
        # Asked for from v8 to v10 (DescribeCluster asks from Kafka 2.8 on).
        cluster_authorized_operations=authorized_operations(
            ResourceType.CLUSTER, getattr(request, "include_cluster_authorized_operations", False)
        ),
    )


def _with_operations(request: object, topics: list[object]) -> list[object]:
    """Each topic's authorized operations where the request (v8+) asks for them."""
    if not getattr(request, "include_topic_authorized_operations", False):
        return topics
    operations = authorized_operations(ResourceType.TOPIC, asked=True)
    return [replace(topic, topic_authorized_operations=operations) for topic in topics]


def _unsupported_lookup(requested: object, version: int) -> str | None:
    """Why a request names topics as its version cannot: v10 and v11 carry topic ids in
    the schema, but only v12 may look a topic up by id (or leave its name null)."""
    if version >= 12:
        return None
    for entry in requested:  # type: ignore[attr-defined]
        if entry.name is None:
            return f"Topic name can not be null for version {version}"
        if getattr(entry, "topic_id", None) not in (None, ZERO_UUID):
            return f"Topic IDs are not supported in requests for version {version}"
    return None


def _maybe_create(
    ctx: RequestContext, name: str, allow_auto_create: bool
) -> tuple[TopicMetadata | None, ErrorCode]:
    services = ctx.services
    try:
        validate_topic_name(name)
    except KafkaError:
        return None, ErrorCode.invalid_topic_exception
    if not (allow_auto_create and services.config["auto.create.topics.enable"]):
        return None, ErrorCode.unknown_topic_or_partition
    try:
        topic = services.controller.create(name)
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


def _describe(
    services: BrokerServices,
    types: object,
    topic: TopicMetadata,
    unreachable: ErrorCode | None = None,
) -> object:
    partitions = tuple(
        _describe_partition(
            types, index, registration, services.replicas.hosted(topic.name, index), unreachable
        )
        for index, registration in enumerate(topic.partitions)
    )
    return build(
        types.MetadataResponseTopic,
        error_code=ErrorCode.none,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=partitions,
        topic_authorized_operations=NOT_PROVIDED,
    )


def _describe_partition(
    types: object,
    index: int,
    registration: PartitionRegistration,
    local: Partition | None,
    unreachable: ErrorCode | None = None,
) -> object:
    if unreachable is not None:
        # The leader has no endpoint on the listener the request came in on.
        return build(
            types.MetadataResponsePartition,
            error_code=unreachable,
            partition_index=index,
            leader_id=-1,
            leader_epoch=registration.leader_epoch,
            replica_nodes=registration.replicas,
            isr_nodes=registration.isr,
            offline_replicas=(),
        )
    if local is not None and local.is_offline:
        # Its only replica sits in a failed log dir: no leader, as Kafka reports an
        # offline partition, with the replica listed as offline.
        return build(
            types.MetadataResponsePartition,
            error_code=ErrorCode.leader_not_available,
            partition_index=index,
            leader_id=-1,
            leader_epoch=registration.leader_epoch,
            replica_nodes=registration.replicas,
            isr_nodes=registration.isr,
            offline_replicas=registration.replicas,
        )
    return build(
        types.MetadataResponsePartition,
        error_code=ErrorCode.none,
        partition_index=index,
        leader_id=registration.leader,
        leader_epoch=registration.leader_epoch,
        replica_nodes=registration.replicas,
        isr_nodes=registration.isr,
        offline_replicas=(),
    )
