"""CreateTopics (v5), DeleteTopics (v5) and CreatePartitions (v2), each sent to the
controller, a topic answered NOT_CONTROLLER sent again once the controller is found anew."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32

from ..wire_client import KafkaCluster, operation_timeout

# Each topic's error code and the broker's message (NONE when it was done).
Outcome = tuple[ErrorCode, str | None]


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1  # -1: the broker's num.partitions
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: Mapping[str, str] | None = None


def create_topics(cluster: KafkaCluster, topics: list[NewTopic]) -> dict[str, Outcome]:
    from kio.schema.create_topics.v5 import request as create5

    wanted = {topic.name: topic for topic in topics}

    def attempt(names: list[str]) -> dict[str, Outcome]:
        request = create5.CreateTopicsRequest(
            topics=tuple(
                create5.CreatableTopic(
                    name=TopicName(name),
                    num_partitions=i32(wanted[name].num_partitions),
                    replication_factor=i16(wanted[name].replication_factor),
                    assignments=(),
                    configs=tuple(
                        create5.CreatableTopicConfig(name=key, value=value)
                        for key, value in (wanted[name].configs or {}).items()
                    ),
                )
                for name in names
            ),
            timeout=operation_timeout(cluster),
            validate_only=False,
        )
        response = cluster.request(cluster.controller(), request)
        return {t.name: (t.error_code, t.error_message) for t in response.topics}

    return cluster.settle(wanted, attempt, lambda outcome: outcome[0])


def delete_topics(cluster: KafkaCluster, names: list[str]) -> dict[str, Outcome]:
    from kio.schema.delete_topics.v5.request import DeleteTopicsRequest

    def attempt(pending: list[str]) -> dict[str, Outcome]:
        request = DeleteTopicsRequest(
            topic_names=tuple(TopicName(name) for name in pending),
            timeout=operation_timeout(cluster),
        )
        response = cluster.request(cluster.controller(), request)
        return {t.name: (t.error_code, t.error_message) for t in response.responses}

    return cluster.settle(names, attempt, lambda outcome: outcome[0])


def create_partitions(cluster: KafkaCluster, counts: Mapping[str, int]) -> dict[str, Outcome]:
    """Raise each topic's partition count to `counts[topic]`."""
    from kio.schema.create_partitions.v2 import request as partitions2

    def attempt(pending: list[str]) -> dict[str, Outcome]:
        request = partitions2.CreatePartitionsRequest(
            topics=tuple(
                partitions2.CreatePartitionsTopic(
                    name=TopicName(name), count=i32(counts[name]), assignments=None
                )
                for name in pending
            ),
            timeout=operation_timeout(cluster),
            validate_only=False,
        )
        response = cluster.request(cluster.controller(), request)
        return {t.name: (t.error_code, t.error_message) for t in response.results}

    return cluster.settle(counts, attempt, lambda outcome: outcome[0])
