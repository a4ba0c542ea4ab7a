"""Group configs: per-group overrides of the broker's group settings (Kafka's GroupConfig).

The GROUP config resource (type 32) of DescribeConfigs and (Incremental)AlterConfigs
sets, for one group id, what its members get: the session timeout and heartbeat
interval of its consumer-protocol members (KIP-848), and the settings of a share group
(KIP-932: its members' session and heartbeat, how long a record stays acquired, how
often it is delivered, how many records a partition keeps acquired, where a new share
group starts reading, and its isolation level). A group without an override takes the
broker's value (`group.consumer.*`, `group.share.*`; the two string keys have Kafka's
defaults). A number must lie within the broker's bounds, Kafka's message: "consumer.
session.timeout.ms must be in the range 45000 to 60000 inclusive."; some have a floor of
their own first ("Value must be at least 1000"). An unknown name is refused ("Unknown
group config name: x"). The configs are kept where the cluster keeps its configs
(group_config_store.py); a consumer group's apply from its next heartbeat.

Kafka 4.4 has more group keys (streams.*, the assignment intervals, share.renew.
acknowledge.enable): not served, README lists them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from brook.protocol.errors import InvalidConfigError

from ..config.describe import CONFIG_TYPES, ConfigEntry, ConfigSource, Synonym

GROUP_CONFIG_RESOURCE = 32
# Java's Duration.parse form, as share.auto.offset.reset's by_duration takes it.
_DURATION = re.compile(
    r"P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?"
)


@dataclass(frozen=True)
class GroupConfigKey:
    """A number bounded by the broker's min and max keys (its default the broker's
    `broker_key`), or, with `choices`, a string with a default of its own."""

    name: str
    doc: str
    broker_key: str = ""
    min_key: str = ""
    max_key: str = ""
    at_least: int = 1
    default: str = ""
    check: Callable[[str], str | None] | None = None

    @property
    def is_number(self) -> bool:
        return self.check is None


def duration_ms(text: str) -> int:
    """Milliseconds of a duration in Java's Duration.parse form (PnDTnHnMn.nS), as
    share.auto.offset.reset's by_duration gives it (checked before it is stored)."""
    found = _DURATION.fullmatch(text)
    if found is None:
        raise ValueError(f"not a duration: {text!r}")
    parts = found.groupdict()
    seconds = (
        int(parts["days"] or 0) * 86400
        + int(parts["hours"] or 0) * 3600
        + int(parts["minutes"] or 0) * 60
        + float(parts["seconds"] or 0)
    )
    return int(seconds * 1000)


def _check_auto_offset_reset(value: str) -> str | None:
    if value in ("earliest", "latest"):
        return None
    if value.startswith("by_duration:"):
        duration = _DURATION.fullmatch(value[len("by_duration:") :])
        if duration is not None and any(duration.groupdict().values()):
            return None
    return (
        f"Invalid value `{value}` for configuration share.auto.offset.reset. The value must be"
        " either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."
    )


def _check_isolation_level(value: str) -> str | None:
    if value in ("read_committed", "read_uncommitted"):
        return None
    return "String must be one of: read_committed, read_uncommitted"


def _bounded(
    name: str, doc: str, broker: str, minimum: str, maximum: str, at_least: int = 1
) -> GroupConfigKey:
    return GroupConfigKey(name, doc, broker, minimum, maximum, at_least)


GROUP_CONFIG_KEYS = {
    key.name: key
    for key in (
        _bounded(
            "consumer.session.timeout.ms",
            "The session timeout of the group's consumer-protocol members.",
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
        ),
        _bounded(
            "consumer.heartbeat.interval.ms",
            "The heartbeat interval of the group's consumer-protocol members.",
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
        ),
        _bounded(
            "share.session.timeout.ms",
            "The session timeout of the share group's members.",
            "group.share.session.timeout.ms",
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
        ),
        _bounded(
            "share.heartbeat.interval.ms",
            "The heartbeat interval of the share group's members.",
            "group.share.heartbeat.interval.ms",
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
        ),
        _bounded(
            "share.record.lock.duration.ms",
            "How long a record delivered to a share group's member stays acquired by it.",
            "group.share.record.lock.duration.ms",
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
            at_least=1000,
        ),
        _bounded(
            "share.delivery.count.limit",
            "How often a record is delivered to the share group before it is archived.",
            "group.share.delivery.count.limit",
            "group.share.min.delivery.count.limit",
            "group.share.max.delivery.count.limit",
            at_least=2,
        ),
        _bounded(
            "share.partition.max.record.locks",
            "How many records of a partition the share group keeps acquired at most.",
            "group.share.partition.max.record.locks",
            "group.share.min.partition.max.record.locks",
            "group.share.max.partition.max.record.locks",
            at_least=100,
        ),
        GroupConfigKey(
            "share.auto.offset.reset",
            "Where a share group with no start offset starts: earliest, latest, or"
            " by_duration:<PnDTnHnMn.nS> (the first record that recent).",
            default="latest",
            check=_check_auto_offset_reset,
        ),
        GroupConfigKey(
            "share.isolation.level",
            "Whether a share group reads records of transactions not yet committed.",
            default="read_uncommitted",
            check=_check_isolation_level,
        ),
    )
}


class GroupConfigs:
    """Every group's overrides, as the store last published them."""

    def __init__(self, broker_config: Callable[[], Any]) -> None:
        self._broker_config = broker_config
        self._overrides: dict[str, dict[str, str]] = {}

    def update(self, overrides: Mapping[str, Mapping[str, str]]) -> None:
        """The stored overrides, all of them (what the store read or was told)."""
        self._overrides = {
            group: {name: str(value) for name, value in config.items() if name in GROUP_CONFIG_KEYS}
            for group, config in overrides.items()
        }

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self._overrides.get(group_id, {}))

    def groups(self) -> list[str]:
        return sorted(self._overrides)

    def text(self, group_id: str, name: str) -> str:
        """The value in force for the group, as text: its override, else the default."""
        override = self._overrides.get(group_id, {}).get(name)
        return override if override is not None else self._default(GROUP_CONFIG_KEYS[name])

    def value(self, group_id: str, name: str) -> int:
        """A number's value in force for the group."""
        return int(self.text(group_id, name))

    def _default(self, key: GroupConfigKey) -> str:
        if key.is_number:
            return str(self._broker_config()[key.broker_key])
        return key.default

    def validate(self, props: Mapping[str, str | None]) -> dict[str, str]:
        """A group's whole set of overrides, checked as Kafka's GroupConfig checks it;
        the same, as stored (InvalidConfigError with Kafka's message otherwise)."""
        config = self._broker_config()
        checked = {}
        for name, text in props.items():
            key = GROUP_CONFIG_KEYS.get(name)
            if key is None:
                raise InvalidConfigError(f"Unknown group config name: {name}")
            value = str(text).strip()
            if not key.is_number:
                assert key.check is not None
                rule = key.check(value)
                if rule is not None:
                    raise InvalidConfigError(
                        f"Invalid value {value} for configuration {name}: {rule}"
                    )
                checked[name] = value
                continue
            try:
                number = int(value)
            except ValueError:
                raise InvalidConfigError(
                    f"Invalid value {text} for configuration {name}: Not a number of type INT"
                ) from None
            if number < key.at_least:
                raise InvalidConfigError(
                    f"Invalid value {number} for configuration {name}: Value must be at least"
                    f" {key.at_least}"
                )
            low, high = config[key.min_key], config[key.max_key]
            if not low <= number <= high:
                raise InvalidConfigError(f"{name} must be in the range {low} to {high} inclusive.")
            checked[name] = str(number)
        return checked

    def describe(self, group_id: str) -> list[ConfigEntry]:
        """Every group key with the value in force, as Kafka describes a group: its own
        value first where set, then the default (a DEFAULT_CONFIG synonym under the
        broker key's name, or the group key's own for the string keys)."""
        own = self._overrides.get(group_id, {})
        entries = []
        for name in sorted(GROUP_CONFIG_KEYS):
            key = GROUP_CONFIG_KEYS[name]
            default = Synonym(
                key.broker_key or name, self._default(key), ConfigSource.DEFAULT_CONFIG
            )
            synonyms: tuple[Synonym, ...] = (default,)
            value = self._default(key)
            if name in own:
                value = own[name]
                synonyms = (Synonym(name, value, ConfigSource.GROUP_CONFIG), default)
            entries.append(
                ConfigEntry(
                    name=name,
                    value=value,
                    source=synonyms[0].source,
                    read_only=False,
                    synonyms=synonyms,
                    config_type=CONFIG_TYPES["int" if key.is_number else "string"],
                    documentation=key.doc,
                )
            )
        return entries
