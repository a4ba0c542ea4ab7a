"""The PartitionWriter over the broker's own partitions.

Appends go through the ReplicaManager's append entry point as the coordinator's own
writes (AppendOrigin.COORDINATOR, acks=all as Kafka's coordinators write), made when they
are asked for; they are committed when the partition's high watermark passes them (at
once on a single broker, once every in-sync replica has them with replication). Replay
reads only what is committed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from brook.protocol.coordinator_records import ControlRecordType
from brook.storage.log_validator import AppendOrigin

from ..replica.append_records import AppendResults
from ..replica.partition import ACKS_ALL, FetchIsolation
from .partition_writer import Appended, TopicPartition
from .records import (
    CoordinatorRecord,
    StoredBatch,
    TransactionalProducer,
    encode_end_transaction_marker,
    encode_write,
    stored_batches,
)

if TYPE_CHECKING:
    from ..replica.replica_manager import ReplicaManager

READ_CHUNK_BYTES = 8 * 1024 * 1024


class LogPartitionWriter:
    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas

    def append(
        self,
        tp: TopicPartition,
        records: Sequence[CoordinatorRecord],
        now_ms: int,
        producer: TransactionalProducer | None = None,
    ) -> Appended:
        return self._append(tp, encode_write(records, now_ms, producer), now_ms)

    def append_end_transaction_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType,
        now_ms: int,
    ) -> Appended:
        marker = encode_end_transaction_marker(
            producer_id, producer_epoch, coordinator_epoch, result, now_ms
        )
        return self._append(tp, marker, now_ms)

    def _append(self, tp: TopicPartition, records: bytearray, now_ms: int) -> Appended:
        """Append now (raising the partition's error when it refuses), committed later."""
        results = self._replicas.append_records(
            [((tp.topic, tp.partition), records)],
            required_acks=ACKS_ALL,
            origin=AppendOrigin.COORDINATOR,
            timeout_s=None,
            now_ms=now_ms,
        )
        response = results.responses[0]
        response.raise_error()
        return Appended(response.base_offset, response.next_offset, _committed(results))

    def read(self, tp: TopicPartition) -> Iterator[StoredBatch]:
        partition = self._replicas.partition(tp.topic, tp.partition)
        offset = partition.log_start_offset
        # To the log end, as Kafka's coordinator loader reads: a new leader's high
        # watermark may lag what it has, and everything it has stays (a leader never
        # truncates its own log), so the records past it are the partition's all the same.
        while offset < partition.log_end_offset:
            data = partition.read_records(
                offset, READ_CHUNK_BYTES, FetchIsolation.LOG_END, min_one_message=True
            )
            read_any = False
            for batch in stored_batches(bytes(data.records)):
                yield batch
                offset = batch.next_offset
                read_any = True
            if not read_any:
                break


async def _committed(results: AppendResults) -> None:
    """Once the append is committed; its error when the partition's leadership goes first."""
    if results.completion is not None:
        await results.completion
    results.responses[0].raise_error()
