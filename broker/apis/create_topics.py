"""CreateTopics (key 19), v2-v7: partitions, replication factor, configs, validate_only.

Each topic succeeds or fails on its own with Kafka's error: TOPIC_ALREADY_EXISTS,
INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR (more replicas
than live brokers), INVALID_CONFIG, INVALID_REQUEST (a name twice in one request).
From v5 the response carries the topic's partitions, replication factor and configs.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import (
    ErrorCode,
    InvalidReplicaAssignmentError,
    InvalidRequestError,
    KafkaError,
)

from ..config_describe import ConfigDescriber
from ..config_values import config_to_string
from ..request_context import RequestContext
from ..topic_config import TOPIC_CONFIGS, effective_topic_config
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.create_topics")

ZERO_UUID = uuid.UUID(int=0)


@handles(ApiKey.CREATE_TOPICS)
def handle_create_topics(ctx: RequestContext, request: Any) -> Any:
    types = schema_module(ctx.response_type)
    names = [topic.name for topic in request.topics]
    results = []
    for topic in request.topics:
        try:
            if names.count(topic.name) > 1:
                raise InvalidRequestError(
                    f"Create topics request from client `{ctx.client_id}`"
                    f" contains multiple entries for topic {topic.name}."
                )
            results.append(_create(ctx, types, topic, request.validate_only))
        except KafkaError as exc:
            log.info("CreateTopics %s from %s failed: %s", topic.name, ctx.peer, exc.message)
            results.append(
                build(
                    types.CreatableTopicResult,
                    name=topic.name,
                    topic_id=ZERO_UUID,
                    error_code=exc.error_code,
                    error_message=exc.message,
                    num_partitions=-1,
                    replication_factor=-1,
                    configs=None,
                )
            )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=tuple(results))


def _create(ctx: RequestContext, types: Any, request_topic: Any, validate_only: bool) -> Any:
    topics = ctx.broker.topics
    num_partitions = request_topic.num_partitions
    replication_factor = request_topic.replication_factor
    if request_topic.assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise InvalidRequestError(
                "Both numPartitions or replicationFactor and"
                " replicasAssignments were set. Both cannot be used at the"
                " same time."
            )
        num_partitions = len(request_topic.assignments)
        replication_factor = len(request_topic.assignments[0].broker_ids)
        for assignment in request_topic.assignments:
            unknown = set(assignment.broker_ids) - {ctx.broker.broker_id}
            if unknown:
                raise InvalidReplicaAssignmentError(
                    f"Unknown broker ids {sorted(unknown)} in the replica assignment"
                )
    configs = {entry.name: entry.value for entry in request_topic.configs}
    num_partitions, replication_factor, parsed = topics.check_create(
        request_topic.name, num_partitions, replication_factor, configs
    )
    topic_id = ZERO_UUID
    if not validate_only:
        topic_id = topics.create(
            request_topic.name, num_partitions, replication_factor, configs
        ).topic_id
    effective = effective_topic_config(ctx.broker.config, parsed)
    describer = ConfigDescriber(ctx.broker.dynamic_config)
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
