"""The internal topic a coordinator keeps its state in, as the runtime needs it.

Which partition holds a key (Kafka's abs(hashCode) % partitions, from
protocol/coordinator_records.py), how many partitions it has (None until it exists) and
how to create it: the broker
creates it with the coordinator's settings the first time a client looks for a
coordinator, as Kafka does; tests give a topic that exists already.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..metadata.cache import MetadataCache
    from ..metadata.controller import Controller


@dataclass(frozen=True)
class InternalTopic:
    name: str
    partition_of: Callable[[str, int], int]
    partition_count: Callable[[], int | None]
    create: Callable[[], None]
    # Whether this broker leads a partition: its coordinator is the one to load it.
    leads: Callable[[int], bool] = lambda partition: True


def broker_internal_topic(
    name: str,
    partition_of: Callable[[str, int], int],
    metadata: MetadataCache,
    controller: Controller,
    config: Callable[[], Any],
    config_prefix: str,
    compression_type: str,
    topic_configs: Callable[[Any], dict[str, str]] = lambda settings: {},
) -> InternalTopic:
    """A coordinator's topic as the broker keeps it: its partitions from the metadata,
    created compacted with the `<config_prefix>num.partitions`, `replication.factor` and
    `segment.bytes` settings in force (`offsets.topic.`, `transaction.state.log.`), and
    the `topic_configs` of the settings that the topic's coordinator adds."""

    def partition_count() -> int | None:
        topic = metadata.get(name)
        return len(topic.partitions) if topic is not None else None

    def leads(partition: int) -> bool:
        topic = metadata.get(name)
        return topic is not None and topic.partitions[partition].leader == controller.broker_id

    def create() -> None:
        settings = config()
        controller.create(
            name,
            settings[f"{config_prefix}num.partitions"],
            settings[f"{config_prefix}replication.factor"],
            {
                "cleanup.policy": "compact",
                "compression.type": compression_type,
                "segment.bytes": str(settings[f"{config_prefix}segment.bytes"]),
                **topic_configs(settings),
            },
            internal=True,
        )

    return InternalTopic(name, partition_of, partition_count, create, leads)
