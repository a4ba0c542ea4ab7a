"""The controller: checks topic changes with Kafka's rules and turns them into records.

CreateTopics, auto-creation, CreatePartitions, DeleteTopics and topic AlterConfigs come
here; what they change reaches the cache, the store and the replica manager through the
MetadataPublisher, whole or not at all. With one broker this broker is the controller,
the only replica and the leader of every partition.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from brook.protocol.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaStorageError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from brook.storage.checkpoints import topic_id_to_string

from ..config.broker_config import BrokerConfig, ConfigError
from ..config.topic_config import validate_topic_configs
from .cache import INTERNAL_TOPICS, MetadataCache, TopicMetadata
from .publisher import MetadataPublisher
from .records import (
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicConfigsRecord,
    TopicRecord,
)
from .topics import validate_manual_assignment, validate_topic_name

log = logging.getLogger("brook.controller")


class Controller:
    def __init__(
        self,
        broker_id: int,
        config: Callable[[], BrokerConfig],
        cache: MetadataCache,
        publisher: MetadataPublisher,
    ) -> None:
        self.broker_id = broker_id
        self._config = config  # the broker's config in force (AlterConfigs replaces it)
        self._cache = cache
        self._publisher = publisher

    @property
    def live_brokers(self) -> set[int]:
        return {self.broker_id}

    # --- topics -------------------------------------------------------------------------

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
        # A topic whose creation is under way (in slices) exists for a second creation.
        exists = self._cache.get(name) is not None or name in self._publisher.topics_in_progress
        if name in INTERNAL_TOPICS and not internal and not exists:
            raise InvalidRequestError(f"Creation of internal topic {name} is prohibited.")
        if exists:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        collision = next(
            (
                other
                for other in self._cache.names()
                if other.replace(".", "_") == name.replace(".", "_")
            ),
            None,
        )
        if collision is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {collision}")
        config = self._config()
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
        live = len(self.live_brokers)
        if replication_factor > live:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): The target"
                f" replication factor of {replication_factor} cannot be reached because only"
                f" {live} broker(s) are registered."
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
    ) -> TopicMetadata:
        records = self._creation(name, num_partitions, replication_factor, configs, internal)
        # All or nothing, as Kafka commits a topic's records together: no partition of a
        # topic that could not be made whole stays behind, on disk or here.
        self._apply(f"create topic {name}", records)
        return self._created(name)

    def _creation(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, Any] | None,
        internal: bool,
    ) -> list[MetadataRecord]:
        """The records that create a topic, once the creation is found valid."""
        num_partitions, _, parsed = self.check_create(
            name, num_partitions, replication_factor, configs or {}, internal
        )
        topic_id = uuid.uuid4()
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        records += self._new_partitions(topic_id, 0, num_partitions)
        if parsed:
            records.append(TopicConfigsRecord(topic_id, parsed))
        return records

    def _created(self, name: str) -> TopicMetadata:
        topic = self._cache.get(name)
        assert topic is not None
        # The topic id as Kafka's tools print it (kafka-topics.sh --describe, brook topics).
        log.info(
            "Created topic %s with %s (topic id %s)",
            name,
            partitions(len(topic.partitions)),
            topic_id_to_string(topic.topic_id),
        )
        return topic

    def delete(self, name: str) -> TopicMetadata:
        if not self._config()["delete.topic.enable"]:
            raise TopicDeletionDisabledError("Topic deletion is disabled.")
        topic = self._cache.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
        self._apply(f"delete topic {name}", [RemoveTopicRecord(topic.topic_id)])
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
        topic = self._cache.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        check_partition_increase(name, current, new_total, assignments)
        if assignments is not None:
            replication_factor = len(topic.partitions[0].replicas)
            for broker_ids in assignments:
                validate_manual_assignment(broker_ids, replication_factor, self.live_brokers)
        if validate_only:
            return
        self._apply(
            f"add partitions to {name}", self._new_partitions(topic.topic_id, current, new_total)
        )
        log.info("Topic %s now has %s", name, partitions(new_total))

    def set_configs(self, name: str, configs: dict[str, Any]) -> None:
        """Replace a topic's overrides (validated by the caller); its logs follow at once."""
        topic = self._cache.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic {name} does not exist")
        self._apply(f"alter the configs of {name}", [TopicConfigsRecord(topic.topic_id, configs)])

    # --- what the handlers call (the ZooKeeper controller writes znodes and waits) -------

    async def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, Any],
        assignments: dict[int, list[int]] | None = None,
        timeout_ms: int = 0,
    ) -> uuid.UUID:
        """CreateTopics: the topic made (a manual assignment names this broker only), its
        logs made in slices while the broker serves others."""
        records = self._creation(name, num_partitions, replication_factor, configs, False)
        await self._apply_in_slices(f"create topic {name}", records)
        return self._created(name).topic_id

    def auto_create(self, name: str) -> TopicMetadata:
        """A Metadata request's auto-creation of a topic with the broker's defaults."""
        return self.create(name)

    async def delete_topic(self, name: str, timeout_ms: int = 0) -> uuid.UUID:
        return self.delete(name).topic_id

    async def create_partitions(
        self,
        name: str,
        new_total: int,
        assignments: list[list[int]] | None = None,
        validate_only: bool = False,
        timeout_ms: int = 0,
    ) -> None:
        self.add_partitions(name, new_total, assignments, validate_only)

    async def alter_topic_configs(self, name: str, configs: dict[str, Any]) -> None:
        self.set_configs(name, configs)

    def _new_partitions(self, topic_id: uuid.UUID, first: int, end: int) -> list[MetadataRecord]:
        me = (self.broker_id,)
        return [
            PartitionRecord(topic_id, index, me, me, self.broker_id) for index in range(first, end)
        ]

    def _apply(self, action: str, records: list[MetadataRecord]) -> None:
        try:
            self._publisher.apply(records)
        except (OSError, KafkaStorageError) as exc:
            raise _not_kept(action, exc) from None

    async def _apply_in_slices(self, action: str, records: list[MetadataRecord]) -> None:
        try:
            await self._publisher.apply_in_slices(records)
        except (OSError, KafkaStorageError) as exc:
            raise _not_kept(action, exc) from None


def _not_kept(action: str, exc: OSError | KafkaStorageError) -> KafkaStorageError:
    """A change that could not be made, logged, as the client is told (the log manager
    reports its own failures as KAFKA_STORAGE_ERROR already; a failure of the store's own
    files arrives as an OSError)."""
    reason = exc.message if isinstance(exc, KafkaStorageError) else exc.strerror or str(exc)
    log.error("Could not %s: %s; nothing of it was kept", action, reason)
    return KafkaStorageError(f"Could not {action}: {reason}.")


def check_partition_increase(
    name: str, current: int, new_total: int, assignments: list[list[int]] | None
) -> None:
    """CreatePartitions' checks of the new count (and of the assignments' count), with
    Kafka's messages; the replicas of each assignment are checked by the caller."""
    if new_total == current:
        raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
    if new_total < current:
        raise InvalidPartitionsError(
            f"The topic {name} currently has {current} partition(s); {new_total} would"
            " not be an increase."
        )
    additional = new_total - current
    if assignments is not None and len(assignments) != additional:
        raise InvalidReplicaAssignmentError(
            f"Attempted to add {additional} additional partition(s), but only"
            f" {len(assignments)} assignment(s) were specified."
        )


def partitions(count: int) -> str:
    """ "1 partition", "3 partitions"."""
    return f"{count} partition" if count == 1 else f"{count} partitions"
