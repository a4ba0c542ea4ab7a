"""The PartitionWriter over the broker's own partitions.

Appends go through Partition.append_records_as_leader as the coordinator's own writes
(AppendOrigin.COORDINATOR, acks=all as Kafka's coordinators write); they are committed when
the partition's high watermark passes them (at once on a single broker, once every in-sync
replica has them with replication). Replay reads only what is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from brook.protocol.coordinator_records import ControlRecordType
from brook.storage.log_validator import AppendOrigin

from ..partition import ACKS_ALL, FetchIsolation, Partition
from .partition_writer import Appended, TopicPartition
from .records import (
    CoordinatorRecord,
    StoredBatch,
    TransactionalProducer,
    encode_end_transaction_marker,
    encode_write,
    stored_batches,
)

READ_CHUNK_BYTES = 8 * 1024 * 1024


class LogPartitionWriter:
    def __init__(self, partition_of: Callable[[str, int], Partition]) -> None:
        # The broker's lookup (ReplicaManager.partition): it raises UNKNOWN_TOPIC_OR_PARTITION
        # for a partition it does not host and KAFKA_STORAGE_ERROR for an offline one.
        self._partition_of = partition_of

    def append(
        self,
        tp: TopicPartition,
        records: Sequence[CoordinatorRecord],
        now_ms: int,
        producer: TransactionalProducer | None = None,
    ) -> Appended:
        partition = self._partition_of(tp.topic, tp.partition)
        info = partition.append_records_as_leader(
            encode_write(records, now_ms, producer), AppendOrigin.COORDINATOR, ACKS_ALL, now_ms
        )
        next_offset = info.last_offset + 1
        return Appended(info.first_offset, next_offset, self._committed(partition, next_offset))

    def append_end_transaction_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType,
        now_ms: int,
    ) -> Appended:
        partition = self._partition_of(tp.topic, tp.partition)
        marker = encode_end_transaction_marker(
            producer_id, producer_epoch, coordinator_epoch, result, now_ms
        )
        info = partition.append_records_as_leader(
            marker, AppendOrigin.COORDINATOR, ACKS_ALL, now_ms
        )
        next_offset = info.last_offset + 1
        return Appended(info.first_offset, next_offset, self._committed(partition, next_offset))

    async def _committed(self, partition: Partition, offset: int) -> None:
        waiter = partition.wait_for_commit(offset)
        if waiter is not None:
            await waiter

    def read(self, tp: TopicPartition) -> Iterator[StoredBatch]:
        partition = self._partition_of(tp.topic, tp.partition)
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
