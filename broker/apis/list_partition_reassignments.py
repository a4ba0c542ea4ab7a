"""ListPartitionReassignments (key 46), v0: the partitions being moved, with their
replicas (target and original together), the replicas being added and those being
removed, as Kafka's controller answers from the topic znodes. Partitions asked for that are
not being moved, or do not exist, are left out, as Kafka leaves them out.

Answered by the controller; a broker that is not the controller forwards it there (as
AlterPartitionReassignments). A single broker moves nothing: the answer is empty.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..cluster.reassignment import ReplicaAssignment
from ..server.request_context import RequestContext
from . import build, handles, schema_module
from .controller_forwarding import forward_to_controller


class ListPartitionReassignmentsTopicsView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


class ListPartitionReassignmentsRequestView(Protocol):
    """What the handler reads of a ListPartitionReassignmentsRequest (v0, the one served):
    the partitions asked for, null for every one; the request goes to the controller as
    it came."""

    @property
    def topics(self) -> Sequence[ListPartitionReassignmentsTopicsView] | None: ...


if TYPE_CHECKING:
    from kio.schema.list_partition_reassignments import v0

    def _served_requests_are_views(
        r0: v0.ListPartitionReassignmentsRequest,
    ) -> list[ListPartitionReassignmentsRequestView]:
        return [r0]


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequestView
) -> Any:
    asked: list[tuple[str, int]] | None = None
    if request.topics is not None:
        asked = list(
            dict.fromkeys(
                (topic.name, int(index))
                for topic in request.topics
                for index in topic.partition_indexes
            )
        )
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return _response(ctx, ErrorCode.cluster_authorization_failed, {})
    membership = ctx.services.membership
    duties = getattr(membership, "duties", None)
    if duties is None:
        return _response(ctx, ErrorCode.none, {})
    if not membership.is_controller:
        forwarded = await forward_to_controller(ctx, request, "ListPartitionReassignments")
        return forwarded or _response(ctx, ErrorCode.not_controller, {})
    from ..zookeeper.fenced_writes import ControllerFencedError

    try:
        ongoing = await duties.list_partition_reassignments(asked)
    except ControllerFencedError:
        return _response(ctx, ErrorCode.not_controller, {})
    return _response(ctx, ErrorCode.none, ongoing)


def _response(
    ctx: RequestContext, error: ErrorCode, ongoing: dict[tuple[str, int], ReplicaAssignment]
) -> Any:
    types = schema_module(ctx.response_type)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), assignment in sorted(ongoing.items()):
        by_topic.setdefault(topic, []).append(
            build(
                types.OngoingPartitionReassignment,
                partition_index=index,
                replicas=assignment.replicas,
                adding_replicas=assignment.adding,
                removing_replicas=assignment.removing,
            )
        )
    return build(
        ctx.response_type,
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=None,
        topics=tuple(
            build(types.OngoingTopicReassignment, name=topic, partitions=tuple(partitions))
            for topic, partitions in by_topic.items()
        ),
    )
