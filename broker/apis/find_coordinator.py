"""FindCoordinator (key 10), v0-v5: which broker coordinates a group or a transaction.

The coordinator of a group (key type 0) or a transactional id (key type 1) is the leader
of the key's partition of `__consumer_offsets` or `__transaction_state` (a single broker:
itself). The first request creates the coordinator's topic, as Kafka does. Batched keys
arrive from v4. The endpoint is the one advertised for the listener the request came in
on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.find_coordinator")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


class FindCoordinatorRequestBeforeV4View(Protocol):
    """v0-v3: one key (its type, from v1, is read where the version has it)."""

    @property
    def key(self) -> str: ...


class FindCoordinatorRequestFromV4View(Protocol):
    """v4+: a batch of keys of one type."""

    @property
    def coordinator_keys(self) -> Sequence[str]: ...


FindCoordinatorRequestView: TypeAlias = (
    FindCoordinatorRequestBeforeV4View | FindCoordinatorRequestFromV4View
)


if TYPE_CHECKING:
    from kio.schema.find_coordinator import v0, v1, v2, v3, v4, v5

    def _served_requests_are_views(
        r0: v0.FindCoordinatorRequest,
        r1: v1.FindCoordinatorRequest,
        r2: v2.FindCoordinatorRequest,
        r3: v3.FindCoordinatorRequest,
        r4: v4.FindCoordinatorRequest,
        r5: v5.FindCoordinatorRequest,
    ) -> tuple[list[FindCoordinatorRequestBeforeV4View], list[FindCoordinatorRequestFromV4View]]:
        return [r0, r1, r2, r3], [r4, r5]


@handles(ApiKey.FIND_COORDINATOR)
def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequestView) -> Any:
    types = schema_module(ctx.response_type)
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if ctx.api_version >= 4:
        coordinators = tuple(
            build(types.Coordinator, key=key, **_locate(ctx, key, key_type))
            for key in cast(FindCoordinatorRequestFromV4View, request).coordinator_keys
        )
        return build(ctx.response_type, throttle_time=NO_THROTTLE, coordinators=coordinators)
    key = cast(FindCoordinatorRequestBeforeV4View, request).key
    return build(ctx.response_type, throttle_time=NO_THROTTLE, **_locate(ctx, key, key_type))


def _locate(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return _not_found(ErrorCode.invalid_request, f"Unknown coordinator type {key_type}")
    if key_type == GROUP_KEY_TYPE:
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
            return _not_found(ErrorCode.group_authorization_failed, None)
    elif not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return _not_found(ErrorCode.transactional_id_authorization_failed, None)
    if not key:
        error = (
            ErrorCode.invalid_group_id if key_type == GROUP_KEY_TYPE else ErrorCode.invalid_request
        )
        return _not_found(error, None)
    services = ctx.services
    coordinator = services.groups if key_type == GROUP_KEY_TYPE else services.transactions
    try:
        partition = coordinator.runtime.partition_for(key)  # creates the topic on first use
    except KafkaError as exc:
        log.warning("Cannot create the coordinator's internal topic: %s", exc.message)
        return _not_found(ErrorCode.coordinator_not_available, exc.message)
    topic = services.metadata.get(coordinator.runtime.topic.name)
    leader = topic.partitions[partition].leader if topic is not None else -1
    # The coordinator is the leader of the key's partition, reached on the request's
    # listener; none while the partition has no leader (Kafka's COORDINATOR_NOT_AVAILABLE).
    if leader == services.broker_id:
        endpoint = services.listeners.advertised_endpoint(ctx.listener_name)
        where = (endpoint.host, endpoint.port) if endpoint is not None else None
    else:
        found = services.metadata.endpoint(leader, ctx.listener_name) if leader >= 0 else None
        where = (found.host, found.port) if found is not None else None
    if where is None:
        return _not_found(
            ErrorCode.coordinator_not_available,
            f"The coordinator is not available on listener {ctx.listener_name}",
        )
    return {
        "node_id": leader,
        "host": where[0],
        "port": where[1],
        "error_code": ErrorCode.none,
        "error_message": None,
    }


def _not_found(error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": message}
