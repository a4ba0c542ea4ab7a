"""Writing a transaction's COMMIT or ABORT markers (Kafka's TransactionMarkerChannelManager,
on one broker): one marker to every partition of the transaction, then the Complete state.

Data partitions get the marker through the log writer as the coordinator's own append;
`__consumer_offsets` partitions get it through the group coordinator, whose shards then
apply or drop the transaction's offsets. A partition that no longer exists needs no
marker. A write that fails (a full disk, an offline dir) is tried again after a pause,
as Kafka retries its marker requests: the transaction stays in PrepareCommit/PrepareAbort
meanwhile and its producer gets CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from brook.protocol.coordinator_records import CONSUMER_OFFSETS_TOPIC, ControlRecordType
from brook.protocol.errors import ErrorCode, KafkaError
from brook.storage.clock import Clock

from ..coordinator.partition_writer import PartitionWriter, TopicPartition
from ..crash_points import TRANSACTION_MARKER_WRITTEN, crash_point
from ..groups.coordinator import GroupCoordinator
from .metadata import TransactionMetadata, TransactionState

log = logging.getLogger("brook.transactions.markers")

RETRY_BACKOFF_S = 1.0
# What the coordinators of a single broker stamp on their markers (the leader epoch of
# the `__transaction_state` partition, 0 while nothing replicates it).
COORDINATOR_EPOCH = 0

# Called once every marker is written: the transaction may become Complete.
OnMarkersWritten = Callable[[TransactionMetadata], Any]


class TransactionMarkerWriter:
    def __init__(
        self,
        writer: PartitionWriter,
        groups: GroupCoordinator,
        on_written: OnMarkersWritten,
        clock: Clock,
    ) -> None:
        self._clock = clock
        self._writer = writer
        self._groups = groups
        self._on_written = on_written
        self._tasks: set[asyncio.Task[None]] = set()

    def write(self, prepared: TransactionMetadata) -> None:
        """Start writing the markers of a PrepareCommit/PrepareAbort transaction."""
        task = asyncio.get_running_loop().create_task(self._write_all(prepared))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def _write_all(self, prepared: TransactionMetadata) -> None:
        result = (
            ControlRecordType.COMMIT
            if prepared.state is TransactionState.PREPARE_COMMIT
            else ControlRecordType.ABORT
        )
        pending = sorted(prepared.partitions)
        while pending:
            pending = [tp for tp in pending if not await self._write_one(prepared, tp, result)]
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        self._on_written(prepared)

    async def _write_one(
        self, prepared: TransactionMetadata, tp: tuple[str, int], result: ControlRecordType
    ) -> bool:
        """Whether the partition has its marker (or needs none)."""
        topic, partition = tp
        try:
            await self.write_marker(
                topic,
                partition,
                prepared.producer_id,
                prepared.producer_epoch,
                COORDINATOR_EPOCH,
                result,
            )
        except KafkaError as exc:
            if exc.error_code is ErrorCode.unknown_topic_or_partition:
                log.info(
                    "No %s marker for %s-%d of transactional id %s: the partition is gone",
                    result.name,
                    topic,
                    partition,
                    prepared.transactional_id,
                )
                return True
            log.warning(
                "Could not write the %s marker of transactional id %s to %s-%d: %s; retrying",
                result.name,
                prepared.transactional_id,
                topic,
                partition,
                exc.message or exc.error_code.name,
            )
            return False
        crash_point(TRANSACTION_MARKER_WRITTEN)
        return True

    async def write_marker(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType,
    ) -> None:
        """Write one marker and wait for its commit (WriteTxnMarkers does this too);
        raises the KafkaError that kept it from being written."""
        if topic == CONSUMER_OFFSETS_TOPIC:
            await self._groups.complete_transaction(
                partition, producer_id, producer_epoch, coordinator_epoch, result
            )
        else:
            await self._writer.append_end_transaction_marker(
                TopicPartition(topic, partition),
                producer_id,
                producer_epoch,
                coordinator_epoch,
                result,
                self._clock(),
            )
