"""DeleteRecords (key 21), v0-v2: move a partition's log start offset forward.

Records below the new log start can no longer be fetched (OFFSET_OUT_OF_RANGE, and
consumers reset per auto.offset.reset); segments wholly below it are deleted. Offset
-1 means the high watermark; an offset beyond it is OFFSET_OUT_OF_RANGE.
"""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.delete_records")


@handles(ApiKey.DELETE_RECORDS)
def handle_delete_records(ctx: RequestContext, request: Any) -> Any:
    types = schema_module(ctx.response_type)
    topics = []
    for topic in request.topics:
        partitions = []
        for entry in topic.partitions:
            error, low_watermark = _delete_below(
                ctx, topic.name, entry.partition_index, entry.offset
            )
            partitions.append(
                build(
                    types.DeleteRecordsPartitionResult,
                    partition_index=entry.partition_index,
                    low_watermark=low_watermark,
                    error_code=error,
                )
            )
        topics.append(
            build(types.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions))
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _delete_below(
    ctx: RequestContext, topic: str, index: int, offset: int
) -> tuple[ErrorCode, int]:
    try:
        partition = ctx.services.replicas.partition(topic, index)
        low_watermark = partition.delete_records_on_leader(offset)
    except KafkaError as exc:
        log.info(
            "DeleteRecords %s-%d to %d from %s: %s", topic, index, offset, ctx.peer, exc.message
        )
        return exc.error_code, -1
    log.info("DeleteRecords: %s-%d now starts at %d", topic, index, low_watermark)
    return ErrorCode.none, low_watermark
