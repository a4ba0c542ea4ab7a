"""What the three ACL APIs share: the authorizer they need, and their filters read from
the wire (DescribeAcls' request and DeleteAcls' filters have the same fields)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook.protocol.errors import ErrorCode

from ..authorizer.acl import AclBindingFilter, PatternType, PermissionType, ResourceType
from ..authorizer.authorizer import Authorizer
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from .views import AclFilterView

if TYPE_CHECKING:
    from ..authorizer.store import AclStore

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured on the broker"


def authorizer_of(ctx: RequestContext) -> Authorizer | None:
    return ctx.services.authorizer


def acl_store_of(ctx: RequestContext) -> AclStore:
    """Where the ACLs are kept, for the APIs that change them once they found an
    authorizer: the broker starts the two together (broker_parts._authorizer)."""
    store = ctx.services.acl_store
    if store is None:
        raise RuntimeError("An authorizer without an ACL store")
    return store


def filter_from(request: AclFilterView) -> AclBindingFilter | ErrorCode:
    """The filter a request names, or INVALID_REQUEST for a code Kafka does not know."""
    try:
        return AclBindingFilter(
            ResourceType(request.resource_type_filter),
            request.resource_name_filter,
            PatternType(request.pattern_type_filter),
            request.principal_filter,
            request.host_filter,
            AclOperation(request.operation),
            PermissionType(request.permission_type),
        )
    except ValueError:
        return ErrorCode.invalid_request
