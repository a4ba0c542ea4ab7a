"""Topic-level configuration: Kafka's topic keys, each backed by its broker default.

A topic stores only the keys set on it; everything else follows the broker's value
of the synonym (segment.bytes <- log.segment.bytes), as in Kafka.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .broker_config import COMPRESSION_TYPES, LONG_MAX, BrokerConfig, ConfigError, ConfigKey

if TYPE_CHECKING:
    from brook.storage.log_config import LogConfig

GZIP_LEVELS = (1, 9)


def _gzip_level(level: int) -> str | None:
    low, high = GZIP_LEVELS
    if level == -1 or low <= level <= high:
        return None
    return f"Value must be between {low} and {high} or equal to -1"


def _throttled_replicas(replicas: list[str]) -> str | None:
    # Kafka's ThrottledReplicaListValidator: '*', or partitionId:brokerId pairs.
    if replicas == ["*"] or all(re.fullmatch(r"[0-9]+:[0-9]+", item) for item in replicas):
        return None
    return (
        "must be the literal '*' or a list of replicas in the following format:"
        " [partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def _no_tiered_storage(enabled: bool) -> str | None:
    # Kafka's answer when remote.log.storage.system.enable is off, as it always is here.
    if not enabled:
        return None
    return (
        "Tiered Storage functionality is disabled in the broker. Topic cannot be"
        " configured with remote log storage."
    )


TOPIC_CONFIGS: dict[str, ConfigKey] = {
    key.name: key
    for key in [
        ConfigKey(
            "cleanup.policy",
            "list",
            ["delete"],
            "delete and/or compact.",
            choices=("compact", "delete"),
        ),
        ConfigKey(
            "compression.type",
            "string",
            "producer",
            "Codec batches are stored in.",
            choices=COMPRESSION_TYPES,
        ),
        ConfigKey(
            "delete.retention.ms", "long", 86400000, "How long tombstones are kept.", at_least=0
        ),
        ConfigKey(
            "file.delete.delay.ms", "long", 60000, "Delay before a file is deleted.", at_least=0
        ),
        ConfigKey("flush.messages", "long", LONG_MAX, "Messages between fsyncs.", at_least=1),
        ConfigKey("flush.ms", "long", LONG_MAX, "Milliseconds between fsyncs.", at_least=0),
        ConfigKey("index.interval.bytes", "int", 4096, "Bytes between index entries.", at_least=0),
        ConfigKey("max.message.bytes", "int", 1048588, "Largest batch accepted.", at_least=0),
        ConfigKey(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "CreateTime or LogAppendTime.",
            choices=("CreateTime", "LogAppendTime"),
        ),
        ConfigKey(
            "message.timestamp.before.max.ms",
            "long",
            LONG_MAX,
            "How far in the past a CreateTime timestamp may be.",
            at_least=0,
        ),
        ConfigKey(
            "message.timestamp.after.max.ms",
            "long",
            3600000,
            "How far in the future a CreateTime timestamp may be.",
            at_least=0,
        ),
        ConfigKey(
            "message.timestamp.difference.max.ms",
            "long",
            LONG_MAX,
            "Deprecated: both bounds, where the two keys above are unset.",
            at_least=0,
        ),
        ConfigKey(
            "max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "Longest a record may stay uncompacted.",
            at_least=1,
        ),
        ConfigKey(
            "min.cleanable.dirty.ratio",
            "double",
            0.5,
            "Dirty share of the log that triggers cleaning.",
            at_least=0,
            at_most=1.0,
        ),
        ConfigKey("min.compaction.lag.ms", "long", 0, "Minimum age before compaction.", at_least=0),
        ConfigKey("min.insync.replicas", "int", 1, "Replicas needed for acks=all.", at_least=1),
        ConfigKey("retention.bytes", "long", -1, "Retention by size per partition."),
        ConfigKey("retention.ms", "long", 604800000, "Retention by time; -1 forever.", at_least=-1),
        ConfigKey("segment.bytes", "int", 1073741824, "Segment size.", at_least=14),
        ConfigKey("segment.index.bytes", "int", 10485760, "Index file size.", at_least=4),
        ConfigKey("segment.ms", "long", 604800000, "Segment age before roll.", at_least=1),
        ConfigKey(
            "unclean.leader.election.enable",
            "boolean",
            False,
            "Allow out-of-sync replicas to become leader.",
        ),
        # The rest of Kafka 4.x's topic keys (LogConfig). Acted on: segment.jitter.ms
        # and the compression levels; stored and described only: the others (README).
        ConfigKey(
            "segment.jitter.ms",
            "long",
            0,
            "Most random jitter taken off segment.ms per segment.",
            at_least=0,
        ),
        ConfigKey(
            "compression.gzip.level",
            "int",
            -1,
            "Level when the broker compresses with gzip.",
            check=_gzip_level,
        ),
        ConfigKey(
            "compression.lz4.level",
            "int",
            9,
            "Level when the broker compresses with lz4.",
            at_least=1,
            at_most=17,
        ),
        ConfigKey(
            "compression.zstd.level",
            "int",
            3,
            "Level when the broker compresses with zstd.",
            at_least=-131072,
            at_most=22,
        ),
        ConfigKey("preallocate", "boolean", False, "Preallocate new segment files."),
        ConfigKey(
            "leader.replication.throttled.replicas",
            "list",
            [],
            "Replicas throttled on the leader's side.",
            check=_throttled_replicas,
        ),
        ConfigKey(
            "follower.replication.throttled.replicas",
            "list",
            [],
            "Replicas throttled on the follower's side.",
            check=_throttled_replicas,
        ),
        ConfigKey(
            "remote.storage.enable",
            "boolean",
            False,
            "Tiered storage for the topic (Brook has none).",
            check=_no_tiered_storage,
        ),
        ConfigKey(
            "local.retention.ms", "long", -2, "Local retention by time (tiered).", at_least=-2
        ),
        ConfigKey(
            "local.retention.bytes", "long", -2, "Local retention by size (tiered).", at_least=-2
        ),
        ConfigKey("remote.log.copy.disable", "boolean", False, "Stop copying to remote storage."),
        ConfigKey(
            "remote.log.delete.on.disable", "boolean", False, "Delete remote data on disable."
        ),
    ]
}

# Topic key -> the broker key whose value is its default (Kafka's primary synonym, the
# one DescribeConfigs lists). segment.ms, retention.ms, flush.ms and the timestamp
# bounds have further synonyms or fallbacks, resolved in effective_topic_config.
BROKER_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Parse topic configs given as strings; raises ConfigError naming the bad key."""
    parsed = {}
    for name, raw in configs.items():
        key = TOPIC_CONFIGS.get(name)
        if key is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if raw is None:
            raise ConfigError(f"Null value not supported for topic config {name}")
        parsed[name] = key.parse(raw)
    return parsed


def effective_topic_config(broker: BrokerConfig, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Every topic key with its value: the topic's own, else the broker's, else Kafka's."""
    values: dict[str, Any] = {}
    for name, key in TOPIC_CONFIGS.items():
        if name in overrides:
            values[name] = overrides[name]
        elif name in BROKER_SYNONYMS:
            values[name] = broker[BROKER_SYNONYMS[name]]
        else:
            values[name] = key.default
    if "segment.ms" not in overrides:
        values["segment.ms"] = broker.segment_ms
    if "retention.ms" not in overrides:
        values["retention.ms"] = broker.retention_ms
    if "flush.ms" not in overrides:
        values["flush.ms"] = broker.flush_interval_ms
    for bound in ("before", "after"):
        values[f"message.timestamp.{bound}.max.ms"] = _timestamp_bound(broker, overrides, bound)
    return values


def _timestamp_bound(broker: BrokerConfig, overrides: Mapping[str, Any], bound: str) -> int:
    """KIP-937's bound, falling back to the deprecated difference key where the new key
    was not given, first at the topic level, then at the broker level."""
    levels: list[tuple[Any, str, Any]] = [
        (overrides, "message", overrides.keys()),
        (broker, "log.message", broker.explicit),
    ]
    for source, prefix, given in levels:
        for key in (f"{prefix}.timestamp.{bound}.max.ms", f"{prefix}.timestamp.difference.max.ms"):
            if key in given:
                value: int = source[key]
                return value
    default: int = broker[f"log.message.timestamp.{bound}.max.ms"]
    return default


def log_config_for(broker: BrokerConfig, overrides: Mapping[str, Any]) -> LogConfig:
    from brook.storage.log_config import LogConfig  # with the first log

    return LogConfig.from_properties(effective_topic_config(broker, overrides))
