"""Metadata changes as records, in the shape of Kafka's KRaft metadata records.

A controller turns a request (CreateTopics, CreatePartitions, DeleteTopics, AlterConfigs)
into records; the publisher applies them. The same records rebuild the state at start.
They are immutable values; NamedTuples rather than frozen dataclasses because a
broker defines them at every start, and a frozen dataclass costs eight times as much to
define (half a millisecond each on a small machine).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple


class TopicRecord(NamedTuple):
    name: str
    topic_id: uuid.UUID


class PartitionRecord(NamedTuple):
    topic_id: uuid.UUID
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    # Bumped by every change of the registration (the state znode's version in
    # ZooKeeper): an ISR change proposed against an older one is refused.
    partition_epoch: int = 0


class BrokerEndpoint(NamedTuple):
    """One advertised listener of a broker (Kafka's BrokerEndpoint)."""

    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


class RegisterBrokerRecord(NamedTuple):
    """A broker is alive, reachable at its endpoints (ZooKeeper: /brokers/ids/<id>)."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    # The broker asked to stop and is handing its partitions over (KRaft's
    # BrokerRegistration.inControlledShutdown): it still fetches, but leaders take it
    # into no ISR (KIP-841), so the controller's removals from the ISRs hold.
    in_controlled_shutdown: bool = False


class UnregisterBrokerRecord(NamedTuple):
    """A broker is gone (its registration znode went with its session)."""

    broker_id: int


class TopicConfigsRecord(NamedTuple):
    """A topic's whole set of config overrides (Kafka writes a ConfigRecord a key)."""

    topic_id: uuid.UUID
    configs: Mapping[str, Any] = MappingProxyType({})


class RemoveTopicRecord(NamedTuple):
    topic_id: uuid.UUID


MetadataRecord = (
    TopicRecord
    | PartitionRecord
    | TopicConfigsRecord
    | RemoveTopicRecord
    | RegisterBrokerRecord
    | UnregisterBrokerRecord
)
