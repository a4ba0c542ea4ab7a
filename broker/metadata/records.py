"""Metadata changes as records, in the shape of Kafka's KRaft metadata records.

A controller turns a request (CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs)
into records; the publisher applies them. The same records rebuild the state at start.
They are few and short-lived, so they go without slots (a slotted dataclass costs
twice as much to define, and these are defined at every start).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True)
class PartitionRecord:
    topic_id: uuid.UUID
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    # Bumped by every change of the registration (the state znode's version in
    # ZooKeeper): an ISR change proposed against an older one is refused.
    partition_epoch: int = 0


@dataclass(frozen=True)
class BrokerEndpoint:
    """One advertised listener of a broker (Kafka's BrokerEndpoint)."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class RegisterBrokerRecord:
    """A broker is alive, reachable at its endpoints (ZooKeeper: /brokers/ids/<id>)."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None


@dataclass(frozen=True)
class UnregisterBrokerRecord:
    """A broker is gone (its registration znode went with its session)."""

    broker_id: int


@dataclass(frozen=True)
class TopicConfigsRecord:
    """A topic's whole set of config overrides (Kafka writes a ConfigRecord a key)."""

    topic_id: uuid.UUID
    configs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RemoveTopicRecord:
    topic_id: uuid.UUID


MetadataRecord = (
    TopicRecord
    | PartitionRecord
    | TopicConfigsRecord
    | RemoveTopicRecord
    | RegisterBrokerRecord
    | UnregisterBrokerRecord
)
