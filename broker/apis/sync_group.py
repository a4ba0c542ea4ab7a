"""SyncGroup (key 14), v0-v5: the leader hands out assignments, every member gets its own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..groups.group import SyncRequest
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond


class SyncGroupRequestAssignmentView(Protocol):
    @property
    def member_id(self) -> str: ...
    @property
    def assignment(self) -> bytes: ...


class SyncGroupRequestView(Protocol):
    """What the handler reads of a SyncGroupRequest in every served version; the group
    instance id (v3+), protocol type and name (v5+) are read where the version has them."""

    @property
    def group_id(self) -> str: ...
    @property
    def generation_id(self) -> int: ...
    @property
    def member_id(self) -> str: ...
    @property
    def assignments(self) -> Sequence[SyncGroupRequestAssignmentView]: ...


if TYPE_CHECKING:
    from kio.schema.sync_group import v0, v1, v2, v3, v4, v5

    def _served_requests_are_views(
        r0: v0.SyncGroupRequest,
        r1: v1.SyncGroupRequest,
        r2: v2.SyncGroupRequest,
        r3: v3.SyncGroupRequest,
        r4: v4.SyncGroupRequest,
        r5: v5.SyncGroupRequest,
    ) -> list[SyncGroupRequestView]:
        return [r0, r1, r2, r3, r4, r5]


@handles(ApiKey.SYNC_GROUP)
def handle_sync_group(ctx: RequestContext, request: SyncGroupRequestView) -> Any:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, request.group_id, ErrorCode.group_authorization_failed, b"")
    result = ctx.services.groups.sync(
        SyncRequest(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            instance_id=getattr(request, "group_instance_id", None),
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignments={entry.member_id: entry.assignment for entry in request.assignments},
        )
    )
    echo = (getattr(request, "protocol_type", None), getattr(request, "protocol_name", None))
    return respond(result, lambda answer: _response(ctx, request.group_id, *answer, echo=echo))


def _response(
    ctx: RequestContext,
    group_id: str,
    error: ErrorCode,
    assignment: bytes,
    echo: tuple[str | None, str | None] = (None, None),
) -> Any:
    """A classic group's protocol type and name; for a classic member inside a consumer
    group (KIP-848), the request's, echoed as Kafka does."""
    group = ctx.services.groups.group(group_id)
    known = group if error is ErrorCode.none else None
    protocol_type, protocol_name = echo if error is ErrorCode.none else (None, None)
    if known is not None:
        protocol_type, protocol_name = known.protocol_type, known.protocol_name
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    )
