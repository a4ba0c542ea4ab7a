"""AlterPartitionReassignments and ListPartitionReassignments (v0), at the controller;
NOT_CONTROLLER (the controller moving) asked again once it is found anew."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32

from ..wire_client import ApiError, KafkaCluster, by_topic

TopicPartition = tuple[str, int]
ReplicaMove = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _at_controller(cluster: KafkaCluster, request: Any) -> Any:
    def attempt() -> Any:
        response = cluster.request(cluster.controller(), request)
        if response.error_code != ErrorCode.none:
            raise ApiError(response.error_code)
        return response

    return cluster.retrying(attempt)


def alter_partition_reassignments(
    cluster: KafkaCluster, moves: Mapping[TopicPartition, list[int] | None]
) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
    """Each partition's error and message (replicas None: cancel its reassignment)."""
    from kio.schema.alter_partition_reassignments.v0 import request as alter0

    by_name: dict[str, list[alter0.ReassignablePartition]] = {}
    for (topic, index), replicas in sorted(moves.items()):
        by_name.setdefault(topic, []).append(
            alter0.ReassignablePartition(
                partition_index=i32(index),
                replicas=None if replicas is None else tuple(BrokerId(r) for r in replicas),
            )
        )
    response = _at_controller(
        cluster,
        alter0.AlterPartitionReassignmentsRequest(
            topics=tuple(
                alter0.ReassignableTopic(name=TopicName(topic), partitions=tuple(partitions))
                for topic, partitions in by_name.items()
            ),
        ),
    )
    return {
        (topic.name, p.partition_index): (p.error_code, p.error_message)
        for topic in response.responses
        for p in topic.partitions
    }


def list_partition_reassignments(
    cluster: KafkaCluster, partitions: Iterable[TopicPartition] | None = None
) -> dict[TopicPartition, ReplicaMove]:
    """(replicas, adding, removing) of each partition being moved, of `partitions`
    (None: every one)."""
    from kio.schema.list_partition_reassignments.v0 import request as list0

    topics = None
    if partitions is not None:
        topics = tuple(
            list0.ListPartitionReassignmentsTopics(
                name=TopicName(topic), partition_indexes=tuple(i32(p) for p in indexes)
            )
            for topic, indexes in by_topic(partitions).items()
        )
    response = _at_controller(cluster, list0.ListPartitionReassignmentsRequest(topics=topics))
    return {
        (topic.name, p.partition_index): (
            tuple(p.replicas),
            tuple(p.adding_replicas),
            tuple(p.removing_replicas),
        )
        for topic in response.topics
        for p in topic.partitions
    }
