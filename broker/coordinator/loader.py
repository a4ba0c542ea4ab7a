"""Replay of one partition into a shard, as Kafka's CoordinatorLoader does.

Every committed batch, in order: the records of a data batch with the batch's producer
id and epoch, and the end-transaction markers of control batches, so that a shard can
apply or drop what a transaction wrote. A long load logs its progress and gives the
event loop a turn between chunks, so the broker keeps serving other partitions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from brook.protocol import coordinator_records as cr

from .partition_writer import PartitionWriter, TopicPartition
from .records import StoredBatch
from .shard import CoordinatorShard

log = logging.getLogger("brook.coordinator.loader")

BATCHES_PER_TURN = 1000
PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True)
class LoadSummary:
    batches: int
    records: int
    markers: int
    end_offset: int
    elapsed_ms: float


class CoordinatorLoader:
    def __init__(self, writer: PartitionWriter) -> None:
        self.writer = writer

    async def load(self, tp: TopicPartition, shard: CoordinatorShard) -> LoadSummary:
        started = time.monotonic()
        last_report = started
        batches = records = markers = 0
        end_offset = 0
        for batch in self.writer.read(tp):
            if batch.is_control:
                markers += self._replay_markers(shard, batch)
            else:
                for record in batch.records:
                    if record.key is None:
                        log.warning(
                            "%s: skipping a record without a key at offset %d", tp, record.offset
                        )
                        continue
                    shard.replay(
                        record.offset,
                        batch.producer_id,
                        batch.producer_epoch,
                        record.key,
                        record.value,
                    )
                    records += 1
            batches += 1
            end_offset = batch.next_offset
            if batches % BATCHES_PER_TURN == 0:
                now = time.monotonic()
                if now - last_report >= PROGRESS_EVERY_S:
                    log.info("Loading %s: %d records up to offset %d", tp, records, end_offset)
                    last_report = now
                await asyncio.sleep(0)
        return LoadSummary(
            batches, records, markers, end_offset, (time.monotonic() - started) * 1000
        )

    @staticmethod
    def _replay_markers(shard: CoordinatorShard, batch: StoredBatch) -> int:
        """A control batch's transaction markers (other control records are Raft's)."""
        markers = 0
        for record in batch.records:
            if record.key is None:
                continue
            key = cr.decode_control_key(record.key)
            if key.type in (cr.ControlRecordType.COMMIT, cr.ControlRecordType.ABORT):
                shard.replay_end_transaction_marker(
                    batch.producer_id, batch.producer_epoch, cr.ControlRecordType(key.type)
                )
                markers += 1
        return markers
