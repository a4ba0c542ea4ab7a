"""Per-log settings, with Kafka's defaults; the broker builds one per topic.

Field names follow Kafka's topic config names with dots turned into underscores,
except `max_index_size` (segment.index.bytes), named as Kafka's LogConfig names it.
Validation of ranges (e.g. the minimum segment.bytes) is the broker's job when a topic
config is set; this module only converts values.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1

# Kafka topic config name -> LogConfig field.
TOPIC_CONFIG_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "max_index_size",
    "index.interval.bytes": "index_interval_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "min.insync.replicas": "min_insync_replicas",
    "unclean.leader.election.enable": "unclean_leader_election_enable",
    "compression.type": "compression_type",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "preallocate": "preallocate",
    "compression.gzip.level": "compression_gzip_level",
    "compression.lz4.level": "compression_lz4_level",
    "compression.zstd.level": "compression_zstd_level",
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    segment_jitter_ms: int = 0
    max_index_size: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    # Kafka never fsyncs on its own by default: durability comes from replication.
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = 60 * 60 * 1000
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    delete_retention_ms: int = 24 * 60 * 60 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    preallocate: bool = False
    # The level of a batch the broker recompresses to compression.type (Kafka's defaults;
    # gzip's -1 is zlib's default level).
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    def compression_level(self, codec_name: str) -> int | None:
        """The configured level of a codec (None for one without levels: snappy)."""
        level: int | None = getattr(self, f"compression_{codec_name}_level", None)
        return level

    def random_segment_jitter(self) -> int:
        """A roll jitter in [0, segment.jitter.ms), drawn once per segment as Kafka does."""
        if self.segment_jitter_ms <= 0:
            return 0
        return random.randrange(min(self.segment_jitter_ms, self.segment_ms))

    @classmethod
    def from_properties(
        cls, props: Mapping[str, Any], defaults: LogConfig | None = None
    ) -> LogConfig:
        """A config from Kafka topic config names (string or typed values).

        Unknown names are ignored (the broker owns the list of valid topic configs);
        a value that does not convert raises ValueError naming the config.
        """
        base = defaults or cls()
        changes: dict[str, Any] = {}
        field_types = {f.name: f.type for f in dataclasses.fields(cls)}
        for name, value in props.items():
            field = TOPIC_CONFIG_FIELDS.get(name)
            if field is None or value is None:
                continue
            try:
                changes[field] = _convert(field_types[field], value)
            except (TypeError, ValueError):
                raise ValueError(f"invalid value {value!r} for config {name}") from None
        return dataclasses.replace(base, **changes)

    def with_overrides(self, **changes: Any) -> LogConfig:
        return dataclasses.replace(self, **changes)


def _convert(type_name: Any, value: Any) -> Any:
    kind = str(type_name)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false"):
            raise ValueError(value)
        return text == "true"
    if kind == "int":
        if isinstance(value, bool):
            raise ValueError(value)
        return int(str(value).strip()) if not isinstance(value, int) else value
    if kind == "float":
        return float(value)
    if kind.startswith("tuple"):
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return tuple(value)
    return str(value)
