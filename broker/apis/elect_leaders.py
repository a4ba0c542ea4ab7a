"""ElectLeaders (key 43), v0-v2: elect the preferred replica (v0 only), or, from v1, an
unclean leader for partitions that have none (Kafka's KafkaApis.handleElectLeaders and
KafkaController's ReplicaLeaderElection).

The controller decides: the request is answered there, and a broker that is not the
controller forwards it to the controller over the inter-broker connection, so that any
broker serves it (Kafka's admin clients send it to the controller; Kafka 2.x's
/admin/preferred_replica_election znode was never used for it, since the znode path
cannot carry each partition's result back). Per partition: ELECTION_NOT_NEEDED (the
preferred replica leads already / the leader is live), PREFERRED_LEADER_NOT_AVAILABLE,
ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION. With every partition asked
for (topic_partitions null), those that needed no election are left out, as Kafka does.
A single broker (no ZooKeeper) leads every replica of its partitions already.
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
from ..server.request_context import RequestContext
from . import build, handles, schema_module
from .controller_forwarding import forward_to_controller

log = logging.getLogger("brook.apis.elect_leaders")

Results = dict[tuple[str, int], tuple[ErrorCode, str | None]]


class ElectLeadersTopicPartitionsView(Protocol):
    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class ElectLeadersRequestView(Protocol):
    """What the handler reads of an ElectLeadersRequest in every served version: the
    partitions, null for every one; the election type (v1+) is read where the version
    has it, and the request goes to the controller as it came."""

    @property
    def topic_partitions(self) -> Sequence[ElectLeadersTopicPartitionsView] | None: ...


if TYPE_CHECKING:
    from kio.schema.elect_leaders import v0, v1, v2

    def _served_requests_are_views(
        r0: v0.ElectLeadersRequest, r1: v1.ElectLeadersRequest, r2: v2.ElectLeadersRequest
    ) -> list[ElectLeadersRequestView]:
        return [r0, r1, r2]


@handles(ApiKey.ELECT_LEADERS)
async def handle_elect_leaders(ctx: RequestContext, request: ElectLeadersRequestView) -> Any:
    from ..zookeeper.controller_duties import ElectionType

    raw_type = getattr(request, "election_type", ElectionType.PREFERRED)
    asked = _partitions(request)
    membership = ctx.services.membership
    duties = getattr(membership, "duties", None)
    if raw_type not in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        log.info("ElectLeaders from %s: unknown election type %d", ctx.who, raw_type)
        return _response(
            ctx, ErrorCode.invalid_request, _all(asked, ErrorCode.invalid_request, None), False
        )
    election_type = ElectionType(raw_type)
    if not authorize_cluster(ctx, AclOperation.ALTER):
        error = ErrorCode.cluster_authorization_failed
        return _response(ctx, error, _all(asked, error, None), False)
    if duties is None:
        return _response(ctx, ErrorCode.none, _single_broker(ctx, asked), asked is None)
    if not membership.is_controller:
        return await _forward(ctx, request, asked)
    from ..zookeeper.fenced_writes import ControllerFencedError

    try:
        results = await duties.elect_leaders(election_type, asked)
    except ControllerFencedError:
        return _response(ctx, ErrorCode.none, _all(asked, ErrorCode.not_controller, None), False)
    for (topic, index), (error, message) in results.items():
        if error not in (ErrorCode.none, ErrorCode.election_not_needed):
            log.info(
                "ElectLeaders %s of %s-%d from %s: %s (%s)",
                election_type.name,
                topic,
                index,
                ctx.who,
                error.name,
                message,
            )
    return _response(ctx, ErrorCode.none, results, asked is None)


def _partitions(request: ElectLeadersRequestView) -> list[tuple[str, int]] | None:
    if request.topic_partitions is None:
        return None
    # Each partition once, in the order asked.
    return list(
        dict.fromkeys((t.topic, int(p)) for t in request.topic_partitions for p in t.partitions)
    )


def _all(asked: list[tuple[str, int]] | None, error: ErrorCode, message: str | None) -> Results:
    return {partition: (error, message) for partition in asked or ()}


def _single_broker(ctx: RequestContext, asked: list[tuple[str, int]] | None) -> Results:
    metadata = ctx.services.metadata
    if asked is None:
        return {}  # every partition's only replica leads: none needed an election
    results: Results = {}
    for topic, index in asked:
        found = metadata.get(topic)
        if found is None or not 0 <= index < len(found.partitions):
            results[(topic, index)] = (
                ErrorCode.unknown_topic_or_partition,
                "The partition does not exist.",
            )
        else:
            results[(topic, index)] = (ErrorCode.election_not_needed, None)
    return results


async def _forward(
    ctx: RequestContext, request: ElectLeadersRequestView, asked: list[tuple[str, int]] | None
) -> Any:
    forwarded = await forward_to_controller(ctx, request, "ElectLeaders")
    if forwarded is None:
        return _response(ctx, ErrorCode.none, _all(asked, ErrorCode.not_controller, None), False)
    return forwarded


def _response(ctx: RequestContext, error: ErrorCode, results: Results, every: bool) -> Any:
    types = schema_module(ctx.response_type)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), (partition_error, message) in results.items():
        if every and partition_error is ErrorCode.election_not_needed:
            continue  # asked for all: only the partitions that needed an election
        by_topic.setdefault(topic, []).append(
            build(
                types.PartitionResult,
                partition_id=index,
                error_code=partition_error,
                error_message=message,
            )
        )
    return build(
        ctx.response_type,
        throttle_time=datetime.timedelta(0),
        error_code=error,
        replica_election_results=tuple(
            build(types.ReplicaElectionResult, topic=topic, partition_result=tuple(partitions))
            for topic, partitions in by_topic.items()
        ),
    )
