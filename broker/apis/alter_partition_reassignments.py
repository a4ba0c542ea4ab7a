"""AlterPartitionReassignments (key 45), v0: move partitions to new replicas, or cancel a
move (null replicas), as Kafka's controller does it (KIP-455; the algorithm is in
broker/zookeeper/reassignment.py).

The controller decides and answers; a broker that is not the controller forwards the
request to it over the inter-broker listener, so any broker serves it (see
reassignment.py for why not /admin/reassign_partitions). Per partition:
INVALID_REPLICA_ASSIGNMENT (empty, duplicate or negative ids, replicas to add that are not
live brokers), NO_REASSIGNMENT_IN_PROGRESS (cancelling nothing), UNKNOWN_TOPIC_OR_PARTITION;
top level NOT_CONTROLLER when the controller moved meanwhile. A single broker has one
broker to place replicas on: moving a partition to itself is accepted, and changes nothing.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..cluster.reassignment import ReplicaAssignment, validate_target_replicas
from ..server.request_context import RequestContext
from . import build, handles, schema_module
from .controller_forwarding import forward_to_controller

log = logging.getLogger("brook.apis.reassignments")

Results = dict[tuple[str, int], tuple[ErrorCode, str | None]]


class ReassignablePartitionView(Protocol):
    """A partition and its new replicas (null: cancel its reassignment)."""

    @property
    def partition_index(self) -> int: ...
    @property
    def replicas(self) -> Sequence[int] | None: ...


class ReassignableTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[ReassignablePartitionView]: ...


class AlterPartitionReassignmentsRequestView(Protocol):
    """What the handler reads of an AlterPartitionReassignmentsRequest (v0, the one
    served); the request goes to the controller as it came."""

    @property
    def topics(self) -> Sequence[ReassignableTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.alter_partition_reassignments import v0

    def _served_requests_are_views(
        r0: v0.AlterPartitionReassignmentsRequest,
    ) -> list[AlterPartitionReassignmentsRequestView]:
        return [r0]


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequestView
) -> Any:
    asked: dict[tuple[str, int], list[int] | None] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            replicas = partition.replicas
            asked[(topic.name, int(partition.partition_index))] = (
                None if replicas is None else [int(r) for r in replicas]
            )
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return _response(ctx, ErrorCode.cluster_authorization_failed, None, {})
    membership = ctx.services.membership
    duties = getattr(membership, "duties", None)
    if duties is None:
        return _response(ctx, ErrorCode.none, None, _single_broker(ctx, asked))
    if not membership.is_controller:
        forwarded = await forward_to_controller(ctx, request, "AlterPartitionReassignments")
        return forwarded or _response(ctx, ErrorCode.not_controller, None, {})
    from ..zookeeper.fenced_writes import ControllerFencedError

    try:
        results = await duties.alter_partition_reassignments(asked)
    except ControllerFencedError:
        return _response(ctx, ErrorCode.not_controller, None, {})
    for (topic, index), (error, message) in results.items():
        if error is not ErrorCode.none:
            log.info(
                "AlterPartitionReassignments of %s-%d to %s from %s: %s (%s)",
                topic,
                index,
                asked[(topic, index)],
                ctx.peer,
                error.name,
                message,
            )
    return _response(ctx, ErrorCode.none, None, results)


def _single_broker(ctx: RequestContext, asked: dict[tuple[str, int], list[int] | None]) -> Results:
    """One broker, which every partition's only replica is on already."""
    own = ctx.services.broker_id
    results: Results = {}
    for (topic, index), target in asked.items():
        found = ctx.services.metadata.get(topic)
        current = ReplicaAssignment((own,))
        error = None if target is None else validate_target_replicas(current, target, {own})
        if error is not None:
            results[(topic, index)] = error
        elif target is None:
            results[(topic, index)] = (ErrorCode.no_reassignment_in_progress, None)
        elif found is None or not 0 <= index < len(found.partitions):
            results[(topic, index)] = (
                ErrorCode.unknown_topic_or_partition,
                "The partition does not exist.",
            )
        else:
            results[(topic, index)] = (ErrorCode.none, None)
    return results


def _response(ctx: RequestContext, error: ErrorCode, message: str | None, results: Results) -> Any:
    types = schema_module(ctx.response_type)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), (partition_error, partition_message) in results.items():
        by_topic.setdefault(topic, []).append(
            build(
                types.ReassignablePartitionResponse,
                partition_index=index,
                error_code=partition_error,
                error_message=partition_message,
            )
        )
    return build(
        ctx.response_type,
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        responses=tuple(
            build(types.ReassignableTopicResponse, name=topic, partitions=tuple(partitions))
            for topic, partitions in by_topic.items()
        ),
    )
