"""The MetadataCache: topics, their ids, configs and partition registrations.

Handlers read it; only the publisher changes it (MetadataCache.apply), so what a request
sees is always a whole change, never half of one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicConfigsRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class PartitionRegistration(NamedTuple):
    """One partition's registration (a NamedTuple: many are made at every start)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int = 0


@dataclass(eq=False)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, Any] = field(default_factory=dict)
    partitions: list[PartitionRegistration] = field(default_factory=list)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataCache:
    def __init__(self) -> None:
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}
        self._brokers: dict[int, RegisterBrokerRecord] = {}
        # Bumped by every change, so that what is derived from the topics (a consumer
        # group's metadata hash and regex matches) is computed again only after one.
        self.version = 0

    def get(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def get_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def topics(self) -> Iterator[TopicMetadata]:
        return iter(list(self._topics.values()))

    def names(self) -> list[str]:
        return list(self._topics)

    def brokers(self) -> list[RegisterBrokerRecord]:
        """The live brokers, by id."""
        return [self._brokers[broker_id] for broker_id in sorted(self._brokers)]

    def broker(self, broker_id: int) -> RegisterBrokerRecord | None:
        return self._brokers.get(broker_id)

    def isr_eligible(self, broker_id: int) -> bool:
        """Whether a broker's replicas may join an ISR (Kafka's isReplicaIsrEligible,
        KIP-841): it is registered and not in controlled shutdown."""
        broker = self._brokers.get(broker_id)
        return broker is not None and not broker.in_controlled_shutdown

    def endpoint(self, broker_id: int, listener_name: str) -> BrokerEndpoint | None:
        """Where clients of `listener_name` reach a broker (None: not alive, or it has
        no such listener)."""
        broker = self._brokers.get(broker_id)
        if broker is None:
            return None
        return next((e for e in broker.endpoints if e.listener_name == listener_name), None)

    def reachable_on(self, listener_name: str) -> list[tuple[RegisterBrokerRecord, BrokerEndpoint]]:
        """The live brokers with their endpoints on `listener_name`, by id; one without
        that listener is left out (Kafka's rule for Metadata and DescribeCluster)."""
        found = []
        for broker in self.brokers():
            endpoint = next((e for e in broker.endpoints if e.listener_name == listener_name), None)
            if endpoint is not None:
                found.append((broker, endpoint))
        return found

    def __len__(self) -> int:
        return len(self._topics)

    def apply(self, records: Iterable[MetadataRecord]) -> None:
        self.version += 1
        for record in records:
            if isinstance(record, TopicRecord):
                topic = TopicMetadata(record.name, record.topic_id)
                self._topics[record.name] = topic
                self._by_id[record.topic_id] = topic
            elif isinstance(record, PartitionRecord):
                topic = self._by_id[record.topic_id]
                registration = PartitionRegistration(
                    record.replicas,
                    record.isr,
                    record.leader,
                    record.leader_epoch,
                    record.partition_epoch,
                )
                if record.partition_id < len(topic.partitions):
                    topic.partitions[record.partition_id] = registration
                else:
                    topic.partitions.append(registration)
            elif isinstance(record, TopicConfigsRecord):
                self._by_id[record.topic_id].configs = dict(record.configs)
            elif isinstance(record, RemoveTopicRecord):
                removed = self._by_id.pop(record.topic_id)
                del self._topics[removed.name]
            elif isinstance(record, RegisterBrokerRecord):
                self._brokers[record.broker_id] = record
            elif isinstance(record, UnregisterBrokerRecord):
                self._brokers.pop(record.broker_id, None)
