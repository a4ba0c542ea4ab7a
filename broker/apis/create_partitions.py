"""CreatePartitions (key 37), v0-v3: grow a topic's partition count."""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.create_partitions")


@handles(ApiKey.CREATE_PARTITIONS)
def handle_create_partitions(ctx: RequestContext, request: Any) -> Any:
    types = schema_module(ctx.response_type)
    names = [topic.name for topic in request.topics]
    results = []
    for topic in request.topics:
        error, message = ErrorCode.none, None
        try:
            if names.count(topic.name) > 1:
                error, message = ErrorCode.invalid_request, "Duplicate topic in request."
            elif topic.assignments and any(
                set(a.broker_ids) - {ctx.broker.broker_id} for a in topic.assignments
            ):
                error, message = (
                    ErrorCode.invalid_replica_assignment,
                    "Unknown broker id in the replica assignment",
                )
            else:
                ctx.broker.topics.add_partitions(
                    topic.name, topic.count, validate_only=request.validate_only
                )
        except KafkaError as exc:
            error, message = exc.error_code, exc.message
        if error is not ErrorCode.none:
            log.info("CreatePartitions %s from %s failed: %s", topic.name, ctx.peer, message)
        results.append(
            build(
                types.CreatePartitionsTopicResult,
                name=topic.name,
                error_code=error,
                error_message=message,
            )
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, results=tuple(results))
