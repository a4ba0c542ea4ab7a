"""ListGroups (key 16), v0-v5: the groups this broker coordinates, filtered by state (v4+)
and type (v5+): classic groups are of type "classic", Kafka 4's consumer groups (KIP-848)
of type "consumer", both with protocol type "consumer" when their members consume."""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize_cluster, denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module


@handles(ApiKey.LIST_GROUPS)
def handle_list_groups(ctx: RequestContext, request: object) -> Any:
    # No field is in every served version: the states filter (v4+) and the types filter
    # (v5) are read where the version has them.
    types = schema_module(ctx.response_type)
    states = {state.lower() for state in getattr(request, "states_filter", ()) or ()}
    kinds = {kind.lower() for kind in getattr(request, "types_filter", ()) or ()}
    listed = []
    # A list: the ACL check below reads the groups once before they are listed.
    groups: list[tuple[Any, str]] = [(g, "classic") for g in ctx.services.groups.list_groups()]
    groups += [(g, "consumer") for g in ctx.services.groups.list_consumer_groups()]
    groups += [(g, "share") for g in ctx.services.groups.list_share_groups()]
    # Describe on the cluster lists every group; else those the principal may describe.
    if not authorize_cluster(ctx, AclOperation.DESCRIBE, log_denial=False):
        hidden = denied(
            ctx, AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g, _ in groups)
        )
        groups = [(group, kind) for group, kind in groups if group.group_id not in hidden]
    for group, kind in groups:
        if states and group.state.value.lower() not in states:
            continue
        if kinds and kind not in kinds:
            continue
        listed.append(
            build(
                types.ListedGroup,
                group_id=group.group_id,
                protocol_type=kind if kind != "classic" else group.protocol_type or "",
                group_state=group.state.value,
                group_type=kind,
            )
        )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        groups=tuple(listed),
    )
