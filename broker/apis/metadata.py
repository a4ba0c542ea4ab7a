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

import functools
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError, TopicExistsError

from ..authorizer.acl import CLUSTER_NAME
from ..authorizer.acl import ResourceType as AclResource
from ..authorizer.checks import authorize, authorize_cluster, authorized_operations, denied
from ..authorizer.operations import NOT_PROVIDED, AclOperation
from ..metadata.cache import PartitionRegistration, TopicMetadata
from ..metadata.topics import validate_topic_name
from ..replica.partition import Partition
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

if TYPE_CHECKING:
    from ..server.services import BrokerServices

log = logging.getLogger("brook.apis.metadata")
ZERO_UUID = uuid.UUID(int=0)
# Kafka answers LISTENER_NOT_FOUND from Metadata v6 (older clients know only
# LEADER_NOT_AVAILABLE) for a leader without an endpoint on the request's listener.
FIRST_LISTENER_NOT_FOUND_VERSION = 6


class MetadataRequestTopicView(Protocol):
    """A topic asked for, by name; the name is null (v10+) where the topic is asked for by
    its id, which is read where the version has it."""

    @property
    def name(self) -> str | None: ...


class MetadataRequestTopicFromV10View(MetadataRequestTopicView, Protocol):
    """v10+: a topic may be asked for by id (looked up from v12)."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...


class MetadataRequestView(Protocol):
    """What the handler reads of a MetadataRequest in every served version: the topics
    asked for, null (v1+) or empty (v0) for all; allow_auto_topic_creation (v4+) and the
    authorized operations flags (v8+) are read where the version has them."""

    @property
    def topics(self) -> Sequence[MetadataRequestTopicView] | None: ...


if TYPE_CHECKING:
    from kio.schema.metadata import v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12

    def _served_requests_are_views(
        r0: v0.MetadataRequest,
        r1: v1.MetadataRequest,
        r2: v2.MetadataRequest,
        r3: v3.MetadataRequest,
        r4: v4.MetadataRequest,
        r5: v5.MetadataRequest,
        r6: v6.MetadataRequest,
        r7: v7.MetadataRequest,
        r8: v8.MetadataRequest,
        r9: v9.MetadataRequest,
        r10: v10.MetadataRequest,
        r11: v11.MetadataRequest,
        r12: v12.MetadataRequest,
        t10: v10.request.MetadataRequestTopic,
        t11: v11.request.MetadataRequestTopic,
        t12: v12.request.MetadataRequestTopic,
    ) -> tuple[list[MetadataRequestView], list[MetadataRequestTopicFromV10View]]:
        return [r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12], [t10, t11, t12]


@handles(ApiKey.METADATA)
def handle_metadata(ctx: RequestContext, request: MetadataRequestView) -> object:
    services = ctx.services
    types = schema_module(ctx.response_type)
    version = ctx.api_version
    requested = request.topics
    metadata = services.metadata
    # Kafka's rule: every endpoint handed out is that of the listener the request came
    # in on; a leader without one leaves its partitions leaderless.
    leaders = LeaderReachability(services, ctx.listener_name, version)
    results = []
    if requested is None or (version == 0 and not requested):
        # All topics (v0 uses an empty list for "all").
        # Topics the principal may not describe are left out, silently (Kafka's rule).
        hidden = denied(
            ctx, AclOperation.DESCRIBE, AclResource.TOPIC, (t.name for t in metadata.topics())
        )
        results = [
            _error_topic(types, topic.name, topic.topic_id, injected)
            if (injected := ctx.injected_error(topic.name)) is not None
            else _describe(services, types, topic, leaders)
            for topic in metadata.topics()
            if topic.name not in hidden
        ]
    elif (refusal := _unsupported_lookup(requested, version)) is not None:
        # Kafka refuses the whole request: every topic gets INVALID_REQUEST (a null
        # name as "", which the response cannot hold), and no broker is listed.
        log.info("Metadata v%d from %s refused: %s", version, ctx.who, refusal)
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            brokers=(),
            cluster_id=None,
            controller_id=-1,
            topics=tuple(
                _error_topic(
                    types,
                    entry.name or "",
                    # Refused for a null name or a topic id: v10+, where the id is.
                    cast(MetadataRequestTopicFromV10View, entry).topic_id or ZERO_UUID,
                    ErrorCode.invalid_request,
                )
                for entry in requested
            ),
            cluster_authorized_operations=NOT_PROVIDED,
        )
    else:
        allow_auto_create = getattr(request, "allow_auto_topic_creation", True)
        asked: set[object] = set()
        for entry in requested:
            name = entry.name
            # Asked for by id (v12): a null name, or any name beside a topic id, as Kafka
            # reads it (the Java consumer of KIP-848 sends "" with the id).
            asked_id = getattr(entry, "topic_id", None) if version >= 12 else None
            by_id = name is None or asked_id not in (None, ZERO_UUID)
            # Kafka answers each topic once, however often it is asked for.
            key = ("id", getattr(entry, "topic_id", None)) if by_id else ("name", name)
            if key in asked:
                continue
            asked.add(key)
            if by_id:
                topic_id = cast(MetadataRequestTopicFromV10View, entry).topic_id
                # (kio reads the zero id as None, which no topic has.)
                topic = metadata.get_by_id(topic_id) if topic_id is not None else None
                if topic is None:
                    results.append(_error_topic(types, None, topic_id, ErrorCode.unknown_topic_id))
                    continue
                name = topic.name
            else:
                # "" is a name too: INVALID_TOPIC_EXCEPTION below.
                assert name is not None
                topic = metadata.get(name)
            if not authorize(ctx, AclOperation.DESCRIBE, AclResource.TOPIC, name):
                # Whether it exists is not disclosed (nor its name, asked by id).
                shown = None if by_id else name
                error = ErrorCode.topic_authorization_failed
                results.append(_error_topic(types, shown, ZERO_UUID, error))
                continue
            if (injected := ctx.injected_error(name)) is not None:
                topic_id = topic.topic_id if topic is not None else ZERO_UUID
                results.append(_error_topic(types, name, topic_id, injected))
                continue
            if topic is None:
                topic, error = _maybe_create(ctx, name, allow_auto_create)
                if topic is None:
                    results.append(_error_topic(types, name, ZERO_UUID, error))
                    continue
            results.append(_describe(services, types, topic, leaders))
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
        topics=tuple(_with_operations(ctx, request, results)),
        # Asked for from v8 to v10 (DescribeCluster asks from Kafka 2.8 on).
        cluster_authorized_operations=authorized_operations(
            ctx,
            AclResource.CLUSTER,
            CLUSTER_NAME,
            getattr(request, "include_cluster_authorized_operations", False),
        ),
    )


def _with_operations(ctx: RequestContext, request: object, topics: list[Any]) -> list[Any]:
    """Each topic's authorized operations where the request (v8+) asks for them."""
    if not getattr(request, "include_topic_authorized_operations", False):
        return topics
    return [
        replace(
            topic,
            topic_authorized_operations=authorized_operations(
                ctx, AclResource.TOPIC, topic.name or "", asked=True
            ),
        )
        for topic in topics
    ]


def _unsupported_lookup(requested: Iterable[MetadataRequestTopicView], version: int) -> str | None:
    """Why a request names topics as its version cannot: v10 and v11 carry topic ids in
    the schema, but only v12 may look a topic up by id (or leave its name null)."""
    if version >= 12:
        return None
    for entry in requested:
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
    if not authorize_cluster(ctx, AclOperation.CREATE, log_denial=False) and not authorize(
        ctx, AclOperation.CREATE, AclResource.TOPIC, name
    ):
        return None, ErrorCode.topic_authorization_failed
    try:
        topic = services.controller.auto_create(name)
    except TopicExistsError:
        # Being created by a CreateTopics still making its logs: there a moment later.
        # Kafka answers a topic it has only just created the same way.
        return None, ErrorCode.leader_not_available
    except KafkaError as exc:
        log.info("Auto-creation of %s for %s failed: %s", name, ctx.who, exc.message)
        return None, exc.error_code
    return topic, ErrorCode.none


def _error_topic(
    types: ModuleType, name: str | None, topic_id: uuid.UUID | None, error: ErrorCode
) -> object:
    return build(
        types.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
    )


class LeaderReachability:
    """Which partitions' leaders a client of this request can reach: a leader that is
    not alive leaves its partition LEADER_NOT_AVAILABLE, one alive without an endpoint
    on the request's listener LISTENER_NOT_FOUND (from v6; LEADER_NOT_AVAILABLE before);
    replicas whose brokers are not alive are offline (Kafka's MetadataCache)."""

    def __init__(self, services: BrokerServices, listener_name: str, version: int) -> None:
        self._services = services
        self._listener_name = listener_name
        self._no_listener = (
            ErrorCode.listener_not_found
            if version >= FIRST_LISTENER_NOT_FOUND_VERSION
            else ErrorCode.leader_not_available
        )
        # Per request, by broker id: a Metadata of thousands of partitions names the same
        # few brokers over and over.
        self._alive: dict[int, bool] = {}
        self._errors: dict[int, ErrorCode | None] = {}

    def alive(self, broker_id: int) -> bool:
        known = self._alive.get(broker_id)
        if known is None:
            services = self._services
            known = self._alive[broker_id] = (
                broker_id == services.broker_id or services.metadata.broker(broker_id) is not None
            )
        return known

    def error(self, leader: int) -> ErrorCode | None:
        if leader in self._errors:
            return self._errors[leader]
        error = self._errors[leader] = self._error(leader)
        return error

    def _error(self, leader: int) -> ErrorCode | None:
        services = self._services
        if leader < 0 or not self.alive(leader):
            return ErrorCode.leader_not_available
        if services.replicas.fenced:
            # Cut off from ZooKeeper, this broker's view of the leaders may be stale (another
            # may lead by now): it names none, so that clients ask another broker.
            return ErrorCode.leader_not_available
        if leader == services.broker_id:
            reachable = services.listeners.advertised_endpoint(self._listener_name) is not None
        else:
            reachable = services.metadata.endpoint(leader, self._listener_name) is not None
        return None if reachable else self._no_listener

    def of_partition(
        self, registration: PartitionRegistration, local: Partition | None
    ) -> tuple[ErrorCode | None, tuple[int, ...]]:
        """Why the partition's leader cannot be reached (None when it can), and its
        offline replicas: those on brokers not alive, and this broker's own when its
        replica sits in a failed log dir (then, when it leads, the partition has no
        leader: Kafka reports an offline partition so)."""
        offline = tuple(broker for broker in registration.replicas if not self.alive(broker))
        error = self.error(registration.leader)
        if local is not None and local.is_offline:
            offline = (*offline, local.local_broker_id)
            if registration.leader == local.local_broker_id:
                error = ErrorCode.leader_not_available
        return error, offline


def _describe(
    services: BrokerServices,
    types: ModuleType,
    topic: TopicMetadata,
    leaders: LeaderReachability,
) -> object:
    make = _partition_maker(types.MetadataResponsePartition)
    hosted = services.replicas.hosted
    partitions = tuple(
        _describe_partition(make, index, registration, hosted(topic.name, index), leaders)
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


PartitionMaker = Callable[
    [ErrorCode, int, int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]], object
]


@functools.cache
def _partition_maker(entity_type: type) -> PartitionMaker:
    """The version's MetadataResponsePartition from its fields, those the version has
    (leader_epoch from v7, offline_replicas from v5): the generic `build` checks the names
    of each one, 10,000 times for a Metadata of 10,000 partitions."""
    known = entity_type.__dataclass_fields__  # type: ignore[attr-defined]
    with_epoch = "leader_epoch" in known
    with_offline = "offline_replicas" in known

    def make(
        error_code: ErrorCode,
        index: int,
        leader_id: int,
        leader_epoch: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        offline: tuple[int, ...],
    ) -> object:
        fields: dict[str, Any] = {
            "error_code": error_code,
            "partition_index": index,
            "leader_id": leader_id,
            "replica_nodes": replicas,
            "isr_nodes": isr,
        }
        if with_epoch:
            fields["leader_epoch"] = leader_epoch
        if with_offline:
            fields["offline_replicas"] = offline
        return entity_type(**fields)

    return make


def _describe_partition(
    make: PartitionMaker,
    index: int,
    registration: PartitionRegistration,
    local: Partition | None,
    leaders: LeaderReachability,
) -> object:
    error, offline = leaders.of_partition(registration, local)
    return make(
        error or ErrorCode.none,
        index,
        -1 if error is not None else registration.leader,
        registration.leader_epoch,
        registration.replicas,
        registration.isr,
        offline,
    )
