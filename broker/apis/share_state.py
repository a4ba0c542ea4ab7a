"""What the five share-state APIs (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary: keys 83-87)
have in common: brokers send them to a key's share coordinator (a share partition's
leader, or the group coordinator), so each needs ClusterAction, and each partition is
answered on its own, with the error the coordinator raised for it (NOT_COORDINATOR when
this broker does not lead the key's `__share_group_state` partition).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from ..share.share_coordinator import ShareCoordinator
from . import build, schema_module
from .views import StateRequestView

log = logging.getLogger("brook.apis.share_state")

T = TypeVar("T")


async def answer_partitions(
    ctx: RequestContext,
    request: StateRequestView,
    result_type: str,
    serve: Callable[[ShareCoordinator, uuid.UUID, Any], Awaitable[dict[str, Any]]],
    failed: Callable[[], dict[str, Any]] = dict,
) -> Any:
    """The response: for each partition, `serve`'s fields, or the error it raised (with
    `failed`'s fields beside it)."""
    types = schema_module(ctx.response_type)
    allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for topic in request.topics:
        partitions = []
        for partition in topic.partitions:
            fields: dict[str, Any]
            if not allowed:
                fields = {
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "error_message": None,
                    **failed(),
                }
            elif topic.topic_id is None or partition.partition < 0 or not request.group_id:
                fields = {
                    "error_code": ErrorCode.invalid_request,
                    "error_message": "A group id, topic id and partition are required.",
                    **failed(),
                }
            else:
                try:
                    fields = {
                        "error_code": ErrorCode.none,
                        "error_message": None,
                        **await serve(ctx.services.coordinators.share, topic.topic_id, partition),
                    }
                except KafkaError as exc:
                    fields = {
                        "error_code": exc.error_code,
                        "error_message": exc.message,
                        **failed(),
                    }
            partitions.append(build(types.PartitionResult, partition=partition.partition, **fields))
        results.append(
            build(
                getattr(types, result_type), topic_id=topic.topic_id, partitions=tuple(partitions)
            )
        )
    return build(ctx.response_type, results=tuple(results))
