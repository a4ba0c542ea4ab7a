"""The PartitionWriter over the broker's own partitions.

Appends go through Partition.append_as_leader like any leader write; `_committed` is the
one place that decides when they are committed, so that it can follow the partition's
high watermark once appends wait for the in-sync replicas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from brook.protocol.errors import NotEnoughReplicasError
from brook.protocol.record_batch import split_batches

from ..partition import Partition
from .partition_writer import Appended, TopicPartition
from .records import CoordinatorRecord, StoredBatch, encode_batch, stored_batches

READ_CHUNK_BYTES = 8 * 1024 * 1024


class LogPartitionWriter:
    def __init__(self, partition_of: Callable[[str, int], Partition]) -> None:
        # The broker's lookup (TopicManager.partition): it raises UNKNOWN_TOPIC_OR_PARTITION
        # for a partition it does not host and KAFKA_STORAGE_ERROR for an offline one.
        self._partition_of = partition_of

    def append(
        self, tp: TopicPartition, records: Sequence[CoordinatorRecord], now_ms: int
    ) -> Appended:
        partition = self._partition_of(tp.topic, tp.partition)
        buffer = encode_batch(records, now_ms)
        base_offset = partition.log_end_offset
        partition.append_as_leader(buffer, split_batches(buffer), now_ms)
        next_offset = partition.log_end_offset
        return Appended(base_offset, next_offset, self._committed(partition, next_offset))

    async def _committed(self, partition: Partition, offset: int) -> None:
        # A single broker is the whole ISR: append_as_leader has moved the high watermark
        # to the log end already.
        if partition.high_watermark < offset:
            raise NotEnoughReplicasError(
                f"{partition.topic}-{partition.index}: high watermark"
                f" {partition.high_watermark} short of {offset}"
            )

    def read(self, tp: TopicPartition) -> Iterator[StoredBatch]:
        partition = self._partition_of(tp.topic, tp.partition)
        offset = partition.log_start_offset
        while offset < partition.high_watermark:
            data = partition.log.read(
                offset, READ_CHUNK_BYTES, max_offset=partition.high_watermark, min_one_message=True
            )
            read_any = False
            for batch in stored_batches(bytes(data.records)):
                yield batch
                offset = batch.next_offset
                read_any = True
            if not read_any:
                break
