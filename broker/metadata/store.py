"""Where the metadata records are kept.

LocalMetadataStore, for a broker without ZooKeeper: the partition directories are the
source of truth for which topics and partitions exist (each holds its topic id in
partition.metadata, written when the replica manager creates the log); the topic configs
live in one JSON file in the first log dir, written atomically and fsynced. In a cluster,
ZooKeeper holds them (broker/zookeeper/store.py).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from brook.storage.checkpoints import read_json, write_json

if TYPE_CHECKING:
    from brook.storage.log import Log

from .records import (
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicConfigsRecord,
    TopicRecord,
)

log = logging.getLogger("brook.metadata.store")

TOPIC_CONFIGS_FILE = "brook-topic-configs.json"


class MetadataStore(Protocol):
    def topic_configs(self) -> dict[str, dict[str, Any]]:
        """The topics' overrides by name, for the log manager to open the logs with."""
        ...

    def load(self, local_logs: Iterable[Log]) -> list[MetadataRecord]:
        """The records that rebuild the state kept here, given the logs found on this
        broker's disks (the local store's source of truth; others check them against it)."""
        ...

    def append(self, records: Sequence[MetadataRecord]) -> None:
        """Keep a change; raises OSError when it cannot (and keeps nothing of it)."""
        ...


class LocalMetadataStore:
    def __init__(self, log_dir: Path, broker_id: int) -> None:
        self._configs_path = log_dir / TOPIC_CONFIGS_FILE
        self._broker_id = broker_id
        self._configs: dict[str, dict[str, Any]] = self.topic_configs()
        self._names: dict[uuid.UUID, str] = {}

    def topic_configs(self) -> dict[str, dict[str, Any]]:
        """The stored overrides by topic name (the log manager opens logs with them)."""
        stored: dict[str, dict[str, Any]] = read_json(self._configs_path) or {}
        return stored

    def load(self, local_logs: Iterable[Log]) -> list[MetadataRecord]:
        """The records of the topics whose logs the log manager opened."""
        found: dict[str, dict[int, Log]] = {}
        for log_ in local_logs:
            found.setdefault(log_.topic, {})[log_.partition] = log_
        # Configs of topics no longer on disk go with the next write.
        self._configs = {name: configs for name, configs in self._configs.items() if name in found}
        records: list[MetadataRecord] = []
        me = (self._broker_id,)
        for name, by_index in sorted(found.items()):
            count = max(by_index) + 1
            topic_id = next((lg.topic_id for lg in by_index.values() if lg.topic_id), None)
            topic_id = topic_id or uuid.uuid4()
            self._names[topic_id] = name
            records.append(TopicRecord(name, topic_id))
            missing = [index for index in range(count) if index not in by_index]
            for index in missing:
                log.warning("Topic %s has no directory for partition %d; creating it", name, index)
            for index in range(count):
                present = by_index.get(index)
                epoch = _leader_epoch(present) if present is not None else 0
                records.append(PartitionRecord(topic_id, index, me, me, self._broker_id, epoch))
            if self._configs.get(name):
                records.append(TopicConfigsRecord(topic_id, self._configs[name]))
        return records

    def append(self, records: Sequence[MetadataRecord]) -> None:
        configs = dict(self._configs)
        names = dict(self._names)
        for record in records:
            if isinstance(record, TopicRecord):
                names[record.topic_id] = record.name
            elif isinstance(record, TopicConfigsRecord):
                name = names[record.topic_id]
                if record.configs:
                    configs[name] = dict(record.configs)
                else:
                    configs.pop(name, None)
            elif isinstance(record, RemoveTopicRecord):
                configs.pop(names.pop(record.topic_id), None)
        if configs != self._configs:
            write_json(self._configs_path, configs, pretty=True)
        self._configs = configs
        self._names = names


def _leader_epoch(log_: Log) -> int:
    """The epoch a leader on this broker goes on with: the log's latest, or 0."""
    latest = log_.leader_epoch_cache.latest_epoch
    return max(latest if latest is not None else 0, 0)
