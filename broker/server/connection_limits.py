"""Kafka's per-address connection limit (ConnectionQuotas' counts): at most
`max.connections.per.ip` connections open at once from one address, or the address's own
limit from `max.connections.per.ip.overrides`. A new connection over it is closed at once,
with Kafka's log line. Both keys are dynamic: the limit is read from the config in force
at each new connection (the overrides parsed again only when their text changes)."""

from __future__ import annotations

from typing import Any

from ..config.broker_config import parse_connection_overrides


class ConnectionLimits:
    __slots__ = ("_overrides", "_overrides_text", "counts")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}  # address -> connections open
        self._overrides_text = ""
        self._overrides: dict[str, int] = {}

    def admit(self, address: str, config: Any) -> int | None:
        """Count a new connection from `address`: None when it may stay, else the limit it
        would break (and it is not counted)."""
        count = self.counts.get(address, 0)
        limit = self._limit(address, config)
        if count >= limit:
            return limit
        self.counts[address] = count + 1
        return None

    def release(self, address: str) -> None:
        count = self.counts.get(address, 0) - 1
        if count > 0:
            self.counts[address] = count
        else:
            self.counts.pop(address, None)

    def _limit(self, address: str, config: Any) -> int:
        text = config["max.connections.per.ip.overrides"] or ""
        if text != self._overrides_text:
            self._overrides = parse_connection_overrides(text)  # validated with the config
            self._overrides_text = text
        limit = self._overrides.get(address)
        return int(config["max.connections.per.ip"]) if limit is None else limit
