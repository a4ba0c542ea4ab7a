"""LeaveGroup (key 13), v0-v5: members leave; from v3 several at once, by instance id too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond, schema_module


class LeaveGroupRequestView(Protocol):
    """What the handler reads of a LeaveGroupRequest in every served version."""

    @property
    def group_id(self) -> str: ...


class LeaveGroupRequestBeforeV3View(LeaveGroupRequestView, Protocol):
    """v0-v2: one member leaves."""

    @property
    def member_id(self) -> str: ...


class LeaveGroupMemberIdentityView(Protocol):
    @property
    def member_id(self) -> str: ...
    @property
    def group_instance_id(self) -> str | None: ...


class LeaveGroupRequestFromV3View(LeaveGroupRequestView, Protocol):
    """v3+: members leave, by member id or group instance id."""

    @property
    def members(self) -> Sequence[LeaveGroupMemberIdentityView]: ...


if TYPE_CHECKING:
    from kio.schema.leave_group import v0, v1, v2, v3, v4, v5

    def _served_requests_are_views(
        r0: v0.LeaveGroupRequest,
        r1: v1.LeaveGroupRequest,
        r2: v2.LeaveGroupRequest,
        r3: v3.LeaveGroupRequest,
        r4: v4.LeaveGroupRequest,
        r5: v5.LeaveGroupRequest,
    ) -> tuple[list[LeaveGroupRequestBeforeV3View], list[LeaveGroupRequestFromV3View]]:
        return [r0, r1, r2], [r3, r4, r5]


@handles(ApiKey.LEAVE_GROUP)
def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequestView) -> Any:
    if ctx.api_version >= 3:
        members = cast(LeaveGroupRequestFromV3View, request).members
        leaving = [(m.member_id, m.group_instance_id) for m in members]
    else:
        leaving = [(cast(LeaveGroupRequestBeforeV3View, request).member_id, None)]
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
