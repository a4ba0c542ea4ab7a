"""Metadata changes through the one publisher, on real logs in a temporary directory: a
change is kept whole or not at all, the cache shows only what the store kept, and a
restart rebuilds the same state from what is on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brook.broker.config.broker_config import BrokerConfig
from brook.broker.config.topic_config import log_config_for
from brook.broker.metadata.cache import MetadataCache
from brook.broker.metadata.controller import Controller
from brook.broker.metadata.publisher import MetadataPublisher
from brook.broker.metadata.records import PartitionRecord
from brook.broker.metadata.store import TOPIC_CONFIGS_FILE, LocalMetadataStore
from brook.broker.replica.partition import ReplicaRole
from brook.broker.replica.replica_manager import ReplicaManager
from brook.protocol.errors import KafkaStorageError, TopicExistsError, UnknownTopicOrPartitionError
from brook.storage.log_manager import LogManager

BROKER_ID = 0


class Node:
    """The metadata side of one broker, wired as Broker.start wires it."""

    def __init__(self, data_dir: Path) -> None:
        self.config = BrokerConfig.build({"log.dirs": str(data_dir)}, environ={})
        self.store = LocalMetadataStore(data_dir, BROKER_ID)
        stored = self.store.topic_configs()
        self.log_manager = LogManager(
            [data_dir],
            BROKER_ID,
            None,
            lambda topic: log_config_for(self.config, stored.get(topic, {})),
        )
        self.log_manager.startup()
        self.cache = MetadataCache()
        self.replicas = ReplicaManager(
            BROKER_ID, self.log_manager, lambda overrides: log_config_for(self.config, overrides)
        )
        self.publisher = MetadataPublisher(self.cache, self.store, self.replicas)
        self.publisher.apply(self.store.load(self.log_manager.all_logs()))
        self.controller = Controller(BROKER_ID, lambda: self.config, self.cache, self.publisher)

    def close(self) -> None:
        self.log_manager.shutdown()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def node(data_dir: Path) -> Iterator[Node]:
    started = Node(data_dir)
    yield started
    started.close()


def test_a_created_topic_is_in_the_cache_the_logs_and_the_store(node: Node, data_dir: Path) -> None:
    topic = node.controller.create("orders", 3, 1, {"retention.ms": "1000"})
    assert [p.index for p in node.replicas.partitions_of("orders")] == [0, 1, 2]
    assert sorted(path.name for path in data_dir.glob("orders-*")) == [
        "orders-0",
        "orders-1",
        "orders-2",
    ]
    assert node.replicas.partition("orders", 2).log.config.retention_ms == 1000
    assert '"retention.ms": 1000' in (data_dir / TOPIC_CONFIGS_FILE).read_text()
    assert node.cache.get_by_id(topic.topic_id) is topic
    with pytest.raises(TopicExistsError):
        node.controller.create("orders", 1, 1, {})


def test_a_change_the_store_cannot_keep_leaves_nothing_behind(node: Node, data_dir: Path) -> None:
    # The configs file cannot be replaced while a directory stands in its place.
    (data_dir / TOPIC_CONFIGS_FILE).mkdir()
    with pytest.raises(KafkaStorageError, match="Could not create topic orders"):
        node.controller.create("orders", 2, 1, {"retention.ms": "1000"})
    assert node.cache.get("orders") is None
    assert node.replicas.hosted("orders", 0) is None
    assert not list(data_dir.glob("orders-*"))
    # A topic without configs needs no write of the file, and is kept.
    node.controller.create("plain", 1, 1, {})
    assert node.replicas.hosted("plain", 0) is not None


def test_deleting_a_topic_removes_its_logs_after_the_store_kept_it(
    node: Node, data_dir: Path
) -> None:
    node.controller.create("orders", 1, 1, {"retention.ms": "1000"})
    (data_dir / TOPIC_CONFIGS_FILE).unlink()
    (data_dir / TOPIC_CONFIGS_FILE).mkdir()
    with pytest.raises(KafkaStorageError):
        node.controller.delete("orders")
    assert node.replicas.hosted("orders", 0) is not None  # not deleted: not kept
    (data_dir / TOPIC_CONFIGS_FILE).rmdir()
    node.controller.delete("orders")
    assert node.cache.get("orders") is None
    with pytest.raises(UnknownTopicOrPartitionError):
        node.replicas.partition("orders", 0)


def test_a_restart_rebuilds_the_same_topics(data_dir: Path) -> None:
    first = Node(data_dir)
    created = first.controller.create("orders", 2, 1, {"cleanup.policy": "compact"})
    first.controller.add_partitions("orders", 3)
    first.close()
    second = Node(data_dir)
    try:
        again = second.cache.get("orders")
        assert again is not None
        assert again.topic_id == created.topic_id
        assert len(again.partitions) == 3
        assert again.configs == {"cleanup.policy": ["compact"]}
        assert second.replicas.partition("orders", 2).log.config.compact
    finally:
        second.close()


def test_a_new_leader_takes_over_an_existing_partition(node: Node) -> None:
    topic = node.controller.create("orders", 1, 1, {})
    partition = node.replicas.partition("orders", 0)
    node.publisher.apply([PartitionRecord(topic.topic_id, 0, (0, 1), (0, 1), 1, 5)])
    assert node.replicas.partition("orders", 0) is partition  # the same replica, changed
    assert (partition.role, partition.leader_epoch) == (ReplicaRole.FOLLOWER, 5)
    assert node.cache.get("orders").partitions[0].leader == 1


def test_changes_come_from_the_publishers_thread_only(node: Node) -> None:
    import threading

    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            node.controller.create("orders", 1, 1, {})
        except RuntimeError as exc:
            errors.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert len(errors) == 1 and node.cache.get("orders") is None
