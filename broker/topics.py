"""The topics this broker knows: names, ids, partition counts, topic configs.

With one broker and no ZooKeeper the partition directories are the source of truth
for which topics exist (each holds its topic id in partition.metadata); the topic
configs live in one JSON file in the first log directory.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    PolicyViolationError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from brook.storage.checkpoints import atomic_write_text
from brook.storage.errors import KafkaStorageError

from .config import ConfigError
from .partition import Partition
from .topic_config import log_config_for, validate_topic_configs

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("brook.topics")

MAX_NAME_LENGTH = 249
LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
TOPIC_CONFIGS_FILE = "brook-topic-configs.json"
# Kafka's controller refuses a CreateTopics that would add more partitions than this
# (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH, POLICY_VIOLATION, KAFKA-17870):
# each partition is files and descriptors, and a request for two billion of them would
# otherwise run the broker out of both. CreatePartitions gets the same bound
# (KAFKA-19673; before it, the controller's 10,000-record batch limit refused it).
MAX_PARTITIONS_PER_REQUEST = 10_000


@dataclass(eq=False)
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, Any]
    partitions: list[Partition] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


def validate_topic_name(name: str) -> None:
    """Kafka's rules for topic names (org.apache.kafka.common.internals.Topic)."""
    if not name:
        raise InvalidTopicError("Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError('Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters,"
            f" topic name: {name}"
        )
    if not LEGAL_NAME.match(name):
        raise InvalidTopicError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII'
            " alphanumerics, '.', '_' and '-'"
        )


def check_partitions_per_request(total: int) -> None:
    """POLICY_VIOLATION for a request that would create too many partitions at once."""
    if total > MAX_PARTITIONS_PER_REQUEST:
        raise PolicyViolationError("Excessively large number of partitions per request.")


def validate_manual_assignment(
    broker_ids: list[int], replication_factor: int | None, registered: set[int]
) -> None:
    """Kafka's checks of one partition's replica list in a manual assignment."""
    if not broker_ids:
        raise InvalidReplicaAssignmentError(
            "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id not in registered:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes broker {broker_id}, but no such"
                " broker is registered."
            )
        if broker_id == previous:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes the broker {broker_id} more than once."
            )
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise InvalidReplicaAssignmentError(
            f"The manual partition assignment includes a partition with {len(broker_ids)}"
            " replica(s), but this is not consistent with previous partitions, which have"
            f" {replication_factor} replica(s)."
        )


class TopicManager:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.topics: dict[str, Topic] = {}
        self.by_id: dict[uuid.UUID, Topic] = {}
        self._configs_path = broker.config.log_dirs[0] / TOPIC_CONFIGS_FILE
        self._stored_configs: dict[str, dict[str, Any]] | None = None

    def log_config_of(self, topic: str) -> Any:
        """The log config of a topic as stored, for the log manager at start-up."""
        if self._stored_configs is None:
            self._stored_configs = self._read_configs()
        return log_config_for(self.broker.config, self._stored_configs.get(topic, {}))

    # --- loading ------------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild the topic table from the logs the log manager opened."""
        stored_configs = self._read_configs()
        self._stored_configs = None
        found: dict[str, dict[int, Any]] = {}
        for log_ in self.broker.log_manager.all_logs():
            found.setdefault(log_.topic, {})[log_.partition] = log_
        for name, logs in sorted(found.items()):
            count = max(logs) + 1
            missing = [index for index in range(count) if index not in logs]
            topic_id = next((lg.topic_id for lg in logs.values() if lg.topic_id), None)
            topic = Topic(name, topic_id or uuid.uuid4(), stored_configs.get(name, {}))
            self._register(topic)
            for index in range(count):
                log_ = logs.get(index)
                if log_ is not None and log_.topic_id is None:
                    # A partition dir without partition.metadata (placed by hand, or
                    # written by a tool that keeps none): store the id now, or the topic
                    # gets a new one at every start and clients take it for another topic.
                    log_ = self.broker.log_manager.get_or_create_log(
                        name, index, None, topic.topic_id
                    )
                if log_ is None:
                    log.warning(
                        "Topic %s has no directory for partition %d; creating it", name, index
                    )
                self._add_partition(topic, index, log_)
            if missing:
                log.warning("Recreated missing partitions %s of %s", missing, name)
        if self.topics:
            log.info(
                "Loaded %d topics with %d partitions",
                len(self.topics),
                sum(len(t.partitions) for t in self.topics.values()),
            )

    def _read_configs(self) -> dict[str, dict[str, Any]]:
        try:
            return json.loads(self._configs_path.read_text())
        except FileNotFoundError:
            return {}

    def _write_configs(self) -> None:
        data = {name: topic.configs for name, topic in self.topics.items() if topic.configs}
        atomic_write_text(self._configs_path, json.dumps(data, indent=1, sort_keys=True))

    # --- lookups ------------------------------------------------------------------------

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def hosted(self, name: str, index: int) -> Partition | None:
        """The partition if this broker hosts it (offline or not), else None."""
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def partition(self, name: str, index: int) -> Partition:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            raise UnknownTopicOrPartitionError(
                f"This server does not host this topic-partition: {name}-{index}"
            )
        partition = topic.partitions[index]
        if partition.is_offline:
            raise KafkaStorageError(f"Partition {name}-{index} is in an offline log dir")
        return partition

    # --- changes ------------------------------------------------------------------------

    def check_create(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, Any],
        internal: bool = False,
    ) -> tuple[int, int, dict[str, Any]]:
        """Validate a topic creation; returns the resolved partitions, RF and configs.

        Internal topics are created by their coordinators only (`internal`), never by
        a client's CreateTopics or auto-creation, as in Kafka.
        """
        validate_topic_name(name)
        if name in INTERNAL_TOPICS and not internal and name not in self.topics:
            raise InvalidRequestError(f"Creation of internal topic {name} is prohibited.")
        if name in self.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        collision = next(
            (other for other in self.topics if other.replace(".", "_") == name.replace(".", "_")),
            None,
        )
        if collision is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {collision}")
        config = self.broker.config
        # -1 asks for the broker's default (KIP-464); other non-positive values are errors.
        if replication_factor < -1 or replication_factor == 0:
            raise InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value."
            )
        if num_partitions < -1 or num_partitions == 0:
            raise InvalidPartitionsError(
                "Number of partitions was set to an invalid non-positive value."
            )
        if num_partitions == -1:
            num_partitions = config["num.partitions"]
        if replication_factor == -1:
            replication_factor = config["default.replication.factor"]
        live_brokers = 1
        if replication_factor > live_brokers:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target"
                f" replication factor of {replication_factor} cannot be reached because only"
                f" {live_brokers} broker(s) are registered."
            )
        try:
            parsed = validate_topic_configs(configs)
        except ConfigError as exc:
            raise InvalidConfigError(str(exc)) from None
        return num_partitions, replication_factor, parsed

    def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, Any] | None = None,
        internal: bool = False,
    ) -> Topic:
        num_partitions, _, parsed = self.check_create(
            name, num_partitions, replication_factor, configs or {}, internal
        )
        topic = Topic(name, uuid.uuid4(), parsed)
        self._register(topic)
        try:
            for index in range(num_partitions):
                self._add_partition(topic, index, None)
            if parsed:
                self._write_configs()
        except (OSError, KafkaStorageError) as exc:
            # All or nothing, as Kafka commits a topic's records together: no partition
            # of a topic that could not be made whole stays behind, on disk or here.
            self._remove_partitions(topic, 0)
            del self.topics[name]
            del self.by_id[topic.topic_id]
            raise self._storage_error(f"create topic {name}", exc) from None
        log.info(
            "Created topic %s with %d partitions (id %s)", name, num_partitions, topic.topic_id
        )
        return topic

    def delete(self, name: str) -> Topic:
        if not self.broker.config["delete.topic.enable"]:
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
        del self.topics[name]
        del self.by_id[topic.topic_id]
        for partition in topic.partitions:
            partition.fail_waiters(UnknownTopicOrPartitionError(f"Topic {name} was deleted"))
            self.broker.log_manager.delete_log(name, partition.index)
        if topic.configs:
            self._write_configs()
        log.info("Deleted topic %s", name)
        return topic

    def add_partitions(
        self,
        name: str,
        new_total: int,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
    ) -> None:
        """Grow a topic to `new_total` partitions, with Kafka's checks and messages.

        `assignments`: the replica list of each new partition, when the client gives
        them (one per new partition, each as long as the topic's replication factor).
        """
        topic = self.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if new_total == current:
            raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
        if new_total < current:
            raise InvalidPartitionsError(
                f"The topic {name} currently has {current} partition(s); {new_total} would"
                " not be an increase."
            )
        additional = new_total - current
        if assignments is not None:
            if len(assignments) != additional:
                raise InvalidReplicaAssignmentError(
                    f"Attempted to add {additional} additional partition(s), but only"
                    f" {len(assignments)} assignment(s) were specified."
                )
            replication_factor = len(topic.partitions[0].replicas)
            for broker_ids in assignments:
                validate_manual_assignment(broker_ids, replication_factor, {self.broker.broker_id})
        if validate_only:
            return
        try:
            for index in range(current, new_total):
                self._add_partition(topic, index, None)
        except (OSError, KafkaStorageError) as exc:
            # The request applies whole or not at all.
            self._remove_partitions(topic, current)
            raise self._storage_error(f"add partitions to {name}", exc) from None
        log.info("Topic %s now has %d partitions", name, new_total)

    def set_configs(self, name: str, configs: dict[str, Any]) -> None:
        """Replace a topic's overrides (validated by the caller); its logs follow at once."""
        topic = self.topics[name]
        topic.configs = configs
        self._apply_configs(topic)
        self._write_configs()

    def refresh_configs(self) -> None:
        """Re-derive every topic's config after the broker's dynamic defaults changed."""
        for topic in self.topics.values():
            self._apply_configs(topic)

    def _apply_configs(self, topic: Topic) -> None:
        # The typed config in force lives in each partition's log (LogConfig): the
        # log validator, retention and the partition's checks all read it there.
        log_config = log_config_for(self.broker.config, topic.configs)
        for partition in topic.partitions:
            partition.log.update_config(log_config)

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self.by_id[topic.topic_id] = topic

    def _remove_partitions(self, topic: Topic, first: int) -> None:
        """Close and delete partitions `first` and up of a topic being rolled back."""
        for partition in topic.partitions[first:]:
            self.broker.log_manager.delete_log(topic.name, partition.index)
        del topic.partitions[first:]

    def _storage_error(self, action: str, exc: OSError | KafkaStorageError) -> KafkaStorageError:
        # The log manager reports its own failures as KAFKA_STORAGE_ERROR already; a
        # failure of the topic's own files (its configs) arrives as an OSError.
        reason = exc.message if isinstance(exc, KafkaStorageError) else exc.strerror or str(exc)
        log.error("Could not %s: %s; nothing of it was kept", action, reason)
        return KafkaStorageError(f"Could not {action}: {reason}.")

    def _add_partition(self, topic: Topic, index: int, log_: Any) -> None:
        broker = self.broker
        if log_ is None:
            log_ = broker.log_manager.get_or_create_log(
                topic.name, index, log_config_for(broker.config, topic.configs), topic.topic_id
            )
        epoch = log_.leader_epoch_cache.latest_epoch
        partition = Partition(
            topic=topic.name,
            index=index,
            topic_id=topic.topic_id,
            log=log_,
            local_broker_id=broker.broker_id,
            leader_id=broker.broker_id,
            leader_epoch=max(epoch if epoch is not None else 0, 0),
            replicas=[broker.broker_id],
            isr=[broker.broker_id],
        )
        topic.partitions.append(partition)
