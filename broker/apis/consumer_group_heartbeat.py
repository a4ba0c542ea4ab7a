"""ConsumerGroupHeartbeat (key 68), v0-v1: Kafka 4's consumer group protocol (KIP-848).

A member joins with epoch 0 and its subscription, then heartbeats with its epoch and
the partitions it owns; the coordinator answers its epoch and, when it changed, its
assignment. Epoch -1 leaves; -2 leaves for a restart (a static member keeps its
partitions for its session). v1 adds the subscribed-topic regex and requires a member id
the client made (KIP-1082); v0 lets the coordinator make one.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..groups.consumer_groups import HeartbeatRequest, HeartbeatResponse
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond, schema_module
from .assignments import by_topic_id


class OwnedTopicPartitionsView(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class ConsumerGroupHeartbeatRequestView(Protocol):
    """What the handler reads of a ConsumerGroupHeartbeatRequest in every served version;
    the regex (v1) is read where the version has it."""

    @property
    def group_id(self) -> str: ...
    @property
    def member_id(self) -> str: ...
    @property
    def member_epoch(self) -> int: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def rack_id(self) -> str | None: ...
    @property
    def rebalance_timeout(self) -> datetime.timedelta: ...
    @property
    def subscribed_topic_names(self) -> Sequence[str] | None: ...
    @property
    def server_assignor(self) -> str | None: ...
    @property
    def topic_partitions(self) -> Sequence[OwnedTopicPartitionsView] | None: ...


if TYPE_CHECKING:
    from kio.schema.consumer_group_heartbeat import v0, v1

    def _served_requests_are_views(
        r0: v0.ConsumerGroupHeartbeatRequest,
        r1: v1.ConsumerGroupHeartbeatRequest,
    ) -> list[ConsumerGroupHeartbeatRequestView]:
        return [r0, r1]


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT)
def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequestView
) -> Any:
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, HeartbeatResponse(ErrorCode.group_authorization_failed))
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for topic in request.topic_partitions:
            if topic.topic_id is not None:
                owned[topic.topic_id] = frozenset(topic.partitions)
    timeout_ms = int(request.rebalance_timeout.total_seconds() * 1000)
    answer = ctx.services.groups.consumer_group_heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=timeout_ms,
            subscribed_topic_names=(
                tuple(request.subscribed_topic_names)
                if request.subscribed_topic_names is not None
                else None
            ),
            subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
            server_assignor=request.server_assignor,
            owned=owned,
            client_id=ctx.client_id or "",
            client_host="/" + ctx.peer.rsplit(":", 1)[0],
            api_version=ctx.api_version,
        )
    )
    return respond(answer, lambda response: _response(ctx, response))


def _response(ctx: RequestContext, response: HeartbeatResponse) -> Any:
    types = schema_module(ctx.response_type)
    assignment = None
    if response.assignment is not None and not response.error:
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
