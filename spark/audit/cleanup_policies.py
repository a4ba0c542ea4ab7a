"""Each topic's cleanup.policy, as the broker that wrote the log dir applies it.

Whether offsets may be missing between batches depends on it: the log cleaner of a
compacted topic removes records and leaves gaps, while a topic whose policy is only
`delete` loses whole segments at its start and nothing in its middle, so a gap there
is lost data. The policy is found, first match wins, in:

1. `--topic-configs FILE` (JSON `{"topic": {"cleanup.policy": "compact"}}`), for a log
   dir whose configs live elsewhere (Apache Kafka keeps them in ZooKeeper or KRaft);
2. the log dir's `brook-topic-configs.json`, where a broker without ZooKeeper keeps its
   topics' overrides (broker/metadata/store.py writes it);
3. for `__consumer_offsets` and `__transaction_state`, compact (Kafka creates them so);
4. the log dir's `brook-broker-configs.json`, the dynamic broker configs
   (broker/config/dynamic.py): `log.cleanup.policy`, this broker's over the cluster's;
5. Kafka's default, delete.

A topic that the log cleaner has cleaned (a partition of it in the log dir's
`cleaner-offset-checkpoint`, which Kafka and Brook write) counts as compacted whatever
its policy says now: its gaps are the cleaner's. This module reads JSON files only: the
audit imports nothing of the broker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brook.storage.checkpoints import OffsetCheckpointFile, read_meta_properties
from brook.storage.errors import CorruptCheckpointError
from brook.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT_FILE
from brook.storage.reader import PartitionFiles

from .internal_topics import INTERNAL_TOPICS

# The file names the broker gives them (broker/metadata/store.py, broker/config/dynamic.py).
TOPIC_CONFIGS_FILE = "brook-topic-configs.json"
DYNAMIC_BROKER_CONFIGS_FILE = "brook-broker-configs.json"
DEFAULT_POLICY = ("delete",)  # Kafka's log.cleanup.policy
COMPACT = "compact"


@dataclass(frozen=True, slots=True)
class CleanupPolicy:
    policy: tuple[str, ...]  # e.g. ("delete",), ("compact", "delete")
    source: str  # where it was found, for the report
    cleaned: bool = False  # the log cleaner has cleaned a partition of the topic

    @property
    def compacted(self) -> bool:
        return COMPACT in self.policy or self.cleaned

    def text(self) -> str:
        cleaned = " (cleaned by the log cleaner)" if self.cleaned else ""
        return f"{','.join(self.policy)} from {self.source}{cleaned}"


def _policy(value: Any) -> tuple[str, ...]:
    """A stored cleanup.policy: a list (as the broker stores it) or a comma-separated string."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return tuple(str(item).strip().lower() for item in items if str(item).strip())


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} does not read as JSON: {exc}") from None


def read_topic_configs(path: Path) -> dict[str, dict[str, Any]]:
    """A JSON file mapping each topic to its configs (ValueError when it is not one)."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    stored = _json(path)
    if not isinstance(stored, dict) or not all(isinstance(v, dict) for v in stored.values()):
        raise ValueError(f"{path} must map each topic to its configs, as JSON")
    return stored


def _broker_default(log_dir: Path) -> tuple[tuple[str, ...], str] | None:
    stored = _json(log_dir / DYNAMIC_BROKER_CONFIGS_FILE)
    if not isinstance(stored, dict):
        return None
    try:
        meta = read_meta_properties(log_dir)
    except (OSError, ValueError, CorruptCheckpointError):
        meta = None
    broker_id = None if meta is None else meta.broker_id
    own = stored.get("brokers", {}).get(str(broker_id), {}) if broker_id is not None else {}
    for layer, where in ((own, f"broker {broker_id}'s"), (stored.get("cluster_default", {}), "")):
        if isinstance(layer, dict) and "log.cleanup.policy" in layer:
            label = f"{where} log.cleanup.policy" if where else "log.cleanup.policy"
            return _policy(layer["log.cleanup.policy"]), f"{DYNAMIC_BROKER_CONFIGS_FILE} ({label})"
    return None


def _cleaned(log_dir: Path) -> set[str]:
    """Topics with a partition in the log dir's cleaner-offset-checkpoint."""
    try:
        checkpoint = OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    except (OSError, CorruptCheckpointError):
        return set()
    return {topic for topic, _ in checkpoint}


def cleanup_policies(
    partitions: list[PartitionFiles], topic_configs: dict[str, dict[str, Any]] | None = None
) -> dict[str, CleanupPolicy]:
    """The policy of every topic of `partitions`, from the log dirs that hold them (a
    partition directory's parent) and `topic_configs` (--topic-configs)."""
    by_log_dir: dict[Path, set[str]] = {}
    for partition in partitions:
        by_log_dir.setdefault(partition.path.parent, set()).add(partition.topic)
    policies: dict[str, CleanupPolicy] = {}
    for log_dir, topics in sorted(by_log_dir.items()):
        stored = _json(log_dir / TOPIC_CONFIGS_FILE)
        stored = stored if isinstance(stored, dict) else {}
        default = _broker_default(log_dir)
        cleaned = _cleaned(log_dir)
        for topic in sorted(topics - policies.keys()):
            given = (topic_configs or {}).get(topic, {})
            own = stored.get(topic, {})
            if "cleanup.policy" in given:
                policy, source = _policy(given["cleanup.policy"]), "--topic-configs"
            elif isinstance(own, dict) and "cleanup.policy" in own:
                policy, source = _policy(own["cleanup.policy"]), TOPIC_CONFIGS_FILE
            elif topic in INTERNAL_TOPICS:
                policy, source = (COMPACT,), "Kafka's internal topics"
            elif default is not None:
                policy, source = default
            else:
                policy, source = DEFAULT_POLICY, "Kafka's default"
            policies[topic] = CleanupPolicy(policy, source, topic in cleaned)
    return policies
