"""DescribeGroups (key 15), v0-v6: state, protocol and members of classic groups.

A group that is not a classic group (none, or a consumer group of Kafka 4's protocol) is
described as Dead with no members, as Kafka does; from v6 (KIP-1043) with
GROUP_ID_NOT_FOUND and a message saying so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorized_operations, denied
from ..authorizer.operations import NOT_PROVIDED, AclOperation
from ..groups.group import GroupState
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

# From v6 (KIP-1043) a group that is not a classic one is GROUP_ID_NOT_FOUND.
GROUP_ID_NOT_FOUND_VERSION = 6


class DescribeGroupsRequestView(Protocol):
    """What the handler reads of a DescribeGroupsRequest in every served version; the
    include_authorized_operations flag (v3+) is read where the version has it."""

    @property
    def groups(self) -> Sequence[str]: ...


if TYPE_CHECKING:
    from kio.schema.describe_groups import v0, v1, v2, v3, v4, v5, v6

    def _served_requests_are_views(
        r0: v0.DescribeGroupsRequest,
        r1: v1.DescribeGroupsRequest,
        r2: v2.DescribeGroupsRequest,
        r3: v3.DescribeGroupsRequest,
        r4: v4.DescribeGroupsRequest,
        r5: v5.DescribeGroupsRequest,
        r6: v6.DescribeGroupsRequest,
    ) -> list[DescribeGroupsRequestView]:
        return [r0, r1, r2, r3, r4, r5, r6]


@handles(ApiKey.DESCRIBE_GROUPS)
def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequestView) -> Any:
    types = schema_module(ctx.response_type)
    asked = getattr(request, "include_authorized_operations", False)  # v3+
    described = []
    hidden = denied(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, request.groups)
    for group_id in request.groups:
        if group_id in hidden:
            described.append(
                build(
                    types.DescribedGroup,
                    error_code=ErrorCode.group_authorization_failed,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=NOT_PROVIDED,
                )
            )
            continue
        operations = authorized_operations(ctx, ResourceType.GROUP, group_id, asked)
        group = ctx.services.groups.group(group_id)
        if group is None:
            not_found = ctx.api_version >= GROUP_ID_NOT_FOUND_VERSION
            described.append(
                build(
                    types.DescribedGroup,
                    error_code=ErrorCode.group_id_not_found if not_found else ErrorCode.none,
                    error_message=_not_found_message(ctx, group_id) if not_found else None,
                    group_id=group_id,
                    group_state=GroupState.DEAD.value,
                    protocol_type="",
                    protocol_data="",
                    members=(),
                    authorized_operations=operations,
                )
            )
            continue
        stable = group.is_(GroupState.STABLE)
        protocol = group.protocol_name or ""
        members = tuple(
            build(
                types.DescribedGroupMember,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                # Kafka shows metadata and assignments only once the group is stable.
                member_metadata=member.metadata_for(protocol) if stable else b"",
                member_assignment=member.assignment if stable else b"",
            )
            for member in group.members.values()
        )
        described.append(
            build(
                types.DescribedGroup,
                error_code=ErrorCode.none,
                group_id=group_id,
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=protocol if stable else "",
                members=members,
                authorized_operations=operations,
            )
        )
    return build(ctx.response_type, throttle_time=NO_THROTTLE, groups=tuple(described))


def _not_found_message(ctx: RequestContext, group_id: str) -> str:
    """Kafka's messages: a consumer group (KIP-848) or a share group (KIP-932) is not a
    classic one; else there is none."""
    groups = ctx.services.groups
    if groups.consumer_group(group_id) is not None or groups.share_group(group_id) is not None:
        return f"Group {group_id} is not a classic group."
    return f"Group {group_id} not found."
