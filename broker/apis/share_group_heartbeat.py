"""ShareGroupHeartbeat (key 76), v1: a share group's member joins (epoch 0, with its
subscription), heartbeats with its epoch, and leaves (epoch -1), KIP-932. The answer
carries the member's epoch, the heartbeat interval and, when it changed, the member's
partitions (by topic id).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorized
from ..authorizer.operations import AclOperation
from ..groups.share_groups import ShareHeartbeatRequest, ShareHeartbeatResponse
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond, schema_module
from .assignments import by_topic_id


class ShareGroupHeartbeatRequestView(Protocol):
    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def subscribed_topic_names(self) -> Sequence[str] | None: ...


if TYPE_CHECKING:
    from kio.schema.share_group_heartbeat import v1

    def _served_requests_are_views(
        r1: v1.ShareGroupHeartbeatRequest,
    ) -> list[ShareGroupHeartbeatRequestView]:
        return [r1]


@handles(ApiKey.SHARE_GROUP_HEARTBEAT)
def handle_share_group_heartbeat(
    ctx: RequestContext, request: ShareGroupHeartbeatRequestView
) -> Any:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, ShareHeartbeatResponse(ErrorCode.group_authorization_failed))
    names = request.subscribed_topic_names
    if names and ctx.services.authorizer is not None:
        # As Kafka: a subscription to a topic the principal may not Describe is refused.
        allowed = authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        missing = sorted(set(names) - set(allowed))
        if missing:
            return _response(
                ctx,
                ShareHeartbeatResponse(
                    ErrorCode.topic_authorization_failed,
                    f"Topic authorization failed for topics: {missing}",
                ),
            )
    answer = ctx.services.groups.share_group_heartbeat(
        ShareHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=tuple(names) if names is not None else None,
            client_id=ctx.client_id or "",
            client_host="/" + ctx.peer.rsplit(":", 1)[0],
        )
    )
    return respond(answer, lambda response: _response(ctx, response))


def _response(ctx: RequestContext, response: ShareHeartbeatResponse) -> Any:
    types = schema_module(ctx.response_type)
    assignment = None
    if response.assignment is not None and response.error is ErrorCode.none:
        assignment = by_topic_id(types, response.assignment)
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=response.error,
        error_message=response.message,
        member_id=response.member_id,
        member_epoch=response.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=response.heartbeat_interval_ms),
        assignment=assignment,
    )
