"""AlterClientQuotas (key 49), v0-v1: set or remove quota keys of user, client-id,
(user, client-id) and IP entities, `<default>` ones included (a null name).

Each entry is validated as Kafka validates it (entity types, keys, values: positive,
whole for the byte rates) and answers its own error; with validate_only nothing is
stored. Needs AlterConfigs on the cluster. The valid entries are stored together
(ZooKeeper's config znodes with a change notification each, or the local file) and are
in force on this broker when the response goes out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..quotas.entities import QuotaEntity, QuotaError, entity_from_wire, validate_value
from ..server.request_context import RequestContext
from . import NO_THROTTLE, handles, schema_module

log = logging.getLogger("brook.apis.alter_client_quotas")


class AlterClientQuotasEntityDataView(Protocol):
    """A part of an entity (Kafka's EntityData): its type and name (null: the default)."""

    @property
    def entity_type(self) -> str: ...
    @property
    def entity_name(self) -> str | None: ...


class AlterClientQuotasOpDataView(Protocol):
    @property
    def key(self) -> str: ...
    @property
    def value(self) -> float: ...
    @property
    def remove(self) -> bool: ...


class AlterClientQuotasEntryDataView(Protocol):
    @property
    def entity(self) -> Sequence[AlterClientQuotasEntityDataView]: ...
    @property
    def ops(self) -> Sequence[AlterClientQuotasOpDataView]: ...


class AlterClientQuotasRequestView(Protocol):
    """What the handler reads of an AlterClientQuotasRequest (every served version has it)."""

    @property
    def entries(self) -> Sequence[AlterClientQuotasEntryDataView]: ...
    @property
    def validate_only(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.alter_client_quotas import v0, v1

    def _served_requests_are_views(
        r0: v0.AlterClientQuotasRequest, r1: v1.AlterClientQuotasRequest
    ) -> list[AlterClientQuotasRequestView]:
        return [r0, r1]


@handles(ApiKey.ALTER_CLIENT_QUOTAS)
async def handle_alter_client_quotas(
    ctx: RequestContext, request: AlterClientQuotasRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    allowed = authorize_cluster(ctx, AclOperation.ALTER_CONFIGS)
    results: list[tuple[Sequence[AlterClientQuotasEntityDataView], ErrorCode, str | None]] = []
    changes: dict[QuotaEntity, dict[str, float | None]] = {}
    for entry in request.entries:
        wire = [(part.entity_type, part.entity_name) for part in entry.entity]
        if not allowed:
            results.append((entry.entity, ErrorCode.cluster_authorization_failed, None))
            continue
        try:
            entity = entity_from_wire(wire)
            ops: dict[str, float | None] = {}
            for op in entry.ops:
                # As Kafka: a removal is not validated (removing what is not set is a no-op).
                ops[op.key] = None if op.remove else validate_value(entity, op.key, op.value)
        except QuotaError as exc:
            log.warning("AlterClientQuotas from %s: %s refused: %s", ctx.who, wire, exc)
            results.append((entry.entity, ErrorCode.invalid_request, str(exc)))
            continue
        results.append((entry.entity, ErrorCode.none, None))
        changes.setdefault(entity, {}).update(ops)
    if changes and not request.validate_only:
        await ctx.services.quota_store.alter(changes)
        log.info(
            "Client quotas altered by %s: %s",
            ctx.principal,
            "; ".join(f"{entity}: {ops}" for entity, ops in changes.items()),
        )
    return ctx.response_type(
        throttle_time=NO_THROTTLE,
        entries=tuple(
            types.EntryData(
                error_code=error,
                error_message=message,
                entity=tuple(
                    types.EntityData(entity_type=part.entity_type, entity_name=part.entity_name)
                    for part in entity
                ),
            )
            for entity, error, message in results
        ),
    )
