"""Quota entities and their configs, as Kafka names and stores them.

An entity is a user, a client id, or a (user, client id) pair; either part may be the
`<default>` one. Kafka keeps them under /config/users/<user>[/clients/<client>] and
/config/clients/<client>, with names sanitized (URL-encoded) and the default spelt
`<default>` (which no sanitized name can be). Brook keys its entities the same way,
(user, client id) of sanitized names, None for a part the entity lacks, so ZooKeeper,
the local file and the precedence below all speak one language. An IP entity (KIP-612,
connection-creation rate) stands alone, under /config/ips/<ip> or /config/ips/<default>.
"""

from __future__ import annotations

import ipaddress
import math
import urllib.parse
from typing import NamedTuple

from ..config.broker_config import INT_MAX

# ClientQuotaEntity's entity types on the wire.
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
# ConfigEntityName.Default: the default entity's name in znode paths.
DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# QuotaConfigs' keys: the integral ones are LONGs (an INT for the IP key), the others
# DOUBLEs. The IP key is an IP entity's only one, and only an IP entity's.
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
    CONNECTION_CREATION_RATE: True,
}
LONG_MAX = 2**63 - 1


class QuotaEntity(NamedTuple):
    """Sanitized user and client id (DEFAULT for a default part, None for a missing one),
    or an IP address alone (DEFAULT for the default IP entity)."""

    user: str | None
    client_id: str | None
    ip: str | None = None

    @property
    def path(self) -> str:
        """The config path under /config: users/<u>[/clients/<c>], clients/<c> or ips/<ip>."""
        if self.ip is not None:
            return f"ips/{self.ip}"
        if self.user is None:
            return f"clients/{self.client_id}"
        if self.client_id is None:
            return f"users/{self.user}"
        return f"users/{self.user}/clients/{self.client_id}"

    def wire(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default) as Describe/AlterClientQuotas say it."""
        if self.ip is not None:
            return [(IP, None if self.ip == DEFAULT else self.ip)]
        parts = []
        if self.user is not None:
            parts.append((USER, desanitize(self.user)))
        if self.client_id is not None:
            parts.append((CLIENT_ID, desanitize(self.client_id)))
        return parts

    def __str__(self) -> str:
        return ", ".join(f"{kind}={name or DEFAULT}" for kind, name in self.wire())


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encoding, so any name is a valid znode name."""
    return urllib.parse.quote(name, safe="")


def desanitize(name: str) -> str | None:
    return None if name == DEFAULT else urllib.parse.unquote(name)


def entity_from_path(path: str) -> QuotaEntity | None:
    """The entity of a config path (users/a, users/a/clients/c, clients/c); None if none."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return QuotaEntity(parts[1], None)
    if len(parts) == 2 and parts[0] == "clients":
        return QuotaEntity(None, parts[1])
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return QuotaEntity(parts[1], parts[3])
    if len(parts) == 2 and parts[0] == "ips":
        return QuotaEntity(None, None, parts[1])
    return None


class QuotaError(ValueError):
    """Input Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


def entity_from_wire(parts: list[tuple[str, str | None]]) -> QuotaEntity:
    """The entity an AlterClientQuotas entry names, validated as Kafka validates it."""
    if not parts:
        raise QuotaError("Invalid empty client quota entity")
    seen: dict[str, str | None] = {}
    for kind, name in parts:
        if kind in seen:
            raise QuotaError(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaError(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise QuotaError(f"Empty {kind} not supported")
        seen[kind] = name
    if IP in seen:
        if len(seen) > 1:
            raise QuotaError(
                "Invalid quota entity combination, IP entity should not be combined with"
                " User or ClientId"
            )
        ip = seen[IP]
        if ip is None:
            return QuotaEntity(None, None, DEFAULT)
        try:
            # Kafka also takes a host name it can resolve; a quota names an address.
            return QuotaEntity(None, None, str(ipaddress.ip_address(ip)))
        except ValueError:
            raise QuotaError(f"{ip} is not a valid IP or resolvable host.") from None

    def part(kind: str) -> str | None:
        if kind not in seen:
            return None
        name = seen[kind]
        return DEFAULT if name is None else sanitize(name)

    return QuotaEntity(part(USER), part(CLIENT_ID))


def validate_value(entity: QuotaEntity, key: str, value: float) -> float:
    """A quota value as Kafka's controller validates it (ClientQuotaControlManager)."""
    integral = QUOTA_KEYS.get(key)
    if integral is None or (key == CONNECTION_CREATION_RATE) != (entity.ip is not None):
        raise QuotaError(f"Invalid configuration key {key}")
    if math.isnan(value) or value <= 0.0:
        raise QuotaError(f"Quota {key} must be greater than 0")
    if integral:
        if key == CONNECTION_CREATION_RATE and value > INT_MAX:
            raise QuotaError(f"Proposed value for {key} is too large for an INT.")
        if value > LONG_MAX:
            raise QuotaError(f"Proposed value for {key} is too large for a LONG.")
        if abs(value % 1.0) > 1e-6:
            raise QuotaError(f"{key} cannot be a fractional value.")
    return value


def format_value(key: str, value: float) -> str:
    """How the value is written in the config znode (a LONG without a fraction)."""
    return str(round(value)) if QUOTA_KEYS[key] else repr(float(value))


def parse_configs(config: dict[str, str]) -> dict[str, float]:
    """The quota keys of a config znode (which also holds a user's SCRAM credentials)."""
    found: dict[str, float] = {}
    for key, text in config.items():
        if key in QUOTA_KEYS:
            try:
                found[key] = float(text)
            except (TypeError, ValueError):
                continue
    return found


def precedence(user: str, client_id: str) -> tuple[tuple[QuotaEntity, str, str], ...]:
    """Kafka's eight levels for a request of (sanitized) user and client id, most
    specific first, each with the metric tags (user, client-id) its sensor is kept
    under: a quota set on a user alone is shared by all of that user's clients."""
    return (
        (QuotaEntity(user, client_id), user, client_id),
        (QuotaEntity(user, DEFAULT), user, client_id),
        (QuotaEntity(user, None), user, ""),
        (QuotaEntity(DEFAULT, client_id), user, client_id),
        (QuotaEntity(DEFAULT, DEFAULT), user, client_id),
        (QuotaEntity(DEFAULT, None), user, ""),
        (QuotaEntity(None, client_id), "", client_id),
        (QuotaEntity(None, DEFAULT), "", client_id),
    )


class QuotaResolver:
    """The quota of one key (producer_byte_rate, ...) for a (sanitized) user and client id
    by Kafka's precedence, with the metric tags its sensor is kept under; remembered per
    sender until the configs change."""

    __slots__ = ("_configs", "_resolved", "key")

    def __init__(self, key: str) -> None:
        self.key = key
        self._configs: dict[QuotaEntity, dict[str, float]] = {}
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}

    def update(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        self._configs = configs
        self._resolved = {}

    def quota(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """The metric tags and quota of a user and client id, if any."""
        found = self._resolved.get((user, client_id), False)
        if found is not False:
            return found  # type: ignore[return-value]
        resolved = None
        for entity, tag_user, tag_client in precedence(user, client_id):
            value = self._configs.get(entity, {}).get(self.key)
            if value is not None:
                resolved = ((tag_user, tag_client), value)
                break
        self._resolved[(user, client_id)] = resolved
        return resolved
