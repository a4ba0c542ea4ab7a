"""Requests only the controller answers, sent on by a broker that is not the controller
(over the inter-broker listener), so that an admin client may ask any broker. A request
that arrives from another broker is answered where it lands, never forwarded again."""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.errors import KafkaError

from ..server.request_context import RequestContext

log = logging.getLogger("brook.apis.forwarding")

# The client id of requests between brokers (broker/server/inter_broker.py).
INTER_BROKER_CLIENT_PREFIX = "broker-"


async def forward_to_controller(ctx: RequestContext, request: Any, api: str) -> Any | None:
    """The controller's response to `request`; None when there is no controller to ask
    (none elected, unreachable, or this request was forwarded already): the caller
    answers NOT_CONTROLLER, which clients retry."""
    controller = ctx.services.membership.controller_id
    if controller < 0 or (ctx.client_id or "").startswith(INTER_BROKER_CLIENT_PREFIX):
        return None
    try:
        return await ctx.services.inter_broker.request(controller, request)
    except KafkaError as exc:
        log.info("%s from %s to controller %d: %s", api, ctx.who, controller, exc.message)
        return None
