"""ElectLeaders (v1) at the controller; a partition answered NOT_CONTROLLER is asked
again once the controller is found anew."""

from __future__ import annotations

from collections.abc import Iterable

from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32

from ..wire_client import ApiError, KafkaCluster, by_topic, operation_timeout

ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}

TopicPartition = tuple[str, int]
Outcome = tuple[ErrorCode, str | None]


def elect_leaders(
    cluster: KafkaCluster, election_type: str, partitions: Iterable[TopicPartition] | None
) -> dict[TopicPartition, Outcome]:
    """Each partition's outcome (ELECTION_NOT_NEEDED: it has its leader already).
    `partitions` None asks for every partition: the controller answers those it elected
    or failed to elect."""
    from kio.schema.elect_leaders.v1 import request as elect1

    def attempt(asked: list[TopicPartition] | None) -> dict[TopicPartition, Outcome]:
        response = cluster.request(
            cluster.controller(),
            elect1.ElectLeadersRequest(
                election_type=i8(ELECTION_TYPES[election_type]),
                topic_partitions=None
                if asked is None
                else tuple(
                    elect1.TopicPartitions(
                        topic=TopicName(topic), partitions=tuple(i32(p) for p in indexes)
                    )
                    for topic, indexes in by_topic(asked).items()
                ),
                timeout=operation_timeout(cluster),
            ),
        )
        if response.error_code != ErrorCode.none:
            raise ApiError(response.error_code)
        return {
            (result.topic, p.partition_id): (p.error_code, p.error_message)
            for result in response.replica_election_results
            for p in result.partition_result
        }

    if partitions is not None:
        return cluster.settle(partitions, attempt, lambda outcome: outcome[0])

    def every_partition() -> dict[TopicPartition, Outcome]:
        answered = attempt(None)
        if any(code == ErrorCode.not_controller for code, _ in answered.values()):
            raise ApiError(ErrorCode.not_controller)  # the controller moved: ask it all again
        return answered

    return cluster.retrying(every_partition)
