"""The transaction admin requests: DescribeTransactions (v0) at an id's coordinator,
ListTransactions (v0) at one broker, DescribeProducers (v0) and WriteTxnMarkers (v1) at a
partition's leader (or the replica asked)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from ..common import ToolError
from ..wire_client import (
    TRANSACTION_KEY_TYPE,
    CoordinatorError,
    KafkaCluster,
    Node,
    by_topic,
    describe_transactions_response,
)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_time_ms: int  # -1: no transaction under way
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: no marker written yet
    current_txn_start_offset: int  # -1: no open transaction


@dataclass(frozen=True)
class PartitionProducers:
    error: ErrorCode
    producers: tuple[ProducerState, ...]


def describe_transaction(cluster: KafkaCluster, transactional_id: str) -> TransactionDescription:
    """DescribeTransactions of one id at its coordinator; a CoordinatorError names the
    error the coordinator answered (TRANSACTIONAL_ID_NOT_FOUND, ...)."""
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest

    node, response = cluster.at_coordinator(
        transactional_id,
        DescribeTransactionsRequest(transactional_ids=(TransactionalId(transactional_id),)),
        lambda answer: answer.transaction_states[0].error_code,
        key_type=TRANSACTION_KEY_TYPE,
        response_type=describe_transactions_response(),
    )
    [state] = response.transaction_states
    if state.error_code != ErrorCode.none:
        raise CoordinatorError(state.error_code)
    return TransactionDescription(
        coordinator_id=node.node_id,
        transactional_id=state.transactional_id,
        producer_id=state.producer_id,
        producer_epoch=state.producer_epoch,
        state=state.transaction_state,
        timeout_ms=state.transaction_timeout // datetime.timedelta(milliseconds=1),
        start_time_ms=state.transaction_start_time,
        partitions=tuple(
            (topic.topic, partition) for topic in state.topics for partition in topic.partitions
        ),
    )


def list_transactions(
    cluster: KafkaCluster, node: Node, producer_ids: Iterable[int] = ()
) -> list[TransactionListing]:
    """ListTransactions at one broker: the ids its coordinator holds (of `producer_ids`
    only, if given)."""
    from kio.schema.list_transactions.v0.request import ListTransactionsRequest

    request = ListTransactionsRequest(
        state_filters=(), producer_id_filters=tuple(ProducerId(p) for p in producer_ids)
    )

    def attempt() -> list[TransactionListing]:
        response = cluster.request(node, request)
        if response.error_code != ErrorCode.none:
            raise CoordinatorError(response.error_code)
        return [
            TransactionListing(s.transactional_id, s.producer_id, s.transaction_state)
            for s in response.transaction_states
        ]

    return cluster.retrying(attempt)


def describe_producers(
    cluster: KafkaCluster, node: Node, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, PartitionProducers]:
    """DescribeProducers at one broker: each partition's active producers or error."""
    from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest

    response = cluster.request(
        node,
        DescribeProducersRequest(
            topics=tuple(
                TopicRequest(
                    name=TopicName(topic), partition_indexes=tuple(i32(p) for p in indexes)
                )
                for topic, indexes in by_topic(partitions).items()
            )
        ),
    )
    return {
        (topic.name, partition.partition_index): PartitionProducers(
            partition.error_code,
            tuple(
                ProducerState(
                    producer_id=p.producer_id,
                    producer_epoch=p.producer_epoch,
                    last_sequence=p.last_sequence,
                    last_timestamp=p.last_timestamp,
                    coordinator_epoch=p.coordinator_epoch,
                    current_txn_start_offset=p.current_txn_start_offset,
                )
                for p in partition.active_producers
            ),
        )
        for topic in response.topics
        for partition in topic.partitions
    }


def write_abort_marker(
    cluster: KafkaCluster,
    node: Node,
    partition: TopicPartition,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
) -> ErrorCode:
    """WriteTxnMarkers v1 of one ABORT marker to one partition (at its leader)."""
    from kio.schema.write_txn_markers.v1.request import (
        WritableTxnMarker,
        WritableTxnMarkerTopic,
        WriteTxnMarkersRequest,
    )

    topic, index = partition
    response = cluster.request(
        node,
        WriteTxnMarkersRequest(
            markers=(
                WritableTxnMarker(
                    producer_id=ProducerId(producer_id),
                    producer_epoch=i16(producer_epoch),
                    transaction_result=False,  # abort
                    topics=(
                        WritableTxnMarkerTopic(
                            name=TopicName(topic), partition_indexes=(i32(index),)
                        ),
                    ),
                    coordinator_epoch=i32(coordinator_epoch),
                ),
            )
        ),
    )
    for marker in response.markers:
        for answered in marker.topics:
            for result in answered.partitions:
                if (answered.name, result.partition_index) == partition:
                    code: ErrorCode = result.error_code
                    return code
    raise ToolError(f"the broker did not answer for partition {topic}-{index}")
