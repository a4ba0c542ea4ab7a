"""Idempotent producers' state per partition, as Kafka's ProducerStateManager keeps it.

For each producer id: its epoch and the metadata of its last five batches (first and
last sequence, first and last offset). A batch is checked against it before it is
written: a retried batch that matches one of the five gets its original offsets back
instead of being written twice; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an
older epoch INVALID_PRODUCER_EPOCH.

The state survives a restart through snapshots (`<offset>.snapshot`, see
producer_snapshot.py): one is taken when a segment rolls, at the new segment's base
offset, and one at the log end when the log closes. A start loads the newest valid
snapshot and replays the batch headers that follow it. Producers idle for longer than
producer.id.expiration.ms are dropped.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.record_batch import BatchHeader

from . import log_file_utils as files
from .clock import Clock, system_clock
from .errors import CorruptSnapshotError
from .producer_snapshot import (
    NO_TXN_FIRST_OFFSET,
    SnapshotEntry,
    list_snapshot_offsets,
    read_snapshot,
    write_snapshot,
)

logger = logging.getLogger("brook.storage.producer_state")

# Kafka remembers this many batches per producer and partition (max.in.flight is 5).
BATCHES_TO_REMEMBER = 5
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
NO_COORDINATOR_EPOCH = -1
# Kafka's default producer.id.expiration.ms: a day.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


class OutOfOrderSequenceError(KafkaError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(KafkaError):
    error_code = ErrorCode.invalid_producer_epoch


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


def _batches() -> deque[BatchMetadata]:
    return deque(maxlen=BATCHES_TO_REMEMBER)


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=_batches)
    # The epoch of the transaction coordinator that wrote the producer's last marker.
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    # The max timestamp of its last batch (or marker): what expiration counts from.
    last_timestamp: int = NO_TIMESTAMP
    # The first offset of its open transaction (None: none is open).
    current_txn_first_offset: int | None = None

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].last_offset - self.batches[-1].first_offset if self.batches else 0

    def add_batch(self, header: BatchHeader) -> None:
        self.batches.append(_metadata(header))
        self.last_timestamp = header.max_timestamp

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=BATCHES_TO_REMEMBER),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def with_epoch(self, producer_epoch: int) -> ProducerStateEntry:
        """The entry under a new epoch: no batch of the old one counts any more (Kafka's
        maybeUpdateProducerEpoch), the rest carries over."""
        return ProducerStateEntry(
            self.producer_id,
            producer_epoch,
            _batches(),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    def to_snapshot_entry(self) -> SnapshotEntry:
        return SnapshotEntry(
            self.producer_id,
            self.producer_epoch,
            self.last_sequence,
            self.last_data_offset,
            self.last_offset_delta,
            self.last_timestamp,
            self.coordinator_epoch,
            NO_TXN_FIRST_OFFSET
            if self.current_txn_first_offset is None
            else self.current_txn_first_offset,
        )

    @classmethod
    def from_snapshot_entry(cls, entry: SnapshotEntry) -> ProducerStateEntry:
        """A snapshot keeps only the last batch of a producer (as Kafka's does): its
        first sequence and offset follow from the offset delta."""
        batches = _batches()
        if entry.last_offset >= 0:
            batches.append(
                BatchMetadata(
                    _decrement_sequence(entry.last_sequence, entry.offset_delta),
                    entry.last_sequence,
                    entry.last_offset - entry.offset_delta,
                    entry.last_offset,
                    entry.timestamp,
                )
            )
        return cls(
            entry.producer_id,
            entry.producer_epoch,
            batches,
            entry.coordinator_epoch,
            entry.timestamp,
            entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None,
        )

    def duplicate_of(self, header: BatchHeader) -> BatchMetadata | None:
        for batch in self.batches:
            if (batch.first_sequence, batch.last_sequence) == (
                header.base_sequence,
                header.last_sequence,
            ):
                return batch
        return None


def _next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """Sequences wrap from INT32_MAX to 0 (Kafka's DefaultRecordBatch.decrementSequence)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


class ProducerAppendInfo:
    """What one append changes in one producer's state (Kafka's ProducerAppendInfo).

    The append's batches are checked and collected here; the manager takes them only
    once the append is written (ProducerStateManager.update), so an append that is
    refused or fails to write leaves the state as it was.
    """

    def __init__(
        self, partition_name: str, producer_id: int, current: ProducerStateEntry | None
    ) -> None:
        self.partition_name = partition_name
        self.producer_id = producer_id
        self._current = current
        self.updated: ProducerStateEntry | None = None

    def append(self, header: BatchHeader) -> None:
        """Check a batch (whose offsets are assigned) against the state so far, and add it."""
        entry = self.updated if self.updated is not None else self._current
        if header.is_control:
            self._append_end_txn_marker(entry, header)
            return
        _check(self.partition_name, entry, header)
        if entry is None:
            self.updated = ProducerStateEntry(header.producer_id, header.producer_epoch)
        elif header.producer_epoch > entry.producer_epoch:
            self.updated = entry.with_epoch(header.producer_epoch)
        elif self.updated is None:
            self.updated = entry.copy()
        self.updated.add_batch(header)

    def _append_end_txn_marker(self, entry: ProducerStateEntry | None, header: BatchHeader) -> None:
        """A transaction marker (written by a coordinator) carries no sequence: only
        its epoch is checked, and it fences older epochs from then on."""
        if entry is not None and header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {header.producer_id} at partition {self.partition_name}"
                f" is {header.producer_epoch}, which is smaller than the last seen epoch"
                f" {entry.producer_epoch}"
            )
        self.updated = _after_marker(header, entry)


def _after_marker(header: BatchHeader, entry: ProducerStateEntry | None) -> ProducerStateEntry:
    """A producer's entry after a transaction marker of it: the marker's epoch (a newer
    one forgets the older epoch's batches), its timestamp, no open transaction."""
    if entry is None:
        updated = ProducerStateEntry(header.producer_id, header.producer_epoch)
    elif header.producer_epoch > entry.producer_epoch:
        updated = entry.with_epoch(header.producer_epoch)
    else:
        updated = entry.copy()
    updated.last_timestamp = header.max_timestamp
    updated.current_txn_first_offset = None
    return updated


def _metadata(header: BatchHeader) -> BatchMetadata:
    return BatchMetadata(
        header.base_sequence,
        header.last_sequence,
        header.base_offset,
        header.last_offset,
        header.max_timestamp,
    )


def _check(partition_name: str, entry: ProducerStateEntry | None, header: BatchHeader) -> None:
    """Raise Kafka's error if the batch does not follow the producer's last one."""
    if entry is None:
        # A producer we hold no state for must start at sequence 0 (its state may
        # also have gone with deleted segments; then the client resets itself).
        if header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {header.producer_id} at"
                f" partition {partition_name}: {header.base_sequence} (incoming seq."
                " number), no state for this producer (expected 0)"
            )
        return
    if header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"Epoch of producer {header.producer_id} at partition {partition_name}"
            f" is {header.producer_epoch}, which is smaller than the last seen epoch"
            f" {entry.producer_epoch}"
        )
    if header.producer_epoch > entry.producer_epoch:
        if header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"Invalid sequence number for new epoch of producer {header.producer_id}"
                f" at partition {partition_name}: {header.producer_epoch} (request"
                f" epoch), {header.base_sequence} (seq. number), {entry.producer_epoch}"
                " (current producer epoch)"
            )
        return
    expected = _next_sequence(entry.last_sequence)
    if header.base_sequence != expected:
        raise OutOfOrderSequenceError(
            f"Out of order sequence number for producer {header.producer_id} at partition"
            f" {partition_name}: {header.base_sequence} (incoming seq. number),"
            f" {entry.last_sequence} (current end sequence number)"
        )


@dataclass(slots=True)
class ProducerStateManagerConfig:
    """The broker-wide settings of every partition's producer state (Kafka's
    ProducerStateManagerConfig); shared by all logs, so a dynamic change reaches all."""

    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS


class ProducerStateManager:
    """The producers of one partition and the snapshot files that keep them.

    `map_end_offset` is the log offset the state reflects (everything below it has been
    applied); a snapshot is named by it. Kafka's ProducerStateManager, without the
    transactions (which come with the transaction coordinator).
    """

    def __init__(
        self,
        partition_name: str,
        log_dir: Path,
        config: ProducerStateManagerConfig | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.partition_name = partition_name
        self.log_dir = log_dir
        self.config = config or ProducerStateManagerConfig()
        self._clock = clock
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self._last_snap_offset = 0
        self._snapshots = self._scan_snapshot_files()

    def _scan_snapshot_files(self) -> list[int]:
        # A snapshot whose write was cut short never got its real name; drop the rest.
        for leftover in self.log_dir.glob(f"*{files.PRODUCER_SNAPSHOT_FILE_SUFFIX}.tmp"):
            logger.info("Deleting leftover snapshot file %s", leftover)
            leftover.unlink(missing_ok=True)
        return list_snapshot_offsets(self.log_dir)

    # --- snapshots --------------------------------------------------------------------

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._snapshots)

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self._snapshots[-1] if self._snapshots else None

    def take_snapshot(self) -> None:
        """Write the state at map_end_offset, unless a snapshot there exists already."""
        if self.map_end_offset <= self._last_snap_offset:
            return
        offset = self.map_end_offset
        started = time.monotonic()
        write_snapshot(
            files.producer_snapshot_file(self.log_dir, offset),
            [entry.to_snapshot_entry() for entry in self.producers.values()],
        )
        logger.info(
            "Wrote producer snapshot of %s at offset %d with %d producer ids in %d ms",
            self.partition_name,
            offset,
            len(self.producers),
            (time.monotonic() - started) * 1000,
        )
        if offset not in self._snapshots:
            self._snapshots.append(offset)
            self._snapshots.sort()
        self._last_snap_offset = offset

    def remove_snapshot(self, offset: int) -> None:
        """Delete the snapshot at `offset` (its segment is gone), if there is one."""
        if offset in self._snapshots:
            self._snapshots.remove(offset)
            files.producer_snapshot_file(self.log_dir, offset).unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete every snapshot below `offset` (Kafka's deleteSnapshotsBefore)."""
        for snapshot in [s for s in self._snapshots if s < offset]:
            self.remove_snapshot(snapshot)

    def delete_snapshots_after(self, offset: int) -> None:
        """Delete every snapshot above `offset`: they describe log that is gone."""
        for snapshot in [s for s in self._snapshots if s > offset]:
            self.remove_snapshot(snapshot)

    def remove_stray_snapshots(self, segment_base_offsets: Iterable[int]) -> None:
        """Delete snapshots that match no segment's base offset, except the newest such
        one when it lies beyond the last segment's base (the one a clean shutdown wrote
        at the log end). Kafka's removeStraySnapshots."""
        bases = set(segment_base_offsets)
        strays = [s for s in self._snapshots if s not in bases]
        keep = strays[-1] if strays and (not bases or strays[-1] > max(bases)) else None
        for stray in strays:
            if stray != keep:
                self.remove_snapshot(stray)

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> None:
        """Drop the snapshots outside the log, then load the newest one (Kafka's
        truncateAndReload): afterwards map_end_offset is where replay of the log starts.

        Kafka also drops the snapshot at exactly the log start offset; it is kept here,
        because it is the one that still knows the producers whose batches retention or
        DeleteRecords removed, and it is as valid as any other.
        """
        for snapshot in list(self._snapshots):
            if snapshot > log_end_offset or snapshot < log_start_offset:
                self.remove_snapshot(snapshot)
        self.producers.clear()
        self._load_from_snapshot(log_start_offset)

    def _load_from_snapshot(self, log_start_offset: int) -> None:
        now_ms = self._clock()
        while self._snapshots:
            offset = self._snapshots[-1]
            path = files.producer_snapshot_file(self.log_dir, offset)
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, OSError) as exc:
                # Kafka's fallback: forget this one and try the one before it; with
                # none left, the whole log is replayed.
                logger.warning("Failed to load producer snapshot from '%s': %s", path, exc)
                self.remove_snapshot(offset)
                continue
            logger.info(
                "Loading producer state of %s from snapshot file '%s'", self.partition_name, path
            )
            for entry in map(ProducerStateEntry.from_snapshot_entry, entries):
                if not self._is_expired(now_ms, entry):
                    self.producers[entry.producer_id] = entry
            self.map_end_offset = self._last_snap_offset = offset
            return
        self.map_end_offset = self._last_snap_offset = log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and snapshot: the log starts anew at `offset`."""
        self.producers.clear()
        for snapshot in list(self._snapshots):
            self.remove_snapshot(snapshot)
        self._last_snap_offset = 0
        self.map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """The log start moved (retention, DeleteRecords). Producers stay: their state
        outlives their batches, as in Kafka since KIP-360."""
        self.map_end_offset = max(self.map_end_offset, log_start_offset)
        latest = self.latest_snapshot_offset
        self._last_snap_offset = latest if latest is not None else log_start_offset

    def update_map_end_offset(self, offset: int) -> None:
        self.map_end_offset = offset

    # --- producers --------------------------------------------------------------------

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The earlier append of this very batch, if the producer is retrying it."""
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.producer_epoch != header.producer_epoch or header.is_control:
            return None
        return entry.duplicate_of(header)

    def prepare_update(self, producer_id: int) -> ProducerAppendInfo:
        """Start collecting one append's batches of a producer (Kafka's prepareUpdate)."""
        return ProducerAppendInfo(self.partition_name, producer_id, self.producers.get(producer_id))

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Take an append's changes, once it is written."""
        if append_info.updated is not None:
            self.producers[append_info.producer_id] = append_info.updated

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Apply batch headers already in the log, oldest first, without the checks
        (they were checked when they were appended, or by the leader)."""
        for header in headers:
            if header.producer_id < 0:
                continue
            entry = self.producers.get(header.producer_id)
            if header.is_control:
                self.producers[header.producer_id] = _after_marker(header, entry)
                continue
            if entry is None:
                entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
                self.producers[header.producer_id] = entry
            elif header.producer_epoch > entry.producer_epoch:
                entry = self.producers[header.producer_id] = entry.with_epoch(header.producer_epoch)
            entry.add_batch(header)

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        # A producer inside a transaction never expires (the transaction times out first).
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.config.producer_id_expiration_ms
        )

    def remove_expired_producers(self, now_ms: int) -> int:
        """Drop producers idle for producer.id.expiration.ms; returns how many."""
        expired = [pid for pid, entry in self.producers.items() if self._is_expired(now_ms, entry)]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)
