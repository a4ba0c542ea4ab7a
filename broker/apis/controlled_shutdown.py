"""ControlledShutdown (key 7), v1-v3: a broker about to stop asks the controller to move
the leadership of its partitions away (Kafka's ZooKeeper-era
KafkaApis.handleControlledShutdownRequest and KafkaController.doControlledShutdown).

Only the controller acts on it (NOT_CONTROLLER elsewhere, so the broker finds the
controller again); a broker that is not registered gets BROKER_NOT_AVAILABLE, and a
broker epoch (v2+) older than the registration's gets STALE_BROKER_EPOCH: a request of
a previous incarnation of the broker must not move the leaders of the current one. The
answer lists the replicated partitions the broker still leads (remaining_partitions):
no other ISR member could take them over; the broker asks again or stops anyway.

A single broker (no ZooKeeper) is its own controller and has nowhere to move anything:
it answers with nothing remaining (Kafka reports only replicated partitions).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.controlled_shutdown_schema import REMAINING_PARTITIONS
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import build, handles

log = logging.getLogger("brook.apis.controlled_shutdown")

NO_BROKER_EPOCH = -1


class ControlledShutdownRequestView(Protocol):
    """What the handler reads of a ControlledShutdownRequest in every served version (Brook's
    own schema, protocol/controlled_shutdown_schema.py); the broker epoch (v2+) is read
    where the version has it."""

    @property
    def broker_id(self) -> int: ...


if TYPE_CHECKING:
    from brook.protocol.controlled_shutdown_schema import (
        ControlledShutdownRequestV1,
        ControlledShutdownRequestV2,
        ControlledShutdownRequestV3,
    )

    def _served_requests_are_views(
        r1: ControlledShutdownRequestV1,
        r2: ControlledShutdownRequestV2,
        r3: ControlledShutdownRequestV3,
    ) -> list[ControlledShutdownRequestView]:
        return [r1, r2, r3]


@handles(ApiKey.CONTROLLED_SHUTDOWN)
async def handle_controlled_shutdown(
    ctx: RequestContext, request: ControlledShutdownRequestView
) -> Any:
    remaining_type = REMAINING_PARTITIONS[ctx.api_version]
    error, remaining = await _shut_down(ctx, request)
    if error is not ErrorCode.none:
        log.info(
            "ControlledShutdown of broker %d from %s: %s",
            request.broker_id,
            ctx.who,
            error.name,
        )
    return build(
        ctx.response_type,
        error_code=error,
        remaining_partitions=tuple(
            remaining_type(topic_name=topic, partition_index=index) for topic, index in remaining
        ),
    )


async def _shut_down(
    ctx: RequestContext, request: ControlledShutdownRequestView
) -> tuple[ErrorCode, list[tuple[str, int]]]:
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        return ErrorCode.cluster_authorization_failed, []
    membership = ctx.services.membership
    if not membership.is_controller:
        return ErrorCode.not_controller, []
    if getattr(membership, "duties", None) is None:
        # One broker without ZooKeeper: only itself, and nothing replicated to move.
        if request.broker_id != ctx.services.broker_id:
            return ErrorCode.broker_not_available, []
        return ErrorCode.none, []
    # Only ZooKeeper's membership has controller duties (its module is loaded by now).
    from ..zookeeper.membership import ZkMembership

    assert isinstance(membership, ZkMembership)
    duties = membership.duties
    assert duties is not None
    registered = await membership.broker_epoch_of(request.broker_id)
    if registered is None:
        return ErrorCode.broker_not_available, []
    epoch = getattr(request, "broker_epoch", NO_BROKER_EPOCH)
    if epoch != NO_BROKER_EPOCH and epoch < registered:
        return ErrorCode.stale_broker_epoch, []
    return ErrorCode.none, await duties.controlled_shutdown(request.broker_id, registered)
