"""ConsumerGroupDescribe (key 69), v0-v1: Kafka 4's consumer groups, member by member.

Each group with its state, epochs and assignor; each member with its subscription, its
current assignment and its target, topics named. A group that is not a consumer group
(or none) is GROUP_ID_NOT_FOUND, as Kafka answers. v1 adds each member's type (KIP-1099):
0 for a member of the classic protocol inside the group, 1 for the consumer protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorized_operations, denied
from ..authorizer.operations import NOT_PROVIDED, AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module
from .assignments import named

CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1


class ConsumerGroupDescribeRequestView(Protocol):
    @property
    def group_ids(self) -> Sequence[str]: ...
    @property
    def include_authorized_operations(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.consumer_group_describe import v0, v1

    def _served_requests_are_views(
        r0: v0.ConsumerGroupDescribeRequest,
        r1: v1.ConsumerGroupDescribeRequest,
    ) -> list[ConsumerGroupDescribeRequestView]:
        return [r0, r1]


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE)
def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    hidden = denied(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_ids)
    described = []
    for group_id in request.group_ids:
        if group_id in hidden:
            described.append(_failed(types, group_id, ErrorCode.group_authorization_failed, None))
            continue
        error, group, assignor = ctx.services.groups.consumer_group_describe(group_id)
        if group is None or assignor is None:
            message = (
                f"Group {group_id} not found." if error is ErrorCode.group_id_not_found else None
            )
            described.append(_failed(types, group_id, error, message))
            continue

        members = tuple(
            build(
                types.Member,
                member_id=member.member_id,
                instance_id=member.instance_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=member.subscribed_topic_names,
                subscribed_topic_regex=member.subscribed_topic_regex,
                assignment=named(ctx, types, member.assigned),
                target_assignment=named(
                    ctx, types, group.target_assignment.get(member.member_id, {})
                ),
                member_type=CLASSIC_MEMBER_TYPE
                if member.classic is not None
                else CONSUMER_MEMBER_TYPE,
            )
            for member in group.members.values()
        )
        described.append(
            build(
                types.DescribedGroup,
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.target_assignment_epoch,
                assignor_name=assignor,
                members=members,
                authorized_operations=authorized_operations(
                    ctx, ResourceType.GROUP, group_id, request.include_authorized_operations
                ),
            )
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=tuple(described))


def _failed(types: Any, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return build(
        types.DescribedGroup,
        error_code=error,
        error_message=message,
        group_id=group_id,
        group_state="",
        group_epoch=-1,
        assignment_epoch=-1,
        assignor_name="",
        members=(),
        authorized_operations=NOT_PROVIDED,
    )
