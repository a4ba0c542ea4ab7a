"""Group configs: per-group overrides of the broker's group settings (Kafka's GroupConfig).

The GROUP config resource (type 32) of DescribeConfigs and (Incremental)AlterConfigs
sets, for one group id, the session timeout and heartbeat interval its consumer-group
members (KIP-848) get; a group without an override takes the broker's
group.consumer.* value. Each value must lie within the broker's bounds (Kafka's
message: "consumer.session.timeout.ms must be in the range 45000 to 60000 inclusive.").
An unknown name is refused ("Unknown group config name: x"). The configs are kept
where the cluster keeps its configs (group_config_store.py) and apply from the next
heartbeat.

Kafka 4.4 has more group keys (share.*, streams.*, consumer.assignment.interval.ms);
those of share groups come with share groups; the others are not served and README
lists them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from brook.protocol.errors import InvalidConfigError

from ..config.describe import CONFIG_TYPES, ConfigEntry, ConfigSource, Synonym

GROUP_CONFIG_RESOURCE = 32


@dataclass(frozen=True)
class GroupConfigKey:
    name: str
    broker_key: str  # the broker's default for every group
    min_key: str
    max_key: str
    doc: str


GROUP_CONFIG_KEYS = {
    key.name: key
    for key in (
        GroupConfigKey(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
            "The session timeout of the group's consumer-protocol members.",
        ),
        GroupConfigKey(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            "The heartbeat interval of the group's consumer-protocol members.",
        ),
    )
}


class GroupConfigs:
    """Every group's overrides, as the store last published them."""

    def __init__(self, broker_config: Callable[[], Any]) -> None:
        self._broker_config = broker_config
        self._overrides: dict[str, dict[str, int]] = {}

    def update(self, overrides: Mapping[str, Mapping[str, str]]) -> None:
        """The stored overrides, all of them (what the store read or was told)."""
        self._overrides = {
            group: {name: int(value) for name, value in config.items() if name in GROUP_CONFIG_KEYS}
            for group, config in overrides.items()
        }

    def overrides(self, group_id: str) -> dict[str, int]:
        return dict(self._overrides.get(group_id, {}))

    def groups(self) -> list[str]:
        return sorted(self._overrides)

    def value(self, group_id: str, name: str) -> int:
        """The value in force for the group: its override, else the broker's."""
        override = self._overrides.get(group_id, {}).get(name)
        if override is not None:
            return override
        return int(self._broker_config()[GROUP_CONFIG_KEYS[name].broker_key])

    def validate(self, props: Mapping[str, str | None]) -> dict[str, str]:
        """A group's whole set of overrides, checked as Kafka's GroupConfig checks it;
        the same, as stored (InvalidConfigError with Kafka's message otherwise)."""
        config = self._broker_config()
        checked = {}
        for name, text in props.items():
            key = GROUP_CONFIG_KEYS.get(name)
            if key is None:
                raise InvalidConfigError(f"Unknown group config name: {name}")
            try:
                value = int(str(text).strip())
            except ValueError:
                raise InvalidConfigError(
                    f"Invalid value {text} for configuration {name}: Not a number of type INT"
                ) from None
            low, high = config[key.min_key], config[key.max_key]
            if not low <= value <= high:
                raise InvalidConfigError(f"{name} must be in the range {low} to {high} inclusive.")
            checked[name] = str(value)
        return checked

    def describe(self, group_id: str) -> list[ConfigEntry]:
        """Every group key with the value in force, as Kafka describes a group: its own
        value first where set, then the broker's (a DEFAULT_CONFIG synonym under the
        broker key's name)."""
        config = self._broker_config()
        own = self._overrides.get(group_id, {})
        entries = []
        for name in sorted(GROUP_CONFIG_KEYS):
            key = GROUP_CONFIG_KEYS[name]
            default = Synonym(
                key.broker_key, str(config[key.broker_key]), ConfigSource.DEFAULT_CONFIG
            )
            synonyms: tuple[Synonym, ...] = (default,)
            value = str(config[key.broker_key])
            if name in own:
                value = str(own[name])
                synonyms = (Synonym(name, value, ConfigSource.GROUP_CONFIG), default)
            entries.append(
                ConfigEntry(
                    name=name,
                    value=value,
                    source=synonyms[0].source,
                    read_only=False,
                    synonyms=synonyms,
                    config_type=CONFIG_TYPES["int"],
                    documentation=key.doc,
                )
            )
        return entries
