"""Idempotent producers' state per partition, as Kafka's ProducerStateManager keeps it.

For each producer id: its epoch and the metadata of its last five batches (first and
last sequence, first and last offset). A batch is checked against it before it is
written: a retried batch that matches one of the five gets its original offsets back
instead of being written twice; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an
older epoch INVALID_PRODUCER_EPOCH. Those sequence checks apply to a client's batches
only: a coordinator's own transactional writes carry a producer id and epoch but no
sequence, and replicated or replayed batches were checked when they were first written.

Transactions: a producer's first transactional batch starts its transaction in the
partition (`current_txn_first_offset`), and the manager keeps the ongoing transactions
ordered by first offset; the earliest of them bounds the last stable offset. A COMMIT or
ABORT marker completes it (a CompletedTxn, which the log turns into a `.txnindex` entry
when aborted). A completed transaction stays "unreplicated" until the high watermark
passes its marker, so that read_committed readers never see its data before its end.

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

from brook.protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from brook.protocol.record_batch import BatchHeader

from . import log_file_utils as files
from .clock import Clock, system_clock
from .end_transaction_marker import EndTransactionMarker
from .errors import CorruptSnapshotError
from .log_validator import AppendOrigin
from .producer_snapshot import (
    NO_TXN_FIRST_OFFSET,
    SnapshotEntry,
    list_snapshot_offsets,
    read_snapshot,
    write_snapshot,
)
from .producer_state_config import ProducerStateManagerConfig

logger = logging.getLogger("brook.storage.producer_state")

# Kafka remembers this many batches per producer and partition (max.in.flight is 5).
BATCHES_TO_REMEMBER = 5
INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1
NO_COORDINATOR_EPOCH = -1


@dataclass(slots=True)
class TxnMetadata:
    """An ongoing (or completed, not yet replicated) transaction of one producer."""

    producer_id: int
    first_offset: int
    last_offset: int | None = None  # the offset of its marker, once complete


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction that a marker just ended (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


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
    refused or fails to write leaves the state as it was. `origin` decides the checks:
    sequences for clients only, epochs for clients and coordinators, none for
    replicated (or replayed) batches.
    """

    def __init__(
        self,
        partition_name: str,
        producer_id: int,
        current: ProducerStateEntry | None,
        origin: AppendOrigin,
    ) -> None:
        self.partition_name = partition_name
        self.producer_id = producer_id
        self.origin = origin
        self._current = current
        self.updated: ProducerStateEntry | None = None
        self.started_transactions: list[TxnMetadata] = []

    def append(
        self, header: BatchHeader, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Check a batch (whose offsets are assigned) against the state so far, and add
        it. A control batch comes with its `marker` (None when it holds none); the
        transaction it ends is returned."""
        entry = self.updated if self.updated is not None else self._current
        if header.is_control:
            if marker is None:  # an empty control batch: its transaction was cleaned away
                return None
            return self._append_end_txn_marker(entry, header, marker)
        self._check_epoch(entry, header.producer_epoch)
        if self.origin is AppendOrigin.CLIENT:
            _check_sequence(self.partition_name, entry, header)
        if entry is None:
            self.updated = ProducerStateEntry(header.producer_id, header.producer_epoch)
        elif header.producer_epoch != entry.producer_epoch:
            self.updated = entry.with_epoch(header.producer_epoch)
        elif self.updated is None:
            self.updated = entry.copy()
        updated = self.updated
        in_txn = updated.current_txn_first_offset is not None
        if in_txn and not header.is_transactional:
            if self.origin is not AppendOrigin.REPLICATION:
                raise InvalidTxnStateError(
                    f"Expected transactional write from producer {self.producer_id} at"
                    f" offset {header.base_offset} in partition {self.partition_name}"
                )
        elif not in_txn and header.is_transactional:
            # The producer's transaction begins in this partition.
            updated.current_txn_first_offset = header.base_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, header.base_offset))
        updated.add_batch(header)
        return None

    def _check_epoch(self, entry: ProducerStateEntry | None, epoch: int) -> None:
        if entry is None or epoch >= entry.producer_epoch:
            return
        message = (
            f"Epoch of producer {self.producer_id} at partition {self.partition_name}"
            f" is {epoch}, which is smaller than the last seen epoch {entry.producer_epoch}"
        )
        if self.origin is AppendOrigin.REPLICATION:
            # The leader took it: the follower's state follows the log it copies.
            logger.warning("%s", message)
            return
        raise InvalidProducerEpochError(message)

    def _append_end_txn_marker(
        self, entry: ProducerStateEntry | None, header: BatchHeader, marker: EndTransactionMarker
    ) -> CompletedTxn | None:
        """A transaction marker (written by a coordinator) carries no sequence: its
        producer epoch and its coordinator's epoch are checked, and it fences older
        producer epochs from then on."""
        self._check_epoch(entry, header.producer_epoch)
        if entry is not None and entry.coordinator_epoch > marker.coordinator_epoch:
            message = (
                f"Invalid coordinator epoch for producerId {self.producer_id} at offset"
                f" {header.base_offset} in partition {self.partition_name}:"
                f" {marker.coordinator_epoch} (zombie), {entry.coordinator_epoch} (current)"
            )
            if self.origin is not AppendOrigin.REPLICATION:
                raise TransactionCoordinatorFencedError(message)
            logger.info("%s", message)
        # A marker of a transaction that wrote nothing here changes no offset.
        first_offset = entry.current_txn_first_offset if entry is not None else None
        self.updated = _after_marker(header, marker, entry)
        if first_offset is None:
            return None
        return CompletedTxn(self.producer_id, first_offset, header.base_offset, marker.is_abort)


def _after_marker(
    header: BatchHeader, marker: EndTransactionMarker, entry: ProducerStateEntry | None
) -> ProducerStateEntry:
    """A producer's entry after a transaction marker of it: the marker's epoch (a newer
    one forgets the older epoch's batches), its coordinator's epoch, its timestamp, no
    open transaction."""
    if entry is None:
        updated = ProducerStateEntry(header.producer_id, header.producer_epoch)
    elif header.producer_epoch != entry.producer_epoch:
        updated = entry.with_epoch(header.producer_epoch)
    else:
        updated = entry.copy()
    updated.coordinator_epoch = marker.coordinator_epoch
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


def _check_sequence(
    partition_name: str, entry: ProducerStateEntry | None, header: BatchHeader
) -> None:
    """Raise Kafka's error if a client's batch does not follow the producer's last one
    (its epoch is checked already)."""
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


class ProducerStateManager:
    """The producers of one partition and the snapshot files that keep them.

    `map_end_offset` is the log offset the state reflects (everything below it has been
    applied); a snapshot is named by it. Kafka's ProducerStateManager.

    `ongoing_txns` maps the first offset of each open transaction to it, in ascending
    order (transactions start in log order, and a load inserts them sorted);
    `unreplicated_txns` holds the completed ones whose marker the high watermark has
    not passed yet.

    `log_dir` None keeps the state in memory only, with no snapshot file read, written or
    deleted: for tools that replay a log's batches to check it without changing it.
    """

    def __init__(
        self,
        partition_name: str,
        log_dir: Path | None,
        config: ProducerStateManagerConfig | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.partition_name = partition_name
        self.log_dir = log_dir
        self.config = config or ProducerStateManagerConfig()
        self._clock = clock
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, TxnMetadata] = {}
        self.unreplicated_txns: dict[int, TxnMetadata] = {}
        self.map_end_offset = 0
        self._last_snap_offset = 0
        # The offsets of the snapshot files, listed on first need (a new partition's
        # directory is not read for them).
        self._snapshot_offsets: list[int] | None = None

    @property
    def _snapshots(self) -> list[int]:
        if self._snapshot_offsets is None:
            self._snapshot_offsets = self._scan_snapshot_files()
        return self._snapshot_offsets

    def knows_no_snapshots(self) -> None:
        """The directory was just made: there is no snapshot file to list."""
        if self._snapshot_offsets is None:
            self._snapshot_offsets = []

    def _scan_snapshot_files(self) -> list[int]:
        if self.log_dir is None:
            return []
        # A snapshot whose write was cut short never got its real name; drop the rest.
        for leftover in self.log_dir.glob(f"*{files.PRODUCER_SNAPSHOT_FILE_SUFFIX}.tmp"):
            logger.info("Deleting leftover snapshot file %s", leftover)
            leftover.unlink(missing_ok=True)
        return list_snapshot_offsets(self.log_dir)

    # --- snapshots --------------------------------------------------------------------

    def _snapshot_file(self, offset: int) -> Path:
        if self.log_dir is None:
            raise ValueError(f"the producer state of {self.partition_name} has no directory")
        return files.producer_snapshot_file(self.log_dir, offset)

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
            self._snapshot_file(offset),
            [entry.to_snapshot_entry() for entry in self.producers.values()],
        )
        logger.debug(
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
            self._snapshot_file(offset).unlink(missing_ok=True)

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
        self._clear()
        self._load_from_snapshot(log_start_offset, log_end_offset)

    def load_for_recovery(self, log_start_offset: int, offset: int) -> None:
        """Load the newest valid snapshot at or below `offset` (and not below the log
        start), deleting none that is valid: the state a segment's recovery starts
        from, after replaying the batches from map_end_offset to `offset`."""
        self._clear()
        self._load_from_snapshot(log_start_offset, offset)

    def _clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()

    def _load_from_snapshot(self, log_start_offset: int, max_offset: int) -> None:
        now_ms = self._clock()
        while True:
            candidates = [s for s in self._snapshots if log_start_offset <= s <= max_offset]
            if not candidates:
                break
            offset = candidates[-1]
            path = self._snapshot_file(offset)
            try:
                entries = read_snapshot(path)
            except (CorruptSnapshotError, FileNotFoundError) as exc:
                # Kafka's fallback: forget this one and try the one before it; with
                # none left, the whole log is replayed. Another OSError (no descriptor
                # left, a failing disk) is no sign of a bad snapshot: it propagates, and
                # the state is loaded on the next need.
                logger.warning("Failed to load producer snapshot from '%s': %s", path, exc)
                self.remove_snapshot(offset)
                continue
            logger.info(
                "Loading producer state of %s from snapshot file '%s'", self.partition_name, path
            )
            self.load_entries(entries, offset, now_ms)
            return
        self.map_end_offset = self._last_snap_offset = log_start_offset

    def load_entries(self, entries: Iterable[SnapshotEntry], offset: int, now_ms: int) -> None:
        """Take a snapshot's entries as the state at `offset` (producers expired at
        `now_ms` left out)."""
        loaded = [ProducerStateEntry.from_snapshot_entry(entry) for entry in entries]
        for entry in loaded:
            if not self._is_expired(now_ms, entry):
                self.producers[entry.producer_id] = entry
        # Their open transactions, in offset order (Kafka's loadProducerEntry).
        open_txns = sorted(
            (entry.current_txn_first_offset, entry.producer_id)
            for entry in self.producers.values()
            if entry.current_txn_first_offset is not None
        )
        for first, producer_id in open_txns:
            self.ongoing_txns[first] = TxnMetadata(producer_id, first)
        self.map_end_offset = self._last_snap_offset = offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget every producer and snapshot: the log starts anew at `offset`."""
        self._clear()
        for snapshot in list(self._snapshots):
            self.remove_snapshot(snapshot)
        self._last_snap_offset = 0
        self.map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """The log start moved (retention, DeleteRecords). Producers stay: their state
        outlives their batches, as in Kafka since KIP-360."""
        self._remove_unreplicated_transactions(log_start_offset)
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

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        """Start collecting one append's batches of a producer (Kafka's prepareUpdate)."""
        return ProducerAppendInfo(
            self.partition_name, producer_id, self.producers.get(producer_id), origin
        )

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Take an append's changes, once it is written."""
        if append_info.updated is not None:
            self.producers[append_info.producer_id] = append_info.updated
        for txn in append_info.started_transactions:
            ongoing = self.ongoing_txns
            if ongoing and txn.first_offset < next(reversed(ongoing)):
                # Never in log order, but the order is what the LSO relies on.
                ongoing[txn.first_offset] = txn
                self.ongoing_txns = dict(sorted(ongoing.items()))
            else:
                ongoing[txn.first_offset] = txn

    def replay(
        self, header: BatchHeader, marker: EndTransactionMarker | None = None
    ) -> CompletedTxn | None:
        """Apply a batch already in the log (with its marker, if a control batch),
        without the checks: it was checked when it was appended, or by the leader.
        Returns the transaction it completes; the caller completes it (complete_txn),
        after writing the txn index if it rebuilds that too."""
        if header.producer_id < 0:
            return None
        info = self.prepare_update(header.producer_id, AppendOrigin.REPLICATION)
        completed = info.append(header, marker)
        self.update(info)
        return completed

    # --- transactions -----------------------------------------------------------------

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The first offset still undecided once `completed` is removed (Kafka's
        lastStableOffset): what its `.txnindex` entry records."""
        for txn in self.ongoing_txns.values():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The transaction's marker is written; it stays unstable until replicated."""
        txn = self.ongoing_txns.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(
                f"Attempted to complete transaction {completed} on partition"
                f" {self.partition_name} which was not started"
            )
        txn.last_offset = completed.last_offset
        self.unreplicated_txns[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_transactions(high_watermark)

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        if not self.unreplicated_txns:
            return
        self.unreplicated_txns = {
            first: txn
            for first, txn in self.unreplicated_txns.items()
            if txn.last_offset is None or txn.last_offset >= offset
        }

    @property
    def first_undecided_offset(self) -> int | None:
        """The first offset of the earliest open transaction."""
        return next(iter(self.ongoing_txns), None)

    @property
    def first_unstable_offset(self) -> int | None:
        """The earliest first offset of an open transaction, or of a completed one whose
        marker is not replicated yet (Kafka's firstUnstableOffset)."""
        undecided = self.first_undecided_offset
        if not self.unreplicated_txns:
            return undecided
        unreplicated = min(self.unreplicated_txns)
        return unreplicated if undecided is None else min(undecided, unreplicated)

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
