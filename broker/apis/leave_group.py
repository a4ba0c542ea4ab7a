"""LeaveGroup (key 13), v0-v5: members leave; from v3 several at once, by instance id too."""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond, schema_module


@handles(ApiKey.LEAVE_GROUP)
def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 3:
        leaving = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        leaving = [(request.member_id, None)]
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.group_authorization_failed,
            members=(),
        )
    answer = ctx.services.groups.leave(request.group_id, leaving)
    return respond(answer, lambda answered: _response(ctx, *answered))


def _response(
    ctx: RequestContext, error: ErrorCode, results: list[tuple[str, str | None, ErrorCode]]
) -> Any:
    if ctx.api_version < 3:
        # One member: its error is the response's error.
        error = results[0][2] if results else error
        return build(ctx.response_type, throttle_time=NO_THROTTLE, error_code=error)
    types = schema_module(ctx.response_type)
    members = tuple(
        build(
            types.MemberResponse,
            member_id=member_id,
            group_instance_id=instance_id,
            error_code=member_error,
        )
        for member_id, instance_id, member_error in results
    )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, error_code=error, members=members)
