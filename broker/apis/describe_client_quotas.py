"""DescribeClientQuotas (key 48), v0-v1: the quota configs of the entities a filter
matches, as the broker holds them (read from ZooKeeper or the local file).

A filter component names an entity type (user, client-id) and matches an exact name
(0), the default entity (1) or any entity of the type (2); a strict filter also leaves
out entities with types it does not name. Needs DescribeConfigs on the cluster.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..quotas.entities import CLIENT_ID, IP, USER, QuotaError
from ..server.request_context import RequestContext
from . import NO_THROTTLE, handles, schema_module

log = logging.getLogger("brook.apis.describe_client_quotas")

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# (entity type, match type, exact name) of each component.
Filter = list[tuple[str, int, str | None]]


class DescribeClientQuotasComponentDataView(Protocol):
    @property
    def entity_type(self) -> str: ...
    @property
    def match_type(self) -> int: ...
    @property
    def match(self) -> str | None: ...


class DescribeClientQuotasRequestView(Protocol):
    """What the handler reads of a DescribeClientQuotasRequest (every served version has
    it)."""

    @property
    def components(self) -> Sequence[DescribeClientQuotasComponentDataView]: ...
    @property
    def strict(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.describe_client_quotas import v0, v1

    def _served_requests_are_views(
        r0: v0.DescribeClientQuotasRequest, r1: v1.DescribeClientQuotasRequest
    ) -> list[DescribeClientQuotasRequestView]:
        return [r0, r1]


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS)
def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequestView
) -> Any:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE_CONFIGS):
        return _error(ctx, ErrorCode.cluster_authorization_failed, None)
    try:
        components = _filter(request.components)
    except QuotaError as exc:
        log.warning("DescribeClientQuotas from %s refused: %s", ctx.who, exc)
        return _error(ctx, ErrorCode.invalid_request, str(exc))
    types = schema_module(ctx.response_type)
    entries = []
    for entity, values in sorted(ctx.services.quotas.configs.items(), key=lambda e: e[0].path):
        parts = dict(entity.wire())
        if not _matches(parts, components, request.strict):
            continue
        entries.append(
            types.EntryData(
                entity=tuple(
                    types.EntityData(entity_type=kind, entity_name=name)
                    for kind, name in entity.wire()
                ),
                values=tuple(
                    types.ValueData(key=key, value=float(value))
                    for key, value in sorted(values.items())
                ),
            )
        )
    return ctx.response_type(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        entries=tuple(entries),
    )


def _error(ctx: RequestContext, error: ErrorCode, message: str | None) -> Any:
    return ctx.response_type(
        throttle_time=NO_THROTTLE, error_code=error, error_message=message, entries=None
    )


def _filter(components: Iterable[DescribeClientQuotasComponentDataView]) -> Filter:
    """The components, validated as Kafka validates them."""
    found: Filter = []
    seen: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise QuotaError("Unexpected empty filter component entity")
        if kind in seen:
            raise QuotaError(f"Duplicate {kind} filter component entity type")
        seen.add(kind)
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Custom entity type '{kind}' not supported")
        match_type = component.match_type
        if match_type == MATCH_EXACT:
            if component.match is None:
                raise QuotaError(f"Exact match of {kind} needs a name")
        elif match_type not in (MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaError(f"Unexpected match type: {match_type}")
        found.append((kind, match_type, component.match))
    if IP in seen and len(seen) > 1:
        raise QuotaError(
            "Invalid entity filter component combination, IP filter component should not be"
            " used with User or ClientId filter component."
        )
    return found


def _matches(parts: dict[str, str | None], components: Filter, strict: bool) -> bool:
    for kind, match_type, name in components:
        if kind not in parts:
            return False
        if match_type == MATCH_EXACT and parts[kind] != name:
            return False
        if match_type == MATCH_DEFAULT and parts[kind] is not None:
            return False
    return not strict or set(parts) <= {kind for kind, _, _ in components}
