"""The checks that need a whole partition directory in order: one Spark task each.

One walk over the batch headers of every segment, in offset order (brook.storage's
read-only reader), feeds:

- the index checks of each segment (brook.storage.index_check, as `brook dump-log
  --verify-index-only` runs them): every `.index` entry at the start of the batch whose
  last offset it names, every `.timeindex` entry naming a batch whose max timestamp it
  holds and which is the largest so far;
- the leader-epoch check: each batch's partition leader epoch must be the epoch that
  `leader-epoch-checkpoint` gives for its offset;
- the producer state, replayed with the broker's own ProducerStateManager (in memory,
  no file touched): at each `.snapshot` offset the state must equal the file (a producer
  idle past producer.id.expiration.ms when the file was written may be missing), and
  each segment's `.txnindex` must list exactly the aborted transactions that its ABORT
  markers end, with the first offset and last stable offset the replay gives;
- for `__consumer_offsets` and `__transaction_state`, the coordinators' replay
  (internal_topics.py).

Batches that fail their CRC are left out (their header cannot be trusted); they and
torn tails are reported by the batch checks over the data source. The replay starts
from an empty state when the log starts at offset 0, else from the newest snapshot at
or below the first segment's base offset; with neither, the state before the log
start is unknown, so snapshots are not compared and `.txnindex` entries are compared
by producer and marker offset only. Compaction removes batches: a difference explained
by an offset gap (the batch a snapshot names is gone, an aborted transaction's data was
cleaned away) is not a finding.
"""

from __future__ import annotations

import bisect
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.storage.end_transaction_marker import read_end_txn_marker
from brook.storage.errors import StorageError
from brook.storage.index_check import (
    SegmentScan,
    check_offset_index,
    check_time_index,
)
from brook.storage.producer_state import ProducerStateEntry, ProducerStateManager
from brook.storage.producer_state_config import ProducerStateManagerConfig
from brook.storage.reader import (
    AbortedTxn,
    Batch,
    Damage,
    EpochEntry,
    PartitionFiles,
    SegmentFiles,
    SegmentReader,
    SnapshotEntry,
    partition_files,
    read_leader_epoch_checkpoint,
    read_snapshot,
)

from .findings import FindingLimiter
from .internal_topics import INTERNAL_TOPICS, CoordinatorReplay

NO_PARTITION_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class Settings:
    max_findings: int
    producer_id_expiration_ms: int


@dataclass(frozen=True, slots=True)
class PartitionTask:
    """What the driver hands a task: one partition directory from its listing."""

    topic: str
    partition: int
    path: str
    size: int


def check_partitions(tasks: list[PartitionTask], settings: Settings) -> list[dict[str, Any]]:
    """The results of several partitions (one Spark task's share)."""
    return [check_partition(task, settings) for task in tasks]


def check_partition(task: PartitionTask, settings: Settings) -> dict[str, Any]:
    """The file checks of one partition directory: findings (at most max_findings per
    check), exact counts, facts for the report, and decoded coordinator rows."""
    found = FindingLimiter(task.topic, task.partition, settings.max_findings)
    listing = partition_files(task.path)
    walk = _PartitionWalk(listing, found, settings)
    walk.run()
    result: dict[str, Any] = {
        "topic": task.topic,
        "partition": task.partition,
        "findings": found.kept,
        "counts": found.counts,
        "facts": walk.facts(),
    }
    if walk.coordinator is not None:
        result["consumer_offsets"] = walk.coordinator.offset_rows()
        result["groups"] = walk.coordinator.group_rows()
        result["transaction_state"] = walk.coordinator.transaction_rows()
    return result


def _file_name(segment: SegmentFiles, suffix: str) -> str:
    return segment.log_path.with_suffix(suffix).name


class _PartitionWalk:
    def __init__(self, listing: PartitionFiles, found: FindingLimiter, settings: Settings):
        self.listing = listing
        self.found = found
        self.gaps = _OffsetGaps()
        self.epochs = _LeaderEpochCheck(listing, found)
        self.producers = _ProducerStateCheck(listing, found, settings, self.gaps)
        self.coordinator = (
            CoordinatorReplay(listing.topic, listing.partition, found)
            if listing.topic in INTERNAL_TOPICS
            else None
        )
        self.log_end_offset: int | None = None

    def run(self) -> None:
        for segment in self.listing.segments:
            with SegmentReader(segment.log_path) as reader:
                scan = SegmentScan(size=reader.size)
                for item in reader.batches():
                    if isinstance(item, Damage):
                        scan.damage = item
                        self.producers.damaged = True
                        break
                    scan.add(item.position, item.header)
                    if item.crc_is_valid():
                        self._batch(segment, item)
                self._check_indexes(reader, segment, scan)
                self.producers.end_segment(reader, segment)
        self.epochs.finish(self.log_end_offset)
        self.producers.finish(self.log_end_offset)

    def _batch(self, segment: SegmentFiles, batch: Batch) -> None:
        header = batch.header
        if self.log_end_offset is not None:
            self.gaps.add(self.log_end_offset, header.base_offset)
        self.log_end_offset = max(self.log_end_offset or 0, header.next_offset)
        self.epochs.batch(batch)
        self.producers.batch(batch)
        if self.coordinator is not None:
            self.coordinator.batch(batch, segment.base_offset)

    def _check_indexes(
        self, reader: SegmentReader, segment: SegmentFiles, scan: SegmentScan
    ) -> None:
        if segment.has_offset_index:
            name = _file_name(segment, ".index")
            entries = self._entries(name, segment, lambda: reader.offset_index())
            for problem in check_offset_index(entries or [], scan):
                self.found.add(
                    "offset_index_mismatch",
                    f"{name}: {problem.message}",
                    segment=segment.base_offset,
                    position=problem.value,
                    offset=problem.key,
                )
        if segment.has_time_index:
            name = _file_name(segment, ".timeindex")
            entries = self._entries(name, segment, lambda: reader.time_index())
            for problem in check_time_index(entries or [], scan):
                self.found.add(
                    "time_index_mismatch",
                    f"{name}: {problem.message}",
                    segment=segment.base_offset,
                    offset=problem.value,
                )

    def _entries(
        self, name: str, segment: SegmentFiles, open_index: Callable[[], Any]
    ) -> list[tuple[int, int]] | None:
        """An index's entries as stored (unchecked); None when the file does not parse."""
        try:
            index = open_index()
            return [index.entry(n) for n in range(index.entries)]
        except (StorageError, OSError) as exc:
            self.found.add(
                "file_unreadable", f"{name} does not read: {exc}", segment=segment.base_offset
            )
            return None

    def facts(self) -> dict[str, Any]:
        return {
            "segments": len(self.listing.segments),
            "snapshots": len(self.listing.snapshot_offsets),
            "leader_epochs": [(e.epoch, e.start_offset) for e in self.epochs.entries or []],
            "producers": len(self.producers.state.producers),
            "aborted_txns_indexed": self.producers.indexed,
            "log_end_offset": self.log_end_offset,
            "coordinator_other_records": (
                self.coordinator.other_records if self.coordinator is not None else 0
            ),
        }


class _OffsetGaps:
    """Offsets missing between consecutive batches: where compaction removed batches."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []  # exclusive

    def add(self, expected: int, base_offset: int) -> None:
        if base_offset > expected:
            self.starts.append(expected)
            self.ends.append(base_offset)

    def between(self, first: int, last: int) -> bool:
        """Whether some offsets in [first, last] are missing from the log."""
        slot = bisect.bisect_right(self.starts, last) - 1
        return slot >= 0 and self.ends[slot] > first


class _LeaderEpochCheck:
    """Each batch's partition leader epoch against the checkpoint's epoch for its offset;
    mismatching batches are reported as runs (one finding per run of batches). A
    directory without the file (copied by hand, written by a tool) is not checked: a
    broker starts it anew from the batches."""

    def __init__(self, listing: PartitionFiles, found: FindingLimiter) -> None:
        self.found = found
        self.entries: list[EpochEntry] | None = None
        self.name = listing.leader_epoch_checkpoint_path.name
        if listing.has_leader_epoch_checkpoint:
            try:
                self.entries = read_leader_epoch_checkpoint(listing.leader_epoch_checkpoint_path)
            except (StorageError, OSError, ValueError) as exc:
                found.add("file_unreadable", f"{self.name} does not read: {exc}")
        self.starts = [entry.start_offset for entry in self.entries or []]
        self._check_order()
        # The run of mismatching batches being collected: (epoch, expected, first, last).
        self.run: tuple[int, int | None, int, int] | None = None

    def _check_order(self) -> None:
        entries = self.entries or []
        for before, after in itertools.pairwise(entries):
            if after.epoch <= before.epoch or after.start_offset < before.start_offset:
                self.found.add(
                    "leader_epoch_mismatch",
                    f"{self.name}: epoch {after.epoch} from offset {after.start_offset} does not"
                    f" follow epoch {before.epoch} from offset {before.start_offset}",
                    offset=after.start_offset,
                )

    def _expected(self, offset: int) -> int | None:
        slot = bisect.bisect_right(self.starts, offset) - 1
        return None if slot < 0 or self.entries is None else self.entries[slot].epoch

    def batch(self, batch: Batch) -> None:
        header = batch.header
        epoch = header.partition_leader_epoch
        if epoch == NO_PARTITION_LEADER_EPOCH or self.entries is None:
            return  # no checkpoint to hold it against (none, or one that does not read)
        expected = self._expected(header.base_offset)
        if expected == epoch:
            self._flush()
            return
        if self.run is not None and self.run[:2] == (epoch, expected):
            self.run = (epoch, expected, self.run[2], header.last_offset)
            return
        self._flush()
        self.run = (epoch, expected, header.base_offset, header.last_offset)

    def _flush(self) -> None:
        if self.run is None:
            return
        epoch, expected, first, last = self.run
        self.run = None
        where = f"batches at offsets {first}-{last} carry partition leader epoch {epoch}"
        if expected is None:
            message = f"{where}, but {self.name} has no entry at or below offset {first}"
        else:
            message = f"{where}, but {self.name} gives epoch {expected} for offset {first}"
        self.found.add("leader_epoch_mismatch", message, offset=first)

    def finish(self, log_end_offset: int | None) -> None:
        self._flush()
        end = log_end_offset or 0
        for entry in self.entries or []:
            if entry.start_offset > end:
                self.found.add(
                    "leader_epoch_mismatch",
                    f"{self.name}: epoch {entry.epoch} starts at offset {entry.start_offset},"
                    f" beyond the log end offset {end}",
                    offset=entry.start_offset,
                )


_SNAPSHOT_FIELDS = [
    ("producer_epoch", "producerEpoch"),
    ("last_sequence", "lastSequence"),
    ("last_offset", "lastOffset"),
    ("offset_delta", "offsetDelta"),
    ("timestamp", "lastTimestamp"),
    ("coordinator_epoch", "coordinatorEpoch"),
    ("current_txn_first_offset", "currentTxnFirstOffset"),
]
assert {name for name, _ in _SNAPSHOT_FIELDS} | {"producer_id"} == {
    f.name for f in fields(SnapshotEntry)
}


class _ProducerStateCheck:
    """The producer state replayed from the log, against `.snapshot` and `.txnindex`."""

    def __init__(
        self,
        listing: PartitionFiles,
        found: FindingLimiter,
        settings: Settings,
        gaps: _OffsetGaps,
    ) -> None:
        self.listing = listing
        self.found = found
        self.gaps = gaps
        self.expiration_ms = settings.producer_id_expiration_ms
        config = ProducerStateManagerConfig(producer_id_expiration_ms=self.expiration_ms)
        name = f"{listing.topic}-{listing.partition}"
        self.state = ProducerStateManager(name, None, config)
        self.anchored = True
        self.pending = list(listing.snapshot_offsets)
        first = listing.segments[0].base_offset if listing.segments else 0
        if first > 0:
            self._anchor(first)
        self.expected: list[AbortedTxn] = []  # of the segment being walked
        self.markers_without_data: set[tuple[int, int]] = set()  # (producer id, offset)
        self.indexed = 0
        # A segment stops being readable somewhere: the batches past that point are not
        # seen, so a snapshot beyond the readable end is the damage's doing (reported).
        self.damaged = False

    def _anchor(self, first_base_offset: int) -> None:
        """Start from the newest readable snapshot at or below the log's first segment."""
        below = [offset for offset in self.pending if offset <= first_base_offset]
        self.pending = [offset for offset in self.pending if offset > first_base_offset]
        for offset in reversed(below):
            entries = self._read(offset)
            if entries is not None:
                # now 0: no producer counts as expired when the state is taken as given.
                self.state.load_entries(entries, offset, now_ms=0)
                return
        self.anchored = False

    def _read(self, offset: int) -> list[SnapshotEntry] | None:
        path = self.listing.snapshot_path(offset)
        try:
            return read_snapshot(path)
        except (StorageError, OSError) as exc:
            self.found.add("file_unreadable", f"{path.name} does not read: {exc}", offset=offset)
            return None

    def batch(self, batch: Batch) -> None:
        header = batch.header
        while self.pending and self.pending[0] <= header.base_offset:
            self._compare_snapshot(self.pending.pop(0))
        if header.producer_id < 0:
            return
        marker = None
        if header.is_control:
            try:
                marker = read_end_txn_marker(batch.data, header)
            except (CorruptRecordError, InvalidRecordError):
                return  # the batch checks report it
        completed = self.state.replay(header, marker)
        if marker is not None and completed is None:
            self.markers_without_data.add((header.producer_id, header.base_offset))
        if completed is not None:
            if completed.is_aborted:
                last_stable_offset = self.state.last_stable_offset(completed)
                self.expected.append(
                    AbortedTxn.of(
                        completed.producer_id,
                        completed.first_offset,
                        completed.last_offset,
                        last_stable_offset,
                    )
                )
            self.state.complete_txn(completed)
        self.state.update_map_end_offset(header.next_offset)

    # --- .txnindex ---------------------------------------------------------------------

    def end_segment(self, reader: SegmentReader, segment: SegmentFiles) -> None:
        expected, self.expected = self.expected, []
        name = _file_name(segment, ".txnindex")
        stored: list[AbortedTxn] = []
        if segment.has_txn_index:
            try:
                stored = reader.txn_index().all_aborted_txns()
            except (StorageError, OSError) as exc:
                self.found.add(
                    "file_unreadable", f"{name} does not read: {exc}", segment=segment.base_offset
                )
                return
        self.indexed += len(stored)
        by_marker = {(e.producer_id, e.last_offset): e for e in expected}
        for entry in stored:
            wanted = by_marker.pop((entry.producer_id, entry.last_offset), None)
            problem = self._txn_entry_problem(entry, wanted)
            if problem is not None:
                self._txn_finding(segment, entry, f"{name}: {problem}")
        for wanted in by_marker.values():
            self._txn_finding(
                segment,
                wanted,
                f"{name} lacks the aborted transaction of producer {wanted.producer_id} that"
                f" the ABORT marker at offset {wanted.last_offset} ends (first offset"
                f" {wanted.first_offset}, last stable offset {wanted.last_stable_offset})",
            )

    def _txn_entry_problem(self, entry: AbortedTxn, wanted: AbortedTxn | None) -> str | None:
        where = (
            f"the entry of producer {entry.producer_id} (first offset {entry.first_offset},"
            f" last offset {entry.last_offset}, last stable offset {entry.last_stable_offset})"
        )
        if wanted is None:
            key = (entry.producer_id, entry.last_offset)
            if key in self.markers_without_data and self.gaps.between(
                entry.first_offset, entry.last_offset
            ):
                return None  # its data was cleaned away; the marker is still there
            return f"{where} matches no ABORT marker of that producer in the segment"
        if not self.anchored:
            return None  # first offsets and LSOs before the log start are unknown
        problems = []
        if wanted.first_offset != entry.first_offset and not self.gaps.between(
            min(wanted.first_offset, entry.first_offset),
            max(wanted.first_offset, entry.first_offset),
        ):
            problems.append(f"the log gives first offset {wanted.first_offset}")
        if wanted.last_stable_offset != entry.last_stable_offset and not self.gaps.between(
            min(wanted.last_stable_offset, entry.last_stable_offset),
            max(wanted.last_stable_offset, entry.last_stable_offset),
        ):
            problems.append(f"the log gives last stable offset {wanted.last_stable_offset}")
        return f"{where}: {', '.join(problems)}" if problems else None

    def _txn_finding(self, segment: SegmentFiles, entry: AbortedTxn, message: str) -> None:
        self.found.add(
            "txn_index_mismatch",
            message,
            segment=segment.base_offset,
            offset=entry.last_offset,
            producer_id=entry.producer_id,
        )

    # --- .snapshot ---------------------------------------------------------------------

    def finish(self, log_end_offset: int | None) -> None:
        end = log_end_offset if log_end_offset is not None else 0
        for offset in self.pending:
            if offset <= end:
                self._compare_snapshot(offset)
            elif not self.damaged:
                path = self.listing.snapshot_path(offset)
                self.found.add(
                    "snapshot_mismatch",
                    f"{path.name} is taken at offset {offset}, beyond the log end offset {end}",
                    offset=offset,
                )
        self.pending = []

    def _compare_snapshot(self, offset: int) -> None:
        entries = self._read(offset)
        if entries is None or not self.anchored:
            return
        path = self.listing.snapshot_path(offset)
        written_ms = _mtime_ms(path)
        in_file = {entry.producer_id: entry for entry in entries}
        for producer_id, state in self.state.producers.items():
            replayed = state.to_snapshot_entry()
            stored = in_file.pop(producer_id, None)
            if stored is None:
                if not self._expired(state, written_ms):
                    self._snapshot_finding(
                        path,
                        offset,
                        producer_id,
                        f"lacks producer {producer_id} (epoch {replayed.producer_epoch}, last"
                        f" offset {replayed.last_offset}), which the log has before offset"
                        f" {offset}",
                    )
                continue
            differences = [
                f"{label} {getattr(stored, name)} in the file, {getattr(replayed, name)} from"
                " the log"
                for name, label in _SNAPSHOT_FIELDS
                if getattr(stored, name) != getattr(replayed, name)
            ]
            if differences and not self._cleaned(stored, replayed):
                self._snapshot_finding(
                    path, offset, producer_id, f"producer {producer_id}: {'; '.join(differences)}"
                )
        for producer_id, stored in in_file.items():
            if stored.last_offset >= 0 and self.gaps.between(
                stored.last_offset, stored.last_offset
            ):
                continue  # its batches were cleaned away since
            self._snapshot_finding(
                path,
                offset,
                producer_id,
                f"holds producer {producer_id} (last offset {stored.last_offset}), of which"
                f" the log has no batch before offset {offset}",
            )

    def _cleaned(self, stored: SnapshotEntry, replayed: SnapshotEntry) -> bool:
        """Whether compaction explains the difference: the file's last batch of the
        producer lies in offsets the log no longer has."""
        return stored.last_offset > replayed.last_offset and self.gaps.between(
            stored.last_offset, stored.last_offset
        )

    def _expired(self, state: ProducerStateEntry, written_ms: int) -> bool:
        return (
            state.current_txn_first_offset is None
            and written_ms - state.last_timestamp >= self.expiration_ms
        )

    def _snapshot_finding(self, path: Path, offset: int, producer_id: int, text: str) -> None:
        self.found.add(
            "snapshot_mismatch",
            f"{path.name} (the state at offset {offset}) {text}",
            offset=offset,
            producer_id=producer_id,
        )


def _mtime_ms(path: Path) -> int:
    try:
        return int(os.stat(path).st_mtime * 1000)
    except OSError:
        return 0
