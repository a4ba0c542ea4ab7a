"""DescribeClientQuotas and AlterClientQuotas (v1), at any broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from kio.schema.errors import ErrorCode
from kio.static.primitive import f64, i8

from ..wire_client import ApiError, KafkaCluster

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# (quota entity type, name or None for the default), e.g. [("user", "alice")]
Entity = list[tuple[str, str | None]]


def describe_client_quotas(
    cluster: KafkaCluster, entity: Entity, unnamed: list[str]
) -> list[tuple[Entity, dict[str, float]]]:
    """The quotas of the entity, or, for each type in `unnamed`, of every entity that
    names one; strict: only entities of exactly these types."""
    from kio.schema.describe_client_quotas.v1.request import (
        ComponentData,
        DescribeClientQuotasRequest,
    )

    components = [
        ComponentData(
            entity_type=kind,
            match_type=i8(MATCH_EXACT if name is not None else MATCH_DEFAULT),
            match=name,
        )
        for kind, name in entity
    ] + [
        ComponentData(entity_type=kind, match_type=i8(MATCH_SPECIFIED), match=None)
        for kind in unnamed
    ]
    response = cluster.request_any(
        DescribeClientQuotasRequest(components=tuple(components), strict=True)
    )
    if response.error_code != ErrorCode.none:
        raise ApiError(response.error_code, response.error_message)
    return [
        (
            [(e.entity_type, e.entity_name) for e in entry.entity],
            {value.key: value.value for value in entry.values},
        )
        for entry in response.entries or ()
    ]


def alter_client_quotas(
    cluster: KafkaCluster, entity: Entity, sets: Mapping[str, float], deletes: list[str]
) -> ApiError | None:
    """Set and remove quotas of one entity: its error (None: done)."""
    from kio.schema.alter_client_quotas.v1.request import (
        AlterClientQuotasRequest,
        EntityData,
        EntryData,
        OpData,
    )

    # kio's f64 is a finite float; a NaN or infinity is sent all the same, as
    # kafka-configs.sh sends it, for the broker to judge (f64() would raise here).
    ops = [OpData(key=key, value=cast(f64, value), remove=False) for key, value in sets.items()]
    ops += [OpData(key=key, value=f64(0.0), remove=True) for key in deletes]
    response = cluster.request_any(
        AlterClientQuotasRequest(
            entries=(
                EntryData(
                    entity=tuple(EntityData(entity_type=k, entity_name=n) for k, n in entity),
                    ops=tuple(ops),
                ),
            ),
            validate_only=False,
        )
    )
    for entry in response.entries:
        if entry.error_code != ErrorCode.none:
            return ApiError(entry.error_code, entry.error_message)
    return None
