"""DescribeAcls (key 29), v1-v3: the ACLs a filter selects, grouped by resource pattern.
Needs Describe on the cluster; SECURITY_DISABLED without an authorizer."""

from __future__ import annotations

import logging
from itertools import groupby
from typing import TYPE_CHECKING, Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module
from .acl_requests import SECURITY_DISABLED_MESSAGE, authorizer_of, filter_from
from .views import AclFilterView

log = logging.getLogger("brook.apis.describe_acls")

if TYPE_CHECKING:
    from kio.schema.describe_acls import v1, v2, v3

    def _served_requests_are_views(
        r1: v1.DescribeAclsRequest, r2: v2.DescribeAclsRequest, r3: v3.DescribeAclsRequest
    ) -> list[AclFilterView]:
        return [r1, r2, r3]


@handles(ApiKey.DESCRIBE_ACLS)
def handle_describe_acls(ctx: RequestContext, request: AclFilterView) -> Any:
    types = schema_module(ctx.response_type)

    def respond(
        error: ErrorCode, message: str | None = None, resources: tuple[Any, ...] = ()
    ) -> Any:
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message,
            resources=resources,
        )

    authorizer = authorizer_of(ctx)
    if authorizer is None:
        return respond(ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE)
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return respond(ErrorCode.cluster_authorization_failed)
    selected = filter_from(request)
    if isinstance(selected, ErrorCode):
        return respond(selected, "Invalid filter: unknown code")
    reason = selected.invalid_reason()
    if reason is not None:
        log.info("DescribeAcls from %s refused: %s", ctx.peer, reason)
        return respond(ErrorCode.invalid_request, reason)
    bindings = authorizer.acls(selected)
    resources = tuple(
        build(
            types.DescribeAclsResource,
            resource_type=pattern.resource_type,
            resource_name=pattern.name,
            pattern_type=pattern.pattern_type,
            acls=tuple(
                build(
                    types.AclDescription,
                    principal=binding.entry.principal,
                    host=binding.entry.host,
                    operation=binding.entry.operation,
                    permission_type=binding.entry.permission,
                )
                for binding in group
            ),
        )
        for pattern, group in groupby(bindings, key=lambda binding: binding.pattern)
    )
    return respond(ErrorCode.none, None, resources)
