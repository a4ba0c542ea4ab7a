"""SyncGroup (key 14), v0-v5: the leader hands out assignments, every member gets its own."""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..request_context import RequestContext
from . import NO_THROTTLE, build, handles


@handles(ApiKey.SYNC_GROUP)
def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    result = ctx.services.groups.sync(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        instance_id=getattr(request, "group_instance_id", None),
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={entry.member_id: entry.assignment for entry in request.assignments},
    )
    if isinstance(result, tuple):
        return _response(ctx, request.group_id, *result)
    return _await_response(ctx, request.group_id, result)


async def _await_response(ctx: RequestContext, group_id: str, waiter: Any) -> Any:
    return _response(ctx, group_id, *(await waiter))


def _response(ctx: RequestContext, group_id: str, error: int, assignment: bytes) -> Any:
    group = ctx.services.groups.groups.get(group_id)
    known = group is not None and error == 0
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode(error),
        protocol_type=group.protocol_type if known else None,
        protocol_name=group.protocol_name if known else None,
        assignment=assignment,
    )
