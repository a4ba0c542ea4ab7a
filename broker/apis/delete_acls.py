"""DeleteAcls (key 31), v1-v3: the ACLs each filter selects removed from the store, each
filter answered with the ACLs it removed. Needs Alter on the cluster; SECURITY_DISABLED
without an authorizer; a filter with an UNKNOWN element gets INVALID_REQUEST."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import AclBinding, AclBindingFilter, ResourcePattern
from ..authorizer.authorizer import Authorizer, Entries
from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module
from .acl_requests import SECURITY_DISABLED_MESSAGE, acl_store_of, authorizer_of, filter_from
from .views import AclFilterView

if TYPE_CHECKING:
    from ..authorizer.store import AclStore

log = logging.getLogger("brook.apis.delete_acls")


class DeleteAclsRequestView(Protocol):
    """What the handler reads of a DeleteAclsRequest (every served version has it)."""

    @property
    def filters(self) -> Sequence[AclFilterView]: ...


if TYPE_CHECKING:
    from kio.schema.delete_acls import v1, v2, v3

    def _served_requests_are_views(
        r1: v1.DeleteAclsRequest, r2: v2.DeleteAclsRequest, r3: v3.DeleteAclsRequest
    ) -> list[DeleteAclsRequestView]:
        return [r1, r2, r3]


@handles(ApiKey.DELETE_ACLS)
async def handle_delete_acls(ctx: RequestContext, request: DeleteAclsRequestView) -> Any:
    types = schema_module(ctx.response_type)

    def filter_result(error: ErrorCode, message: str | None, removed: list[AclBinding]) -> Any:
        return build(
            types.DeleteAclsFilterResult,
            error_code=error,
            error_message=message,
            matching_acls=tuple(
                build(
                    types.DeleteAclsMatchingAcl,
                    error_code=ErrorCode.none,
                    error_message=None,
                    resource_type=binding.pattern.resource_type,
                    resource_name=binding.pattern.name,
                    pattern_type=binding.pattern.pattern_type,
                    principal=binding.entry.principal,
                    host=binding.entry.host,
                    operation=binding.entry.operation,
                    permission_type=binding.entry.permission,
                )
                for binding in removed
            ),
        )

    def respond(results: list[Any]) -> Any:
        return build(ctx.response_type, throttle_time=NO_THROTTLE, filter_results=tuple(results))

    authorizer = authorizer_of(ctx)
    if authorizer is None:
        disabled = filter_result(ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE, [])
        return respond([disabled] * len(request.filters))
    if not authorize_cluster(ctx, AclOperation.ALTER):
        denied = filter_result(ErrorCode.cluster_authorization_failed, None, [])
        return respond([denied] * len(request.filters))
    results = []
    for wire_filter in request.filters:
        selected = filter_from(wire_filter)
        reason = (
            "Invalid filter: unknown code"
            if isinstance(selected, ErrorCode)
            else selected.invalid_reason()
        )
        if reason is not None or isinstance(selected, ErrorCode):
            log.info("DeleteAcls from %s: filter refused: %s", ctx.peer, reason)
            results.append(filter_result(ErrorCode.invalid_request, reason, []))
            continue
        try:
            removed = await _delete(authorizer, acl_store_of(ctx), selected)
        except Exception as exc:
            log.error("DeleteAcls from %s failed: %s", ctx.peer, exc)
            results.append(filter_result(ErrorCode.unknown_server_error, str(exc), []))
            continue
        for binding in removed:
            log.info("Removed ACL %s (from %s)", binding, ctx.peer)
        results.append(filter_result(ErrorCode.none, None, removed))
    authorizer.changed()
    return respond(results)


async def _delete(
    authorizer: Authorizer, store: AclStore, selected: AclBindingFilter
) -> list[AclBinding]:
    """Remove what the filter selects, resource by resource (as Kafka's deleteAcls)."""
    removed: dict[ResourcePattern, list[AclBinding]] = {}
    patterns = {binding.pattern for binding in authorizer.acls(selected)}
    for pattern in sorted(patterns):

        def without(current: Entries, pattern: ResourcePattern = pattern) -> Entries:
            # A store may apply the change more than once (a lost conditional write).
            gone = {entry for entry in current if selected.matches(AclBinding(pattern, entry))}
            removed[pattern] = [AclBinding(pattern, entry) for entry in sorted(gone)]
            return current - gone

        await store.update(pattern, without)
    return [binding for pattern in sorted(removed) for binding in removed[pattern]]
