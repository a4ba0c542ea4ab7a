"""Heartbeat (key 12), v0-v4: a member says it is alive; it learns of rebalances here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles


class HeartbeatRequestView(Protocol):
    """What the handler reads of a HeartbeatRequest in every served version; the group
    instance id (v3+) is read where the version has it."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...


if TYPE_CHECKING:
    from kio.schema.heartbeat import v0, v1, v2, v3, v4

    def _served_requests_are_views(
        r0: v0.HeartbeatRequest,
        r1: v1.HeartbeatRequest,
        r2: v2.HeartbeatRequest,
        r3: v3.HeartbeatRequest,
        r4: v4.HeartbeatRequest,
    ) -> list[HeartbeatRequestView]:
        return [r0, r1, r2, r3, r4]


@handles(ApiKey.HEARTBEAT)
def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequestView) -> Any:
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
