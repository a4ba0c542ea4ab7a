"""Writing a transaction's COMMIT or ABORT markers (Kafka's TransactionMarkerChannelManager):
one marker to every partition of the transaction, then the Complete state.

A partition this broker leads gets its marker here: a data partition through the log
writer as the coordinator's own append, a `__consumer_offsets` partition through the
group coordinator, whose shards then apply or drop the transaction's offsets. A partition
another broker leads gets it by WriteTxnMarkers sent to that broker, whose handler writes
it the same way. A partition that no longer exists needs no marker. A write that fails
(a full disk, an offline dir, a leader away) is tried again after a pause, as Kafka
retries its marker requests: the transaction stays in PrepareCommit/PrepareAbort
meanwhile and its producer gets CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1 import request as markers_request
from kio.static.primitive import i16, i32

from brook.coordinator_state.transaction_metadata import TransactionMetadata, TransactionState
from brook.protocol.coordinator_records import CONSUMER_OFFSETS_TOPIC, ControlRecordType
from brook.protocol.errors import ErrorCode, KafkaError, LeaderNotAvailableError
from brook.storage.clock import Clock

from ..coordinator.partition_writer import PartitionWriter, TopicPartition
from ..groups.coordinator import GroupCoordinator
from ..server.crash_points import TRANSACTION_MARKER_WRITTEN, crash_point
from ..server.inter_broker import InterBrokerClients

log = logging.getLogger("brook.transactions.markers")

RETRY_BACKOFF_S = 1.0
# The coordinator epoch of markers written without a route (tests' coordinators).
NO_ROUTE_COORDINATOR_EPOCH = 0

# Called once every marker is written: the transaction may become Complete.
OnMarkersWritten = Callable[[TransactionMetadata], Any]


@dataclass(frozen=True)
class MarkerRoute:
    """Where a partition's marker goes: the partition's leader (-1: none now; None: no
    such partition), this broker's id, and the connections to the others."""

    leader_of: Callable[[str, int], int | None]
    local_broker_id: int
    clients: InterBrokerClients
    # The coordinator epoch a transactional id's markers carry: the leader epoch of its
    # `__transaction_state` partition, so that a partition refuses the late markers of
    # a coordinator that has been replaced (TRANSACTION_COORDINATOR_FENCED).
    coordinator_epoch_of: Callable[[str], int]


class TransactionMarkerWriter:
    def __init__(
        self,
        writer: PartitionWriter,
        groups: GroupCoordinator,
        on_written: OnMarkersWritten,
        clock: Clock,
        route: MarkerRoute | None = None,
    ) -> None:
        self._clock = clock
        self._route = route  # None: every partition is led here (a single broker)
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
                self._route.coordinator_epoch_of(prepared.transactional_id)
                if self._route is not None
                else NO_ROUTE_COORDINATOR_EPOCH,
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
        """Write one marker to the partition's leader and wait for its commit; raises
        the KafkaError that kept it from being written."""
        route = self._route
        leader = route.leader_of(topic, partition) if route is not None else None
        if route is None or leader is None or leader == route.local_broker_id:
            # Led here, or gone (the local write answers UNKNOWN_TOPIC_OR_PARTITION).
            await self.write_marker_locally(
                topic, partition, producer_id, producer_epoch, coordinator_epoch, result
            )
            return
        if leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader now")
        response = await route.clients.request(
            leader,
            markers_request.WriteTxnMarkersRequest(
                markers=(
                    markers_request.WritableTxnMarker(
                        producer_id=ProducerId(producer_id),
                        producer_epoch=i16(producer_epoch),
                        transaction_result=result is ControlRecordType.COMMIT,
                        topics=(
                            markers_request.WritableTxnMarkerTopic(
                                name=TopicName(topic), partition_indexes=(i32(partition),)
                            ),
                        ),
                        coordinator_epoch=i32(coordinator_epoch),
                    ),
                )
            ),
        )
        error = ErrorCode(response.markers[0].topics[0].partitions[0].error_code)
        if error is not ErrorCode.none:
            raise KafkaError.with_code(error, f"broker {leader} answered {error.name}")

    async def write_marker_locally(
        self,
        topic: str,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType,
    ) -> None:
        """Write one marker into a partition this broker leads and wait for its commit
        (WriteTxnMarkers' handler too)."""
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
