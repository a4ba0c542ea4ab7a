"""`brook configs --entity-type users|clients|ips`: client quotas, as kafka-configs.sh
manages them (through AlterClientQuotas and DescribeClientQuotas).

    brook configs --bootstrap-server HOST --alter --entity-type clients --entity-name app \\
        --add-config producer_byte_rate=1048576,consumer_byte_rate=2097152
    brook configs --bootstrap-server HOST --alter --entity-type users --entity-default \\
        --add-config request_percentage=50
    brook configs --bootstrap-server HOST --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-name app --delete-config producer_byte_rate
    brook configs --bootstrap-server HOST --describe --entity-type users [--entity-name alice]

librdkafka has no client-quota admin calls, so the requests go over Brook's own wire
client to the first bootstrap server, over TLS and SASL as --command-config says.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, cast

from .common import ToolError, wire_security

if TYPE_CHECKING:
    from brook.broker.client import BlockingClient

# kafka-configs.sh's entity types and the quota entity types they stand for.
QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
TITLES = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# (quota entity type, name or None for the default)
Entity = list[tuple[str, str | None]]


def _client(args: argparse.Namespace) -> BlockingClient:
    """The wire client the quota requests go over (librdkafka has no client-quota admin
    calls), secured as --command-config says."""
    from brook.broker.client import BlockingClient
    from brook.broker.security.sasl_client import SaslAuthenticationError

    security = wire_security(args)
    first = args.bootstrap_server.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    try:
        return BlockingClient(
            host or "localhost", int(port), "brook-configs", args.timeout, security
        )
    except SaslAuthenticationError as exc:
        raise ToolError(f"authentication to {first} failed: {exc}") from None
    except (OSError, ValueError) as exc:
        raise ToolError(f"cannot connect to {first}: {exc}") from None


def _entity_text(entity: Entity) -> str:
    return ", ".join(
        f"{TITLES[kind]} '{name}'" if name is not None else f"the default {TITLES[kind]}"
        for kind, name in entity
    )


def alter(
    args: argparse.Namespace, entity: Entity, sets: dict[str, str], deletes: list[str]
) -> int:
    from kio.schema.alter_client_quotas.v1.request import (
        AlterClientQuotasRequest,
        EntityData,
        EntryData,
        OpData,
    )
    from kio.static.primitive import f64

    ops = []
    for key, text in sets.items():
        try:
            value = float(text)
        except ValueError:
            raise ToolError(f"{key}={text}: a quota is a number", 2) from None
        # kio's f64 is a finite float; a NaN or infinity is sent all the same, as
        # kafka-configs.sh sends it, for the broker to judge (f64() would raise here).
        ops.append(OpData(key=key, value=cast(f64, value), remove=False))
    ops += [OpData(key=key, value=f64(0.0), remove=True) for key in deletes]
    request = AlterClientQuotasRequest(
        entries=(
            EntryData(
                entity=tuple(EntityData(entity_type=k, entity_name=n) for k, n in entity),
                ops=tuple(ops),
            ),
        ),
        validate_only=False,
    )
    with _client(args) as client:
        response = client.request(request)
    for entry in response.entries:
        if entry.error_code != 0:
            from brook.protocol.errors import ErrorCode

            raise ToolError(
                f"cannot alter the quotas of {_entity_text(entity)}:"
                f" {ErrorCode(entry.error_code).name.upper()}: {entry.error_message or ''}".rstrip()
            )
    return 0


def describe(args: argparse.Namespace, entity: Entity, types: list[str]) -> None:
    """Print the quotas of the entity (or, for a type without a name, of every entity of
    it), one line each as kafka-configs.sh prints them."""
    from kio.schema.describe_client_quotas.v1.request import (
        ComponentData,
        DescribeClientQuotasRequest,
    )
    from kio.static.primitive import i8

    components = [
        ComponentData(
            entity_type=kind,
            match_type=i8(MATCH_EXACT if name is not None else MATCH_DEFAULT),
            match=name,
        )
        for kind, name in entity
    ] + [
        ComponentData(entity_type=kind, match_type=i8(MATCH_SPECIFIED), match=None)
        for kind in types
    ]
    request = DescribeClientQuotasRequest(components=tuple(components), strict=True)
    with _client(args) as client:
        response = client.request(request)
    if response.error_code != 0:
        from brook.protocol.errors import ErrorCode

        raise ToolError(
            f"cannot describe client quotas: {ErrorCode(response.error_code).name.upper()}:"
            f" {response.error_message or ''}".rstrip()
        )
    for entry in response.entries or ():
        described = [(e.entity_type, e.entity_name) for e in entry.entity]
        values = ", ".join(f"{v.key}={v.value}" for v in entry.values)
        print(f"Quota configs for {_entity_text(described)} are {values}")
