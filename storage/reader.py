"""Read a log dir's files without a broker and without changing them.

For `brook dump-log` and the Spark jobs, whose executors import brook.storage and
brook.protocol only. Nothing here creates, truncates, preallocates, locks or writes a
file: segments and indexes open O_RDONLY, no recovery runs, and damage (a torn tail, a
bad magic byte, an index of the wrong size) is reported, never repaired. So it is safe
on the files of a running broker, Brook or Kafka, and on a read-only copy.

Each format is parsed by the code the broker itself uses: FileRecords and the offset and
time indexes opened immutable (Kafka's `mutable`/`writable` flags), the leader-epoch
checkpoint's reader, TransactionIndex and the producer-snapshot reader; this module
gathers them (an index file alone opens as `OffsetIndex(path, base_offset,
writable=False)`, whose entries are listed unchecked and judged by sanity_check()).

    from brook.storage.reader import SegmentReader, list_partitions

    for partition in list_partitions("/var/lib/kafka/data"):
        for segment in partition.segments:      # base offset, .log size, index files
            with SegmentReader(segment.log_path) as reader:
                for record in reader.records():
                    ...

A Spark job plans one split per segment (or per byte range between offset-index
positions, which are batch boundaries) from the listing alone, without opening a file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType

from brook.protocol.errors import CorruptRecordError
from brook.protocol.record_batch import (
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    Record,
    compute_crc,
    decode_records,
)

from . import log_file_utils as files
from .errors import CorruptIndexError
from .file_records import MIN_BATCH_LENGTH, RECOVERY_CHUNK, FileRecords
from .leader_epoch_cache import EpochEntry, read_leader_epoch_checkpoint
from .offset_index import OffsetIndex
from .producer_snapshot import SnapshotEntry, read_snapshot
from .time_index import NO_TIMESTAMP, TimeIndex
from .transaction_index import AbortedTxn, TransactionIndex

__all__ = [
    "AbortedTxn",
    "Batch",
    "Damage",
    "EpochEntry",
    "OffsetIndex",
    "PartitionFiles",
    "SegmentFiles",
    "SegmentReader",
    "SnapshotEntry",
    "TimeIndex",
    "TransactionIndex",
    "list_partitions",
    "partition_files",
    "read_leader_epoch_checkpoint",
    "read_snapshot",
]

MAGIC_OFFSET = 16  # of a v2 batch, and of a v0/v1 message: after offset, length, crc/epoch
_LENGTH = struct.Struct(">i")

# Directories of a partition being deleted, moved to another log dir, or left stray:
# not the partition's current data.
_NOT_CURRENT = (files.DELETE_DIR_SUFFIX, files.FUTURE_DIR_SUFFIX, files.STRAY_DIR_SUFFIX)


# --- listing ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SegmentFiles:
    """One segment as a directory listing shows it: enough to plan a split."""

    base_offset: int
    log_path: Path
    size: int  # bytes of the .log file when listed
    has_offset_index: bool
    has_time_index: bool
    has_txn_index: bool

    @property
    def offset_index_path(self) -> Path:
        return self.log_path.with_suffix(files.INDEX_FILE_SUFFIX)

    @property
    def time_index_path(self) -> Path:
        return self.log_path.with_suffix(files.TIME_INDEX_FILE_SUFFIX)

    @property
    def txn_index_path(self) -> Path:
        return self.log_path.with_suffix(files.TXN_INDEX_FILE_SUFFIX)


@dataclass(frozen=True, slots=True)
class PartitionFiles:
    """A partition directory: its segments in offset order and its other files."""

    topic: str
    partition: int
    path: Path
    segments: tuple[SegmentFiles, ...]
    snapshot_offsets: tuple[int, ...]  # of its producer-state snapshots, ascending
    has_leader_epoch_checkpoint: bool

    @property
    def size(self) -> int:
        """Bytes of all its segments (what DescribeLogDirs reports as a partition's size)."""
        return sum(segment.size for segment in self.segments)

    def snapshot_path(self, offset: int) -> Path:
        return files.producer_snapshot_file(self.path, offset)

    @property
    def leader_epoch_checkpoint_path(self) -> Path:
        return self.path / files.LEADER_EPOCH_CHECKPOINT_FILE


def partition_files(partition_dir: Path | str) -> PartitionFiles:
    """List one partition directory `<topic>-<n>` (ValueError for another name).

    Only segments named `<20-digit base offset>.log` count: `.deleted`, `.cleaned` and
    `.swap` files are leftovers of work a broker finishes (or undoes) when it starts.
    """
    path = Path(partition_dir)
    topic, partition = files.parse_topic_partition(path.name)
    sizes: dict[int, int] = {}
    names: set[str] = set()
    snapshots: list[int] = []
    with os.scandir(path) as entries:
        for entry in entries:
            if not entry.is_file():
                continue
            names.add(entry.name)
            base_offset = files.offset_from_file_name(entry.name)
            if base_offset is None:
                continue
            suffix = entry.name[20:]
            if suffix == files.LOG_FILE_SUFFIX:
                sizes[base_offset] = entry.stat().st_size
            elif suffix == files.PRODUCER_SNAPSHOT_FILE_SUFFIX:
                snapshots.append(base_offset)
    segments = []
    for base_offset in sorted(sizes):
        prefix = files.filename_prefix_from_offset(base_offset)
        segments.append(
            SegmentFiles(
                base_offset=base_offset,
                log_path=files.log_file(path, base_offset),
                size=sizes[base_offset],
                has_offset_index=f"{prefix}{files.INDEX_FILE_SUFFIX}" in names,
                has_time_index=f"{prefix}{files.TIME_INDEX_FILE_SUFFIX}" in names,
                has_txn_index=f"{prefix}{files.TXN_INDEX_FILE_SUFFIX}" in names,
            )
        )
    return PartitionFiles(
        topic=topic,
        partition=partition,
        path=path,
        segments=tuple(segments),
        snapshot_offsets=tuple(sorted(snapshots)),
        has_leader_epoch_checkpoint=files.LEADER_EPOCH_CHECKPOINT_FILE in names,
    )


def list_partitions(log_dir: Path | str) -> list[PartitionFiles]:
    """Every partition directory of a log dir, by topic then partition.

    Directories of partitions being deleted, moved or left stray are left out, and so is
    anything else that is not named like a partition (e.g. `lost+found`).
    """
    found = []
    with os.scandir(log_dir) as entries:
        for entry in entries:
            if not entry.is_dir() or entry.name.endswith(_NOT_CURRENT):
                continue
            try:
                files.parse_topic_partition(entry.name)
            except ValueError:
                continue
            found.append(partition_files(entry.path))
    return sorted(found, key=lambda p: (p.topic, p.partition))


# --- segments -----------------------------------------------------------------------------


@dataclass(slots=True)
class Batch:
    """One record batch of a segment."""

    position: int  # where it starts in the .log file
    header: BatchHeader  # header.position is 0: it describes `data`
    data: memoryview  # the whole batch, its 61-byte header included

    def crc_is_valid(self) -> bool:
        return compute_crc(self.data, self.header) == self.header.crc

    def records(self) -> list[Record]:
        """Its records, decompressed (control records too); INVALID_RECORD if malformed."""
        return decode_records(self.data, self.header)


@dataclass(frozen=True, slots=True)
class Damage:
    """Where a segment stops being readable, and why: the rest of the file is skipped."""

    position: int
    invalid_bytes: int
    reason: str


class SegmentReader:
    """A segment's `.log` and its indexes, opened read-only.

    The size is taken when the reader opens: on the active segment of a running broker,
    batches appended later are not seen, and a batch being written shows as a torn tail.
    """

    def __init__(self, log_path: Path | str) -> None:
        self.path = Path(log_path)
        # None when the file is not named by a base offset (then it has no indexes).
        self.base_offset = files.offset_from_file_name(self.path.name)
        self._log = FileRecords(self.path, mutable=False)

    def __enter__(self) -> SegmentReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._log.close()

    @property
    def size(self) -> int:
        return self._log.size

    def batches(
        self, start_position: int = 0, end_position: int | None = None
    ) -> Iterator[Batch | Damage]:
        """Every batch starting in [start_position, end_position), in file order.

        `start_position` must be a batch boundary (0, or a position from the offset
        index). When the bytes at some position are not a readable batch, a Damage item
        says why and ends the walk.
        """
        end = self._log.size if end_position is None else min(end_position, self._log.size)
        next_position = start_position
        walk = self._log.batches(start_position, whole=True, chunk_size=RECOVERY_CHUNK)
        for position, header, buffer in walk:
            if position >= end:
                return
            if header.magic != MAGIC_V2:
                yield self._damage_at(position)
                return
            start = header.position
            data = memoryview(buffer)[start : start + header.size]
            header.position = 0
            yield Batch(position, header, data)
            next_position = position + header.size
        if next_position < end:
            # The walk stopped short of the end: say what is wrong with the bytes there.
            yield self._damage_at(next_position)

    def records(self, start_position: int = 0, end_position: int | None = None) -> Iterator[Record]:
        """Every record of every batch, control records included (as Kafka's
        FileRecords.records()); CORRUPT_MESSAGE at damage or a batch failing its CRC."""
        for item in self.batches(start_position, end_position):
            if isinstance(item, Damage):
                raise CorruptRecordError(
                    f"{self.path} is damaged at position {item.position}: {item.reason}"
                )
            if not item.crc_is_valid():
                raise CorruptRecordError(
                    f"the batch at position {item.position} of {self.path} (offset"
                    f" {item.header.base_offset}) fails its CRC"
                )
            yield from item.records()

    def _damage_at(self, position: int) -> Damage:
        remaining = self._log.size - position
        if remaining < LOG_OVERHEAD:
            return Damage(position, remaining, "a torn batch: too few bytes for a batch header")
        head = self._log.read(position, MAGIC_OFFSET + 1)
        if len(head) < LOG_OVERHEAD:
            # Its size was taken at open; a broker truncated it since (e.g. a follower).
            return Damage(position, remaining, "the file shrank while it was being read")
        (length,) = _LENGTH.unpack_from(head, 8)
        if len(head) > MAGIC_OFFSET and head[MAGIC_OFFSET] != MAGIC_V2:
            magic = head[MAGIC_OFFSET]
            if magic in (0, 1):
                reason = (
                    f"message format v{magic} (magic {magic}) is not supported, only v2 batches"
                )
            else:
                reason = f"magic byte {magic} is not a record format"
            return Damage(position, remaining, reason)
        if length < MIN_BATCH_LENGTH:
            return Damage(position, remaining, f"batch length {length} is below the minimum")
        return Damage(
            position,
            remaining,
            f"a torn batch: it claims {LOG_OVERHEAD + length} bytes, {remaining} follow",
        )

    # --- the segment's other files ----------------------------------------------------

    def _base_offset(self) -> int:
        if self.base_offset is None:
            raise ValueError(f"{self.path} is not named by a base offset; it has no indexes")
        return self.base_offset

    def offset_index(self) -> OffsetIndex:
        """The `.index` beside the segment, read-only, loaded on first use (a missing
        file raises FileNotFoundError then)."""
        path = self.path.with_suffix(files.INDEX_FILE_SUFFIX)
        return OffsetIndex(path, self._base_offset(), writable=False)

    def time_index(self) -> TimeIndex:
        """The `.timeindex` beside the segment, read-only, loaded on first use."""
        path = self.path.with_suffix(files.TIME_INDEX_FILE_SUFFIX)
        return TimeIndex(path, self._base_offset(), writable=False)

    def txn_index(self) -> TransactionIndex:
        """The `.txnindex` beside the segment (no entries when there is none)."""
        path = self.path.with_suffix(files.TXN_INDEX_FILE_SUFFIX)
        return TransactionIndex(path, self._base_offset())

    # --- where to read: positions from the indexes --------------------------------------
    #
    # A reader that wants part of a segment (Spark's pushed-down filters, a split of a
    # large segment) starts at a position the offset index gives, as Kafka's fetch does.
    # An index is read-only and unchecked here, so an entry is used only when the index
    # passes its sanity check and the bytes at its position are a whole batch that can
    # hold its offset; otherwise the walk starts earlier (at worst at 0), which costs
    # time, never records.

    def batch_at(self, position: int) -> Batch | None:
        """The batch starting at `position` when the bytes there are one (a v2 header,
        a length that fits the file, a valid CRC); None otherwise."""
        if position < 0 or self._log.size - position < MIN_BATCH_LENGTH + LOG_OVERHEAD:
            return None
        for found in self._log.batches(position, whole=True):
            _, header, buffer = found
            if header.magic != MAGIC_V2:
                return None
            start = header.position
            header.position = 0
            batch = Batch(position, header, memoryview(buffer)[start : start + header.size])
            return batch if batch.crc_is_valid() else None
        return None

    @staticmethod
    def _checked(index: OffsetIndex | TimeIndex) -> bool:
        try:
            index.sanity_check()
        except (OSError, CorruptIndexError):  # missing, unreadable or out of order
            return False
        return True

    @cached_property
    def _usable_offset_index(self) -> OffsetIndex | None:
        if self.base_offset is None:
            return None
        index = self.offset_index()
        return index if self._checked(index) else None

    @cached_property
    def _usable_time_index(self) -> TimeIndex | None:
        if self.base_offset is None:
            return None
        index = self.time_index()
        return index if self._checked(index) else None

    def indexed_positions(self) -> list[int]:
        """The offset index's positions in file order: batch boundaries where a split
        may start, each to be confirmed with batch_at() (none when the index is
        unusable)."""
        index = self._usable_offset_index
        return [] if index is None else [index.entry(n)[1] for n in range(index.entries)]

    def start_position(self, offset: int) -> int:
        """A batch boundary at or before every batch holding an offset >= `offset`: the
        offset index's entry for it (Kafka's lookup), else 0."""
        index = self._usable_offset_index
        if index is None:
            return 0
        entry_offset, position = index.lookup(offset)
        if position == 0:
            return 0
        batch = self.batch_at(position)
        # The batch there must begin at or before the entry's offset: then every batch
        # before it ends below `offset` (offsets grow through a segment).
        if batch is None or not self._base_offset() <= batch.header.base_offset <= entry_offset:
            return 0
        return position

    def position_of_offset(self, offset: int) -> int | None:
        """Where the first batch whose last offset >= `offset` starts (Kafka's
        translateOffset); None when no batch of the segment reaches it."""
        found = self._log.search_for_offset(offset, self.start_position(offset))
        return None if found is None else found[0]

    def position_after_offset(self, offset: int) -> int:
        """Where the first batch whose base offset > `offset` starts: the end of the
        batches that can hold offsets up to `offset` (the segment's size when no batch
        starts after it). A batch whose CRC fails does not end the range: its header
        may be the damaged part."""
        for item in self.batches(self.start_position(offset)):
            if isinstance(item, Damage):
                break
            if item.header.base_offset > offset and item.crc_is_valid():
                return item.position
        return self._log.size

    def max_timestamp(self) -> int:
        """The largest batch max timestamp of the segment (-1 when it has none): the
        time index's last entry, then the headers of the batches from the one holding
        its offset (Kafka's maxTimestampSoFar; every batch when the index is unusable)."""
        index = self._usable_time_index
        timestamp, offset = NO_TIMESTAMP, self._base_offset()
        if index is not None:
            timestamp, offset = index.last_entry()
        for _, header, _ in self._log.batches(self.start_position(offset)):
            timestamp = max(timestamp, header.max_timestamp)
        return timestamp

    def position_of_timestamp(self, timestamp: int) -> int:
        """A batch boundary before which every record's timestamp is below `timestamp`,
        from the time index: its entries carry the largest timestamp up to their offset,
        so the records up to the last entry below `timestamp` are all below it too
        (0 when the index is unusable or has no such entry; the segment's size when no
        batch follows that entry)."""
        index = self._usable_time_index
        if index is None:
            return 0
        below, offset = index.lookup(timestamp - 1)
        if below == NO_TIMESTAMP:
            return 0
        position = self.position_of_offset(offset + 1)
        return self._log.size if position is None else position
