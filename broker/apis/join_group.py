"""JoinGroup (key 11), v0-v9: members join a group and wait for the rebalance.

v4+ clients get MEMBER_ID_REQUIRED with a member id on their first join (KIP-394);
v5+ carry group.instance.id for static membership (KIP-345). The response waits until
every member has rejoined or the rebalance timeout passes.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..groups.group import JoinRequest, JoinResult
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond, schema_module


class JoinGroupRequestProtocolView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def metadata(self) -> bytes: ...


class JoinGroupRequestView(Protocol):
    """What the handler reads of a JoinGroupRequest in every served version; the rebalance
    timeout (v1+) and group instance id (v5+) are read where the version has them."""

    @property
    def group_id(self) -> str: ...
    @property
    def session_timeout(self) -> datetime.timedelta: ...
    @property
    def member_id(self) -> str: ...
    @property
    def protocol_type(self) -> str: ...
    @property
    def protocols(self) -> Sequence[JoinGroupRequestProtocolView]: ...


if TYPE_CHECKING:
    from kio.schema.join_group import v0, v1, v2, v3, v4, v5, v6, v7, v8, v9

    def _served_requests_are_views(
        r0: v0.JoinGroupRequest,
        r1: v1.JoinGroupRequest,
        r2: v2.JoinGroupRequest,
        r3: v3.JoinGroupRequest,
        r4: v4.JoinGroupRequest,
        r5: v5.JoinGroupRequest,
        r6: v6.JoinGroupRequest,
        r7: v7.JoinGroupRequest,
        r8: v8.JoinGroupRequest,
        r9: v9.JoinGroupRequest,
    ) -> list[JoinGroupRequestView]:
        return [r0, r1, r2, r3, r4, r5, r6, r7, r8, r9]


@handles(ApiKey.JOIN_GROUP)
def handle_join_group(ctx: RequestContext, request: JoinGroupRequestView) -> Any:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, JoinResult(ErrorCode.group_authorization_failed))
    session_timeout_ms = int(request.session_timeout.total_seconds() * 1000)
    rebalance = getattr(request, "rebalance_timeout", None)  # v1+; v0 uses the session timeout
    rebalance_timeout_ms = (
        int(rebalance.total_seconds() * 1000) if rebalance is not None else session_timeout_ms
    )
    result = ctx.services.groups.join(
        JoinRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host="/" + ctx.peer.rsplit(":", 1)[0],
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=[(protocol.name, protocol.metadata) for protocol in request.protocols],
            require_known_member_id=ctx.api_version >= 4,
            supports_skip_assignment=ctx.api_version >= 9,
        )
    )
    return respond(result, lambda answer: _response(ctx, answer))


def _response(ctx: RequestContext, result: JoinResult) -> Any:
    types = schema_module(ctx.response_type)
    members = tuple(
        build(
            types.JoinGroupResponseMember,
            member_id=member_id,
            group_instance_id=instance_id,
            metadata=metadata,
        )
        for member_id, instance_id, metadata in result.members
    )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        # Before v7 the protocol name is not nullable.
        protocol_name=result.protocol_name if ctx.api_version >= 7 else result.protocol_name or "",
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )
