"""ListOffsets (v2) at each partition's leader: the log start (EARLIEST), the log end
(LATEST) or the first offset at or after a timestamp. A partition whose leader moved or
is missing is asked again where fresh metadata says, as Kafka's AdminClient does."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from ..wire_client import KafkaCluster, Node, by_topic

EARLIEST, LATEST = -2, -1  # the specs besides a timestamp (ms)
READ_UNCOMMITTED = 0
CONSUMER = -1  # ListOffsets' replica id of a client

TopicPartition = tuple[str, int]
Offset = tuple[ErrorCode, int]  # the offset (-1: none at or after the timestamp)


def list_offsets(
    cluster: KafkaCluster, partitions: Iterable[TopicPartition], spec: int
) -> dict[TopicPartition, Offset]:
    """Each partition's offset for `spec`, or its error (UNKNOWN_TOPIC_OR_PARTITION for
    a topic or partition that does not exist)."""
    from kio.schema.list_offsets.v2 import request as list2

    def attempt(pending: list[TopicPartition]) -> dict[TopicPartition, Offset]:
        metadata = cluster.metadata(sorted({topic for topic, _ in pending}))
        answered: dict[TopicPartition, Offset] = {}
        by_leader: dict[Node, list[TopicPartition]] = {}
        for tp in pending:
            topic, index = tp
            if topic in metadata.missing:
                answered[tp] = (metadata.missing[topic], -1)
                continue
            leaders = {p.partition: p.leader for p in metadata.topics.get(topic, [])}
            if index not in leaders:
                answered[tp] = (ErrorCode.unknown_topic_or_partition, -1)
            elif leaders[index] not in metadata.brokers:
                answered[tp] = (ErrorCode.leader_not_available, -1)
            else:
                by_leader.setdefault(metadata.brokers[leaders[index]], []).append(tp)
        for leader, asked in by_leader.items():
            response = cluster.request(
                leader,
                list2.ListOffsetsRequest(
                    replica_id=BrokerId(CONSUMER),
                    isolation_level=i8(READ_UNCOMMITTED),
                    topics=tuple(
                        list2.ListOffsetsTopic(
                            name=TopicName(topic),
                            partitions=tuple(
                                list2.ListOffsetsPartition(
                                    partition_index=i32(index), timestamp=i64(spec)
                                )
                                for index in indexes
                            ),
                        )
                        for topic, indexes in by_topic(asked).items()
                    ),
                ),
            )
            for topic_answer in response.topics:
                for partition in topic_answer.partitions:
                    answered[(topic_answer.name, partition.partition_index)] = (
                        partition.error_code,
                        partition.offset,
                    )
        return answered

    return cluster.settle(partitions, attempt, lambda offset: offset[0])
