"""What DescribeConfigs reports for each key: value, source, synonyms, type, as Kafka does.

A key's synonyms are the places its value could come from, most important first: the
topic's own override, then for each broker key that stands for it the dynamic
per-broker value, the dynamic cluster default, the static value and Kafka's default.
The source of a key is that of its first synonym. As in Kafka, the list starts at the
described broker key itself: describing `retention.ms` where only `log.retention.hours`
is set lists no synonym, since `log.retention.ms` comes first in that group.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .broker_config import BROKER_CONFIGS
from .dynamic import DYNAMIC_BROKER_CONFIGS, DynamicBrokerConfig
from .topic_config import BROKER_SYNONYMS, TOPIC_CONFIGS
from .values import config_to_string


class ConfigSource(enum.IntEnum):
    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8  # a group's own value (Kafka's tools print DYNAMIC_GROUP_CONFIG)


# DescribeConfigs v3+ config_type: Kafka's ConfigDef types by id.
CONFIG_TYPES = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "long": 5,
    "double": 6,
    "list": 7,
    "password": 9,
}
UNKNOWN_TYPE = 0

# Broker keys that stand for one setting, first the one that wins when several are set.
_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
# log.flush.interval.ms falls back to the scheduler interval, but not the other way.
_ONE_WAY_SYNONYMS = {
    "log.flush.interval.ms": ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
}


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    synonyms: tuple[Synonym, ...]
    config_type: int
    documentation: str | None
    is_sensitive: bool = False  # a password-type key: its value is never shown


def broker_synonyms(name: str) -> tuple[str, ...]:
    """The broker keys that stand for the same setting as `name`, in precedence order."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return group
    return _ONE_WAY_SYNONYMS.get(name, (name,))


class ConfigDescriber:
    """Describes topic and broker configs from the broker's static and dynamic layers.

    Made per request: it takes the layers as they are when it is made.
    """

    def __init__(self, dynamic: DynamicBrokerConfig) -> None:
        self.dynamic = dynamic
        self._layer_values = self._layers()

    def _layers(self) -> list[tuple[Mapping[str, str], ConfigSource]]:
        static = self.dynamic.static
        static_values = {
            name: text
            for name in static.explicit
            if (text := config_to_string(static[name])) is not None
        }
        defaults = {
            name: text
            for name, key in BROKER_CONFIGS.items()
            if (text := config_to_string(key.default)) is not None
        }
        return [
            (self.dynamic.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self.dynamic.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (static_values, ConfigSource.STATIC_BROKER_CONFIG),
            (defaults, ConfigSource.DEFAULT_CONFIG),
        ]

    def _synonyms(self, name: str) -> list[Synonym]:
        found = [
            Synonym(synonym, values[synonym], source)
            for values, source in self._layer_values
            for synonym in broker_synonyms(name)
            if synonym in values
        ]
        return list(itertools.dropwhile(lambda s: s.name != name, found))

    # --- topics -------------------------------------------------------------------------

    def topic(
        self, overrides: Mapping[str, Any], effective: Mapping[str, Any]
    ) -> list[ConfigEntry]:
        """Every topic key of a topic with its overrides and effective values."""
        entries = []
        for name in sorted(TOPIC_CONFIGS):
            key = TOPIC_CONFIGS[name]
            value = config_to_string(effective[name])
            synonyms = self._synonyms(BROKER_SYNONYMS[name]) if name in BROKER_SYNONYMS else []
            if name in overrides:
                synonyms.insert(0, Synonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
            entries.append(
                ConfigEntry(
                    name=name,
                    value=value,
                    source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                    read_only=False,
                    synonyms=tuple(synonyms),
                    config_type=CONFIG_TYPES.get(key.type, UNKNOWN_TYPE),
                    documentation=key.doc,
                )
            )
        return entries

    def created_topic_source(self, name: str, overrides: Mapping[str, Any]) -> ConfigSource:
        """The source CreateTopics (v5+) reports for a key of a new topic.

        Kafka's controller computes it differently from DescribeConfigs: the first
        layer that sets any broker synonym of the key wins, with no cut at the first.
        """
        if name in overrides:
            return ConfigSource.DYNAMIC_TOPIC_CONFIG
        primary = BROKER_SYNONYMS.get(name)
        names = broker_synonyms(primary) if primary else ()
        for values, source in self._layer_values:
            if source != ConfigSource.DEFAULT_CONFIG and any(n in values for n in names):
                return source
        return ConfigSource.DEFAULT_CONFIG

    # --- brokers ------------------------------------------------------------------------

    def broker(self) -> list[ConfigEntry]:
        """This broker's every key with the value in force, plus any plugin keys set."""
        current = self.dynamic.current
        values: dict[str, str | None] = {
            name: config_to_string(current[name]) for name in BROKER_CONFIGS
        }
        for layer in (self.dynamic.cluster_default, self.dynamic.per_broker):
            values.update({name: value for name, value in layer.items() if name not in values})
        return self._broker_entries(values, per_broker=True)

    def cluster_default(self) -> list[ConfigEntry]:
        """Only the keys set as cluster-wide dynamic defaults, as Kafka lists them."""
        return self._broker_entries(self.dynamic.cluster_default, per_broker=False)

    def _broker_entries(
        self, values: Mapping[str, str | None], per_broker: bool
    ) -> list[ConfigEntry]:
        entries = []
        for name in sorted(values):
            synonyms = self._synonyms(name)
            if not per_broker:
                synonyms = [
                    s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
                ]
            key = BROKER_CONFIGS.get(name)
            sensitive = key is not None and key.type == "password"
            if sensitive:
                # As Kafka: a password's value is null everywhere, its synonyms' too.
                synonyms = [Synonym(s.name, None, s.source) for s in synonyms]
            entries.append(
                ConfigEntry(
                    name=name,
                    value=None if sensitive else values[name],
                    is_sensitive=sensitive,
                    source=synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG,
                    read_only=name not in DYNAMIC_BROKER_CONFIGS,
                    synonyms=tuple(synonyms),
                    config_type=CONFIG_TYPES.get(key.type, UNKNOWN_TYPE) if key else UNKNOWN_TYPE,
                    documentation=key.doc if key else None,
                )
            )
        return entries


def only(entries: Iterable[ConfigEntry], keys: Iterable[str] | None) -> list[ConfigEntry]:
    """The entries a request asked for: all when it named no key (null or empty)."""
    wanted = set(keys or ())
    return [entry for entry in entries if not wanted or entry.name in wanted]
