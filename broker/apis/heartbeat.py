"""Heartbeat (key 12), v0-v4: a member says it is alive; it learns of rebalances here."""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles


@handles(ApiKey.HEARTBEAT)
def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.group_authorization_failed,
        )
    error = ctx.services.groups.heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, error_code=error)
