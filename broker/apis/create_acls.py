"""CreateAcls (key 30), v1-v3: ACLs added to the authorizer's store, one result per
creation in request order. Needs Alter on the cluster; SECURITY_DISABLED without an
authorizer; an invalid ACL gets INVALID_REQUEST with Kafka's reason and is not kept."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import (
    AccessControlEntry,
    AclBinding,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    invalid_binding_reason,
)
from ..authorizer.authorizer import Entries
from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module
from .acl_requests import SECURITY_DISABLED_MESSAGE, acl_store_of, authorizer_of

log = logging.getLogger("brook.apis.create_acls")


class AclCreationView(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def resource_pattern_type(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


class CreateAclsRequestView(Protocol):
    """What the handler reads of a CreateAclsRequest (every served version has it)."""

    @property
    def creations(self) -> Sequence[AclCreationView]: ...


if TYPE_CHECKING:
    from kio.schema.create_acls import v1, v2, v3

    def _served_requests_are_views(
        r1: v1.CreateAclsRequest, r2: v2.CreateAclsRequest, r3: v3.CreateAclsRequest
    ) -> list[CreateAclsRequestView]:
        return [r1, r2, r3]


@handles(ApiKey.CREATE_ACLS)
async def handle_create_acls(ctx: RequestContext, request: CreateAclsRequestView) -> Any:
    types = schema_module(ctx.response_type)

    def result(error: ErrorCode, message: str | None = None) -> Any:
        return build(types.AclCreationResult, error_code=error, error_message=message)

    def respond(results: list[Any]) -> Any:
        return build(ctx.response_type, throttle_time=NO_THROTTLE, results=tuple(results))

    authorizer = authorizer_of(ctx)
    if authorizer is None:
        disabled = result(ErrorCode.security_disabled, SECURITY_DISABLED_MESSAGE)
        return respond([disabled] * len(request.creations))
    if not authorize_cluster(ctx, AclOperation.ALTER):
        denied = result(ErrorCode.cluster_authorization_failed)
        return respond([denied] * len(request.creations))
    results: list[Any] = [None] * len(request.creations)
    by_pattern: dict[ResourcePattern, list[tuple[int, AclBinding]]] = defaultdict(list)
    for index, creation in enumerate(request.creations):
        binding = _binding(creation)
        reason = invalid_binding_reason(binding) if binding is not None else None
        if binding is None or reason is not None:
            reason = reason or "ACL binding contains unknown elements"
            log.info("CreateAcls from %s: %s refused: %s", ctx.peer, binding or creation, reason)
            results[index] = result(ErrorCode.invalid_request, reason)
            continue
        by_pattern[binding.pattern].append((index, binding))
    store = acl_store_of(ctx)
    for pattern, bindings in by_pattern.items():
        added: Entries = frozenset(binding.entry for _, binding in bindings)

        def with_added(current: Entries, added: Entries = added) -> Entries:
            return current | added

        try:
            await store.update(pattern, with_added)
        except Exception as exc:  # the store's failure is this creation's error
            log.error(
                "CreateAcls from %s: storing the ACLs of %s failed: %s", ctx.peer, pattern, exc
            )
            for index, _ in bindings:
                results[index] = result(ErrorCode.unknown_server_error, str(exc))
            continue
        for index, binding in bindings:
            log.info("Added ACL %s (from %s)", binding, ctx.peer)
            results[index] = result(ErrorCode.none)
    authorizer.changed()
    return respond(results)


def _binding(creation: AclCreationView) -> AclBinding | None:
    """The ACL a creation asks for, or None when a code is not one of Kafka's."""
    try:
        return AclBinding(
            ResourcePattern(
                ResourceType(creation.resource_type),
                creation.resource_name,
                PatternType(creation.resource_pattern_type),
            ),
            AccessControlEntry(
                creation.principal,
                creation.host,
                AclOperation(creation.operation),
                PermissionType(creation.permission_type),
            ),
        )
    except ValueError:
        return None
