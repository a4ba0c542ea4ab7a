"""FindCoordinator (key 10), v0-v5: which broker coordinates a group or a transaction.

A single broker coordinates every group (key type 0) and every transactional id (key
type 1). The first request creates the coordinator's topic (`__consumer_offsets`,
`__transaction_state`), as Kafka does. Batched keys arrive from v4. The endpoint is the
one advertised for the listener the request came in on.
"""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.find_coordinator")

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


@handles(ApiKey.FIND_COORDINATOR)
def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    types = schema_module(ctx.response_type)
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if ctx.api_version >= 4:
        coordinators = tuple(
            build(types.Coordinator, key=key, **_locate(ctx, key, key_type))
            for key in request.coordinator_keys
        )
        return build(ctx.response_type, throttle_time=NO_THROTTLE, coordinators=coordinators)
    return build(
        ctx.response_type, throttle_time=NO_THROTTLE, **_locate(ctx, request.key, key_type)
    )


def _locate(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    services = ctx.services
    endpoint = services.listeners.advertised_endpoint(ctx.listener_name)
    if endpoint is None:
        return {
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": f"The coordinator is not available on listener {ctx.listener_name}",
        }
    found = {
        "node_id": services.broker_id,
        "host": endpoint.host,
        "port": endpoint.port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }
    if key_type not in (GROUP_KEY_TYPE, TRANSACTION_KEY_TYPE):
        return {
            **found,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.invalid_request,
            "error_message": f"Unknown coordinator type {key_type}",
        }
    if not key:
        return {
            **found,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.invalid_group_id
            if key_type == GROUP_KEY_TYPE
            else ErrorCode.invalid_request,
            "error_message": None,
        }
    coordinator = services.groups if key_type == GROUP_KEY_TYPE else services.transactions
    try:
        coordinator.ensure_topic()
    except KafkaError as exc:
        log.warning("Cannot create the coordinator's internal topic: %s", exc.message)
        return {
            **found,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.coordinator_not_available,
            "error_message": exc.message,
        }
    return found
