"""CreateTopics (key 19), v2-v7: partitions, replication factor, configs, validate_only.

Each topic succeeds or fails on its own with Kafka's error: TOPIC_ALREADY_EXISTS,
INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (more replicas
than live brokers), INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST (a name
twice in one request), KAFKA_STORAGE_ERROR (the logs could not be created; nothing of
the topic is kept), THROTTLING_QUOTA_EXCEEDED (v6+, the sender's controller mutation
quota spent). A request that would create more than 10,000 partitions in all is
refused whole, every topic with POLICY_VIOLATION, as Kafka's controller does.
From v5 the response carries the topic's partitions, replication factor and configs.
"""

from __future__ import annotations

import datetime
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import (
    ErrorCode,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
    TopicAuthorizationFailedError,
)

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize_cluster, denied
from ..authorizer.operations import AclOperation
from ..config.describe import ConfigDescriber
from ..config.topic_config import TOPIC_CONFIGS, effective_topic_config
from ..config.values import config_to_string
from ..metadata.topics import check_partitions_per_request, validate_manual_assignment
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.create_topics")

ZERO_UUID = uuid.UUID(int=0)


class CreatableReplicaAssignmentView(Protocol):
    @property
    def partition_index(self) -> int: ...
    @property
    def broker_ids(self) -> Sequence[int]: ...


class CreatableTopicConfigView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def value(self) -> str | None: ...


class CreatableTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def num_partitions(self) -> int: ...
    @property
    def replication_factor(self) -> int: ...
    @property
    def assignments(self) -> Sequence[CreatableReplicaAssignmentView]: ...
    @property
    def configs(self) -> Sequence[CreatableTopicConfigView]: ...


class CreateTopicsRequestView(Protocol):
    """What the handler reads of a CreateTopicsRequest (every served version has it)."""

    @property
    def topics(self) -> Sequence[CreatableTopicView]: ...
    @property
    def timeout(self) -> datetime.timedelta: ...
    @property
    def validate_only(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.create_topics import v2, v3, v4, v5, v6, v7

    def _served_requests_are_views(
        r2: v2.CreateTopicsRequest,
        r3: v3.CreateTopicsRequest,
        r4: v4.CreateTopicsRequest,
        r5: v5.CreateTopicsRequest,
        r6: v6.CreateTopicsRequest,
        r7: v7.CreateTopicsRequest,
    ) -> list[CreateTopicsRequestView]:
        return [r2, r3, r4, r5, r6, r7]


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    names = [topic.name for topic in request.topics]
    try:
        check_partitions_per_request(_partitions_asked(ctx, request.topics, names))
    except KafkaError as exc:
        log.warning(
            "CreateTopics from %s (client %r) refused: %s", ctx.peer, ctx.client_id, exc.message
        )
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            topics=tuple(_failed(types, topic.name, exc) for topic in request.topics),
        )
    results = []
    # Create on the cluster allows every topic; else Create on each topic is needed.
    refused = (
        frozenset()
        if authorize_cluster(ctx, AclOperation.CREATE, log_denial=False)
        else denied(ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    )
    for topic in request.topics:
        try:
            if topic.name in refused:
                raise TopicAuthorizationFailedError("Authorization failed.")
            if names.count(topic.name) > 1:
                raise InvalidRequestError(
                    f"Create topics request from client `{ctx.client_id}`"
                    f" contains multiple entries for topic {topic.name}."
                )
            results.append(
                await _create(ctx, types, topic, _timeout_ms(request), request.validate_only)
            )
        except KafkaError as exc:
            log.info("CreateTopics %s from %s failed: %s", topic.name, ctx.who, exc.message)
            results.append(_failed(types, topic.name, exc))
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=tuple(results))


def _partitions_asked(
    ctx: RequestContext, topics: Iterable[CreatableTopicView], names: list[str]
) -> int:
    """The partitions a request would create, counted as Kafka's controller counts them:
    the assignments if any, else the count (-1 is the default), once per distinct name
    (a name given twice is refused on its own)."""
    total = 0
    for topic in topics:
        if names.count(topic.name) > 1:
            continue
        if topic.assignments:
            total += len(topic.assignments)
        elif topic.num_partitions == -1:
            total += ctx.services.config["num.partitions"]
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


def _failed(types: ModuleType, name: str, exc: KafkaError) -> Any:
    return build(
        types.CreatableTopicResult,
        name=name,
        topic_id=ZERO_UUID,
        error_code=exc.error_code,
        error_message=exc.message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


def _check_assignments(
    request_topic: CreatableTopicView, registered: set[int]
) -> tuple[int, int, dict[int, list[int]]]:
    """Kafka's checks of a manual assignment; returns the partitions, the replication
    factor and the replicas of each partition."""
    if request_topic.replication_factor != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    if request_topic.num_partitions != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    replicas: dict[int, list[int]] = {}
    replication_factor = None
    for assignment in request_topic.assignments:
        if assignment.partition_index in replicas:
            raise InvalidReplicaAssignmentError(
                "Found multiple manual partition assignments for partition"
                f" {assignment.partition_index}"
            )
        broker_ids = list(assignment.broker_ids)
        validate_manual_assignment(broker_ids, replication_factor, registered)
        replication_factor = len(broker_ids)
        replicas[assignment.partition_index] = broker_ids
    if any(index not in replicas for index in range(len(replicas))):
        raise InvalidReplicaAssignmentError(
            "partitions should be a consecutive 0-based integer sequence"
        )
    assert replication_factor is not None
    return len(replicas), replication_factor, replicas


async def _create(
    ctx: RequestContext,
    types: ModuleType,
    request_topic: CreatableTopicView,
    timeout_ms: int,
    validate_only: bool,
) -> Any:
    controller = ctx.services.controller
    num_partitions = request_topic.num_partitions
    replication_factor = request_topic.replication_factor
    assignments = None
    if request_topic.assignments:
        num_partitions, replication_factor, assignments = _check_assignments(
            request_topic, controller.live_brokers
        )
    configs = {entry.name: entry.value for entry in request_topic.configs}
    num_partitions, replication_factor, parsed = controller.check_create(
        request_topic.name, num_partitions, replication_factor, configs
    )
    topic_id = ZERO_UUID
    if not validate_only:
        # Its partitions spent from the sender's controller_mutation_rate (KIP-599).
        if (quota := ctx.services.quotas.mutation_quota(ctx)) is not None:
            quota.record(num_partitions, time.monotonic() * 1000)
        topic_id = await controller.create_topic(
            request_topic.name, num_partitions, replication_factor, configs, assignments, timeout_ms
        )
    effective = effective_topic_config(ctx.services.config, parsed)
    describer = ConfigDescriber(ctx.services.dynamic_config)
    described = (
        tuple(
            build(
                types.CreatableTopicConfigs,
                name=name,
                value=config_to_string(value),
                read_only=False,
                config_source=describer.created_topic_source(name, parsed),
                is_sensitive=False,
            )
            for name, value in sorted(effective.items())
            if name in TOPIC_CONFIGS
        )
        if hasattr(types, "CreatableTopicConfigs")
        else None
    )
    return build(
        types.CreatableTopicResult,
        name=request_topic.name,
        topic_id=topic_id,
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=num_partitions,
        replication_factor=replication_factor,
        configs=described,
    )


def _timeout_ms(request: CreateTopicsRequestView) -> int:
    """How long the request waits for the cluster to show the change (0: not at all)."""
    return int(request.timeout.total_seconds() * 1000)
