"""`brook configs --entity-type users|clients|ips`: client quotas, as kafka-configs.sh
manages them (through AlterClientQuotas and DescribeClientQuotas).

    brook configs --bootstrap-server HOST --alter --entity-type clients --entity-name app \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    brook configs --bootstrap-server HOST --alter --entity-type users --entity-default \\
        --add-config request_percentage=50
    brook configs --bootstrap-server HOST --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --delete-config producer_byte_rate
    brook configs --bootstrap-server HOST --describe --entity-type users [--entity-name alice]

The requests go to any broker (broker/tools/admin/client_quotas.py), over TLS and SASL
as --command-config says.
"""

from __future__ import annotations

import argparse

from .admin.client_quotas import Entity
from .common import ToolError, connect

CLIENT_ID = "brook-configs"
# kafka-configs.sh's entity types and the quota entity types they stand for.
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
TITLES = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}

__all__ = ["QUOTA_ENTITY_TYPES", "Entity", "alter", "describe"]


def _entity_text(entity: Entity) -> str:
    return ", ".join(
        f"{TITLES[kind]} '{name}'" if name is not None else f"the default {TITLES[kind]}"
        for kind, name in entity
    )


def alter(
    args: argparse.Namespace, entity: Entity, sets: dict[str, str], deletes: list[str]
) -> int:
    from .admin.client_quotas import alter_client_quotas

    values = {}
    for key, text in sets.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise ToolError(f"{key}={text}: a quota is a number", 2) from None
    with connect(args, CLIENT_ID) as cluster:
        error = alter_client_quotas(cluster, entity, values, deletes)
    if error is not None:
        raise ToolError(
            f"cannot alter the quotas of {_entity_text(entity)}:"
            f" {error.code.name.upper()}: {error.error_message or ''}".rstrip()
        )
    return 0


def describe(args: argparse.Namespace, entity: Entity, types: list[str]) -> None:
    """Print the quotas of the entity (or, for a type without a name, of every entity of
    it), one line each as kafka-configs.sh prints them."""
    from .admin.client_quotas import describe_client_quotas
    from .wire_client import ApiError

    with connect(args, CLIENT_ID) as cluster:
        try:
            entries = describe_client_quotas(cluster, entity, types)
        except ApiError as exc:
            raise ToolError(
                f"cannot describe client quotas: {exc.code.name.upper()}:"
                f" {exc.error_message or ''}".rstrip()
            ) from None
    for described, quotas in entries:
        values = ", ".join(f"{key}={value}" for key, value in quotas.items())
        print(f"Quota configs for {_entity_text(described)} are {values}")
