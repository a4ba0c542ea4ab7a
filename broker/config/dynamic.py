"""Dynamic broker configs (Kafka's KIP-226): changed by AlterConfigs, kept across restarts.

Two layers sit over the static configuration (defaults < file < environment <
--override): the cluster-wide defaults (broker resource "") and this broker's own
(resource "<broker.id>"), the latter winning, as in Kafka. Both keep the strings they
were given, as Kafka's metadata does, in brook-broker-configs.json in the first log
directory.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from brook.protocol.errors import InvalidRequestError
from brook.storage.checkpoints import read_json, write_json

from .broker_config import BROKER_CONFIGS, BrokerConfig, ConfigError, prefixed_key

log = logging.getLogger("brook.dynamic_config")

DYNAMIC_CONFIGS_FILE = "brook-broker-configs.json"

# The keys Brook knows that Kafka lets AlterConfigs change on a running broker: the
# primary broker synonym of each topic config (Kafka's DynamicLogConfig) and the log
# cleaner's own (Kafka's LogCleaner.ReconfigurableConfigs). The topic keys' other
# synonyms (log.retention.hours/minutes, log.roll.hours, log.flush.scheduler.interval.ms)
# are static in Kafka, and so here. The listener keys are dynamic per broker only.
DYNAMIC_BROKER_CONFIGS = frozenset(
    {
        "advertised.listeners",
        "listener.security.protocol.map",
        "listeners",
        "compression.type",
        "log.cleaner.backoff.ms",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.threads",
        "log.cleanup.policy",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.index.interval.bytes",
        "log.index.size.max.bytes",
        "log.message.timestamp.after.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.type",
        "log.retention.bytes",
        "log.retention.ms",
        "log.roll.ms",
        "log.segment.bytes",
        "log.segment.delete.delay.ms",
        # Kafka's DynamicConnectionQuota keys (those Brook serves).
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "message.max.bytes",
        "min.insync.replicas",
        # Cluster-wide in Kafka since KIP-854.
        "producer.id.expiration.ms",
        "unclean.leader.election.enable",
    }
)

# The keys whose change reconfigures the log cleaner (Kafka's
# LogCleaner.ReconfigurableConfigs, those Brook knows): its threads restart.
CLEANER_RECONFIGURABLE = (
    "log.cleaner.threads",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
    "message.max.bytes",
)


# Kafka's PerBrokerConfigs (DynamicListenerConfig's keys): a broker's own addresses make no
# sense as a cluster-wide default.
PER_BROKER_CONFIGS = frozenset(
    {"advertised.listeners", "listener.security.protocol.map", "listeners"}
)
# The keys whose change rebinds or re-advertises the listeners (listeners.py).
LISTENER_CONFIGS = PER_BROKER_CONFIGS


class DynamicBrokerConfig:
    """The static config, the two dynamic layers, and the config in force from them."""

    def __init__(self, static: BrokerConfig) -> None:
        self.static = static
        self.path: Path = static.log_dirs[0] / DYNAMIC_CONFIGS_FILE
        self.cluster_default: dict[str, str] = {}
        self.per_broker: dict[str, str] = {}
        self.current = static
        # Told (old config, new config) after every change: the parts of the broker
        # that reconfigure themselves (Kafka's BrokerReconfigurable): the log cleaner,
        # the network listeners.
        self.reconfigurables: list[Callable[[BrokerConfig, BrokerConfig], None]] = []

    def layer(self, per_broker: bool) -> dict[str, str]:
        return self.per_broker if per_broker else self.cluster_default

    # --- start-up -----------------------------------------------------------------------

    def load(self) -> BrokerConfig:
        """Read the stored layers and return the config in force."""
        stored = read_json(self.path) or {}
        own = stored.get("brokers", {}).get(str(self.static.broker_id), {})
        # A value stored by another version that no longer validates is dropped with a
        # warning rather than keeping the broker down, as Kafka does.
        self.cluster_default = self._usable(stored.get("cluster_default", {}), "cluster default")
        self.per_broker = self._usable(own, f"broker {self.static.broker_id}")
        self.current = self._merge(self.cluster_default, self.per_broker)
        if self.cluster_default or self.per_broker:
            log.info(
                "Dynamic broker configs: cluster default %s, broker %d %s",
                self.cluster_default,
                self.static.broker_id,
                self.per_broker,
            )
        return self.current

    def _usable(self, values: Mapping[str, str], where: str) -> dict[str, str]:
        usable = {}
        for name, value in values.items():
            try:
                self._check_values({name: value})
            except InvalidRequestError as exc:
                log.warning("Ignoring stored dynamic config of %s: %s", where, exc.message)
                continue
            usable[name] = value
        return usable

    # --- changes ------------------------------------------------------------------------

    def validate(self, props: Mapping[str, str], per_broker: bool) -> None:
        """Check a new set of one layer's configs as Kafka's broker does.

        Kafka reports these failures as INVALID_REQUEST, not INVALID_CONFIG (KAFKA-13609).
        Keys Kafka does not know pass: Kafka keeps them for plugins.
        """
        self._check_values(props)
        if per_broker:
            new = self._merge(self.cluster_default, props, build_security=False)
            _check_listener_change(self.current, new)
            try:
                new.build_listener_security()
            except ConfigError as exc:
                raise InvalidRequestError(str(exc)) from None
        else:
            cluster_only = sorted(name for name in props if name in PER_BROKER_CONFIGS)
            if cluster_only:
                raise InvalidRequestError(
                    "Cannot update these configs at default cluster level, broker id must be"
                    f" specified: [{', '.join(cluster_only)}]"
                )
            new = self._merge(props, self.per_broker)
        if any(new[name] != self.current[name] for name in CLEANER_RECONFIGURABLE):
            _check_cleaner_threads(self.current["log.cleaner.threads"], new["log.cleaner.threads"])

    def _check_values(self, props: Mapping[str, str]) -> None:
        # A listener's own security keys (listener.name.<l>.ssl...) are static here: the
        # TLS and SASL settings are read at start.
        static_only = sorted(
            name
            for name in props
            if (name in BROKER_CONFIGS and name not in DYNAMIC_BROKER_CONFIGS)
            or prefixed_key(name) is not None
        )
        if static_only:
            raise InvalidRequestError(
                f"Cannot update these configs dynamically: [{', '.join(static_only)}]"
            )
        for name, value in props.items():
            if name in BROKER_CONFIGS:
                try:
                    BROKER_CONFIGS[name].parse(value)
                except ConfigError as exc:
                    raise InvalidRequestError(str(exc)) from None

    def replace(self, props: Mapping[str, str], per_broker: bool) -> BrokerConfig:
        """Make `props` the whole of one layer, store it, and return the config in force."""
        self.validate(props, per_broker)
        layer = self.layer(per_broker)
        layer.clear()
        layer.update(props)
        self._store()
        old, self.current = self.current, self._merge(self.cluster_default, self.per_broker)
        log.info(
            "Dynamic configs of %s are now %s",
            f"broker {self.static.broker_id}" if per_broker else "the cluster default",
            dict(layer),
        )
        for reconfigure in self.reconfigurables:
            reconfigure(old, self.current)
        return self.current

    def _merge(
        self,
        cluster_default: Mapping[str, str],
        per_broker: Mapping[str, str],
        build_security: bool = True,
    ) -> Any:
        values = dict(self.static.items())
        explicit = set(self.static.explicit)
        for layer in (cluster_default, per_broker):
            for name, raw in layer.items():
                key = BROKER_CONFIGS.get(name)
                if key is None:
                    continue  # a plugin's key: stored and described, used by nothing
                values[name] = key.parse(raw)
                explicit.add(name)
        try:
            return BrokerConfig(values, explicit, build_security)
        except ConfigError as exc:
            raise InvalidRequestError(str(exc)) from None

    def _store(self) -> None:
        stored = read_json(self.path) or {}
        stored["cluster_default"] = self.cluster_default
        brokers = stored.setdefault("brokers", {})
        brokers[str(self.static.broker_id)] = self.per_broker
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json(self.path, stored, pretty=True)


def _check_listener_change(old: BrokerConfig, new: BrokerConfig) -> None:
    """Kafka's DynamicListenerConfig checks: a listener keeps its security protocol, and
    the inter-broker listener stays."""
    for listener in new.listeners:
        before = old.listener_security_protocols.get(listener.name)
        if any(item.name == listener.name for item in old.listeners) and before != (
            new.listener_security_protocols.get(listener.name)
        ):
            raise InvalidRequestError(
                f"Security protocol cannot be updated for existing listener {listener.name}"
            )
    if new.inter_broker_listener_name != old.inter_broker_listener_name:
        raise InvalidRequestError(
            "Advertised listener must be specified for inter-broker listener"
            f" {old.inter_broker_listener_name}"
        )


def _check_cleaner_threads(current: int, new: int) -> None:
    """Kafka's LogCleaner.validateReconfiguration: at least one thread, and at most a
    halving or a doubling of the threads running at a time."""
    if new < 1:
        raise InvalidRequestError("Log cleaner threads should be at least 1")
    if new < current // 2:
        raise InvalidRequestError(
            f"Log cleaner threads cannot be reduced to less than half the current value {current}"
        )
    if new > current * 2:
        raise InvalidRequestError(
            "Log cleaner threads cannot be increased to more than double the current value"
            f" {current}"
        )
