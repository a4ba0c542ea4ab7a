"""ShareGroupDescribe (key 77), v1: share groups, member by member (KIP-932): each
group's state, epochs and assignor; each member's subscription and partitions, topics
named. A group that is not a share group (or none) is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorized, authorized_operations, denied
from ..authorizer.operations import NOT_PROVIDED, AclOperation
from ..groups.share_group import ShareGroup
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module
from .assignments import named


class ShareGroupDescribeRequestView(Protocol):
    @property
    def group_ids(self) -> Sequence[str]: ...
    @property
    def include_authorized_operations(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.share_group_describe import v1

    def _served_requests_are_views(
        r1: v1.ShareGroupDescribeRequest,
    ) -> list[ShareGroupDescribeRequestView]:
        return [r1]


@handles(ApiKey.SHARE_GROUP_DESCRIBE)
def handle_share_group_describe(ctx: RequestContext, request: ShareGroupDescribeRequestView) -> Any:
    types = schema_module(ctx.response_type)
    hidden = denied(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.group_ids)
    assignor = ctx.services.config["group.share.assignors"][0]
    described = []
    for group_id in request.group_ids:
        if group_id in hidden:
            described.append(_failed(types, group_id, ErrorCode.group_authorization_failed, None))
            continue
        error, group = ctx.services.groups.share_group_describe(group_id)
        if group is None:
            message = (
                f"Group {group_id} not found." if error is ErrorCode.group_id_not_found else None
            )
            described.append(_failed(types, group_id, error, message))
            continue
        if not _may_describe_topics(ctx, group):
            described.append(
                _failed(
                    types,
                    group_id,
                    ErrorCode.topic_authorization_failed,
                    "The group has described topic(s) that the client is not authorized to"
                    " describe.",
                )
            )
            continue

        members = tuple(
            build(
                types.Member,
                member_id=member.member_id,
                rack_id=member.rack_id,
                member_epoch=member.member_epoch,
                client_id=member.client_id,
                client_host=member.client_host,
                subscribed_topic_names=member.subscribed_topic_names,
                assignment=named(ctx, types, member.assignment),
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
                assignment_epoch=group.assignment_epoch,
                assignor_name=assignor,
                members=members,
                authorized_operations=authorized_operations(
                    ctx, ResourceType.GROUP, group_id, request.include_authorized_operations
                ),
            )
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=tuple(described))


def _may_describe_topics(ctx: RequestContext, group: ShareGroup) -> bool:
    """As Kafka: a group whose members read a topic the principal may not Describe is
    not shown."""
    if ctx.services.authorizer is None:
        return True
    names = set()
    for member in group.members.values():
        for topic_id in member.assignment:
            topic = ctx.services.metadata.get_by_id(topic_id)
            if topic is not None:
                names.add(topic.name)
    return (
        not names or set(authorized(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) >= names
    )


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
