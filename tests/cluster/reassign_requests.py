"""AlterPartitionReassignments and ListPartitionReassignments sent by hand (raw, v0) to
exactly one broker, and a topic's znode as Kafka's tools read it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.integration.raw_client import RawClient

from .harness import ZooKeeperView

TopicPartition = tuple[str, int]


def alter(
    port: int, moves: Mapping[TopicPartition, Sequence[int] | None]
) -> tuple[int, dict[TopicPartition, tuple[int, str | None]]]:
    """The top-level error and each partition's (error, message)."""
    from kio.schema.alter_partition_reassignments.v0 import request as alter0

    by_topic: dict[str, list[Any]] = {}
    for (topic, index), replicas in moves.items():
        by_topic.setdefault(topic, []).append(
            alter0.ReassignablePartition(
                partition_index=index, replicas=None if replicas is None else tuple(replicas)
            )
        )
    request = alter0.AlterPartitionReassignmentsRequest(
        topics=tuple(
            alter0.ReassignableTopic(name=topic, partitions=tuple(partitions))
            for topic, partitions in by_topic.items()
        )
    )
    with RawClient(port) as client:
        response = client.request(request)
    return response.error_code, {
        (topic.name, p.partition_index): (p.error_code, p.error_message)
        for topic in response.responses
        for p in topic.partitions
    }


def ongoing(
    port: int, partitions: Sequence[TopicPartition] | None = None
) -> tuple[int, dict[TopicPartition, tuple[list[int], list[int], list[int]]]]:
    """The top-level error and each listed partition's (replicas, adding, removing)."""
    from kio.schema.list_partition_reassignments.v0 import request as list0

    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        topics = tuple(
            list0.ListPartitionReassignmentsTopics(name=topic, partition_indexes=tuple(indexes))
            for topic, indexes in by_topic.items()
        )
    with RawClient(port) as client:
        response = client.request(list0.ListPartitionReassignmentsRequest(topics=topics))
    return response.error_code, {
        (topic.name, p.partition_index): (
            list(p.replicas),
            list(p.adding_replicas),
            list(p.removing_replicas),
        )
        for topic in response.topics
        for p in topic.partitions
    }


def topic_znode(zk: ZooKeeperView, topic: str) -> dict[str, Any]:
    return zk.json(f"/brokers/topics/{topic}")  # type: ignore[no-any-return]


def moved_to(zk: ZooKeeperView, topic: str, partition: int, replicas: list[int]) -> bool:
    """The move of `partition` is complete: its replicas are `replicas`, nothing moving."""
    held = topic_znode(zk, topic)
    return (
        held["partitions"][str(partition)] == replicas
        and str(partition) not in held["adding_replicas"]
        and str(partition) not in held["removing_replicas"]
    )
