"""One segment of a partition's log: the `.log` file and its three indexes.

Files are named by the segment's base offset, zero-padded to 20 digits:
`00000000000000000000.log`, `.index`, `.timeindex`, and `.txnindex` (created by the
first ABORT marker of a non-empty transaction in the segment; see transaction_index.py).

The segment writes whole batches as they arrive; its indexes are sparse, gaining an
entry once `index.interval.bytes` have been appended since the last one, so finding an
offset or a timestamp is a binary search plus a scan of at most about one interval.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.protocol.record_batch import (
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    decode_records,
    split_batches,
    verify_crc,
)

from . import log_file_utils as files
from .abstract_index import DEFAULT_MAX_INDEX_SIZE, INT32_MAX
from .clock import Clock, system_clock
from .end_transaction_marker import read_end_txn_marker
from .errors import CorruptIndexError, StorageError
from .file_records import RECOVERY_CHUNK, FileRecords, FileRegion, whole_batches_end
from .offset_index import OffsetIndex
from .time_index import NO_TIMESTAMP, TimeIndex
from .transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

if TYPE_CHECKING:
    from .leader_epoch_cache import LeaderEpochFileCache
    from .producer_state import CompletedTxn, ProducerStateManager

logger = logging.getLogger("brook.storage.log_segment")


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """A record found by timestamp (ListOffsets); leader_epoch None when unknown."""

    timestamp: int
    offset: int
    leader_epoch: int | None


def _epoch_or_none(epoch: int) -> int | None:
    return epoch if epoch >= 0 else None


class LogSegment:
    """A `.log` file plus its offset, time and transaction indexes, all starting at
    `base_offset`."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        roll_jitter_ms: int = 0,
        created_ms: int | None = None,
        file_suffix: str = "",
        clock: Clock = system_clock,
        new: bool = False,
    ) -> None:
        """`new`: none of the segment's files exists yet (its directory was just made):
        they are made at once, preallocated, without first looking for them."""
        self.dir = directory
        self._clock = clock
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = clock() if created_ms is None else created_ms
        log_path = files.log_file(directory, base_offset, file_suffix)
        self.log = FileRecords.create(log_path) if new else FileRecords(log_path)
        self.offset_index = OffsetIndex(
            files.offset_index_file(directory, base_offset, file_suffix),
            base_offset,
            max_index_size,
        )
        self.time_index = TimeIndex(
            files.time_index_file(directory, base_offset, file_suffix),
            base_offset,
            max_index_size,
        )
        self.txn_index = TransactionIndex(
            files.txn_index_file(directory, base_offset, file_suffix), base_offset
        )
        self._bytes_since_last_index_entry = 0
        # Lazily known: (max timestamp, offset where it was first reached), the
        # timestamp that segment.ms counts from, and the next offset.
        self._max_timestamp_and_offset: tuple[int, int] | None = None
        self._rolling_based_timestamp: int | None = None
        self._next_offset: int | None = None
        self._indexes_checked = False
        if new:
            try:
                self.offset_index.create()
                self.time_index.create()
            except BaseException:
                # The offset index's descriptor is open when the time index fails (a full
                # disk, no descriptor left): let it go, as a failed resize did before.
                self.close_handlers()
                raise
            self._indexes_checked = True

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, dir={self.dir})"

    # --- basic facts ------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def txn_index_path(self) -> Path:
        return self.txn_index.path

    def has_index_files(self) -> bool:
        return self.offset_index.exists() and self.time_index.exists()

    def _ensure_indexes(self) -> None:
        """Load the indexes on first use; rebuild them from the log if they are damaged."""
        if self._indexes_checked:
            return
        try:
            self.sanity_check()
        except CorruptIndexError as exc:
            logger.warning("%s; rebuilding the indexes of %s", exc, self.log.path)
            self.offset_index.delete()
            self.time_index.delete()
            self._scan(truncate=False, leader_epoch_cache=None)
        self._indexes_checked = True

    def sanity_check(self) -> None:
        """Load both indexes; raises CorruptIndexError when either is damaged."""
        self.offset_index.sanity_check()
        self.time_index.sanity_check()
        if self.offset_index.entries and self.offset_index.last_position >= self.log.size:
            raise CorruptIndexError(
                f"index file {self.offset_index.path} points at position"
                f" {self.offset_index.last_position}, past the end of {self.log.path}"
                f" ({self.log.size} bytes)"
            )

    def tail_is_consistent(self) -> bool:
        """Whether the batches from the last index entry on fill the file exactly.

        A clean shutdown vouches for the segment, but not for bytes a failed write left
        past the last whole batch, nor for an index pointing where no batch starts; a
        segment failing this is recovered rather than trusted. Reads at most about one
        index interval of batch headers.
        """
        try:
            self.sanity_check()
        except CorruptIndexError:
            return False
        position = self.offset_index.last_position
        indexed_offset = self.offset_index.last_offset
        end = position
        first = True
        for batch_position, header, _ in self.log.batches(position):
            if first and self.offset_index.entries and header.last_offset != indexed_offset:
                return False
            first = False
            end = batch_position + header.size
        return end == self.log.size

    @property
    def next_offset(self) -> int:
        """The offset after the last batch (the base offset when the segment is empty)."""
        if self._next_offset is None:
            self._ensure_indexes()
            next_offset = self.base_offset
            for _, header, _ in self.log.batches(self.offset_index.last_position):
                next_offset = header.next_offset
            self._next_offset = next_offset
        return self._next_offset

    def _max_timestamp(self) -> tuple[int, int]:
        if self._max_timestamp_and_offset is None:
            self._ensure_indexes()
            self._max_timestamp_and_offset = self._read_largest_timestamp()
        return self._max_timestamp_and_offset

    def _read_largest_timestamp(self) -> tuple[int, int]:
        # The last time index entry, then whatever the batches after it hold (a segment
        # closed cleanly has its maximum as the last entry, so the scan is short).
        timestamp, offset = self.time_index.last_entry()
        _, position = self.offset_index.lookup(offset)
        for _, header, _ in self.log.batches(position):
            if header.max_timestamp > timestamp:
                timestamp, offset = header.max_timestamp, header.last_offset
        return timestamp, offset

    @property
    def max_timestamp_so_far(self) -> int:
        """The largest batch max timestamp in the segment (-1 when it has none)."""
        return self._max_timestamp()[0]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        """The last offset of the first batch that reached max_timestamp_so_far."""
        return self._max_timestamp()[1]

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares: the max timestamp, else the file's mtime."""
        timestamp = self.max_timestamp_so_far
        if timestamp >= 0:
            return timestamp
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        try:
            return self.log.path.stat().st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return 0

    # --- writing ----------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        records: bytes | bytearray | memoryview,
        batches: Sequence[BatchHeader] | None = None,
    ) -> None:
        """Append whole batches whose offsets are already assigned.

        `largest_offset` is the last offset in `records`; `largest_timestamp` the
        largest batch max timestamp and `offset_of_max_timestamp` the last offset of
        the batch that holds it. `batches` are the parsed headers of `records` (parsed
        here when not given): as in current Kafka, index entries are taken per batch,
        so each one names the last offset of the batch found at its position, which is
        what Kafka's DumpLogSegments checks.
        """
        size = len(records)
        if not size:
            return
        self._ensure_indexes()
        physical_position = self.log.size
        if physical_position == 0:
            self._rolling_based_timestamp = largest_timestamp
        if largest_offset - self.base_offset > INT32_MAX:
            raise CorruptRecordError(
                f"offset {largest_offset} cannot be stored in segment {self.base_offset}"
            )
        if batches is None:
            batches = split_batches(records)
        max_timestamp_and_offset = self._max_timestamp()  # before the new bytes land
        self.log.append(records)
        self._next_offset = largest_offset + 1
        interval = self.index_interval_bytes
        bytes_since = self._bytes_since_last_index_entry
        position = physical_position
        for header in batches:
            if header.max_timestamp > max_timestamp_and_offset[0]:
                max_timestamp_and_offset = (header.max_timestamp, header.last_offset)
            if bytes_since > interval:
                self.offset_index.append(header.last_offset, position)
                self.time_index.maybe_append(*max_timestamp_and_offset)
                bytes_since = 0
            batch_size = header.batch_length + LOG_OVERHEAD
            position += batch_size
            bytes_since += batch_size
        self._max_timestamp_and_offset = max_timestamp_and_offset
        self._bytes_since_last_index_entry = bytes_since

    def should_roll(
        self,
        *,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
        max_segment_bytes: int,
        max_segment_ms: int,
    ) -> bool:
        """Whether an append of this size and these offsets must go to a new segment.

        By size (segment.bytes), by age (segment.ms, counted from the first batch's
        timestamp when there is one, else from when the segment was created), when an
        index is full, or when an offset would not fit as an int32 delta.
        """
        self._ensure_indexes()
        size = self.log.size
        if size > max_segment_bytes - messages_size:
            return True
        if size > 0 and (
            self._time_waited_for_roll(now_ms, max_timestamp_in_messages)
            > max_segment_ms - self.roll_jitter_ms
        ):
            return True
        return (
            self.offset_index.is_full
            or self.time_index.is_full
            or max_offset_in_messages - self.base_offset > INT32_MAX
        )

    def _time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        if self._rolling_based_timestamp is None and self.log.size > 0:
            for _, header, _ in self.log.batches(0):
                self._rolling_based_timestamp = header.max_timestamp
                break
        rolling_based = self._rolling_based_timestamp
        if rolling_based is not None and rolling_based >= 0:
            return message_timestamp - rolling_based
        return now_ms - self.created_ms

    # --- reading ----------------------------------------------------------------------

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, int] | None:
        """(position, size) of the batch holding `offset` (or the first one after it)."""
        self._ensure_indexes()
        _, position = self.offset_index.lookup(offset)
        return self.log.search_for_offset(offset, max(position, starting_position))

    def read(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> bytes | memoryview | None:
        """Whole batches from the one holding `start_offset`, at most `max_size` bytes.

        Returns None when no batch in this segment reaches `start_offset`, and empty
        bytes when the first batch does not fit (unless `min_one_message`, which
        returns it whatever its size). Nothing at or past `max_position` (a batch
        boundary, e.g. where the high watermark's batch starts) is returned.
        """
        found = self.read_from(start_offset, max_size, max_position, min_one_message)
        if found is None:
            return None
        data = found[1]
        assert not isinstance(data, FileRegion)  # not lazy
        return data

    def read_from(
        self,
        start_offset: int,
        max_size: int,
        max_position: int | None = None,
        min_one_message: bool = False,
        lazy: bool = False,
    ) -> tuple[int, bytes | memoryview | FileRegion] | None:
        """As read(), with the file position the returned batches start at. `lazy`: a
        FileRegion of the batches, read when it is sent, rather than their bytes."""
        if max_size < 0:
            raise ValueError(f"invalid max size {max_size} for a log read")
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        start, first_size = found
        if max_position is None:
            max_position = self.log.size
        limit = max(max_size, first_size) if min_one_message else max_size
        fetch_size = min(max_position - start, limit)
        if fetch_size < first_size:
            return start, b""
        if lazy:
            end = start + fetch_size
            if end != max_position:  # cut inside a batch, perhaps
                end = self._whole_end(start, fetch_size)
            return start, FileRegion(self.log, start, end - start)
        data = self.log.read(start, fetch_size)
        end = start + len(data)
        if end == max_position:
            return start, data
        # Cut a partial last batch: walk from the last indexed batch boundary before
        # the cut rather than from the start (the index keeps this walk short).
        hint = max(self.offset_index.floor_position(end) - start, 0)
        whole = whole_batches_end(data, hint)
        return start, data if whole == len(data) else memoryview(data)[:whole]

    def _whole_end(self, start: int, fetch_size: int) -> int:
        """The end of the last whole batch within [start, start + fetch_size), `start`
        being a batch's position: found by walking batch headers from the last indexed
        position before the cut (a few kilobytes), not by reading what lies between."""
        end = start + fetch_size
        self._ensure_indexes()
        position = max(self.offset_index.floor_position(end), start)
        for batch_position, header, _ in self.log.batches(position, end):
            position = batch_position + header.batch_length + LOG_OVERHEAD
        return position

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """An offset at or past the end of a read of `fetch_size` bytes from
        `start_position`: that of the first index entry at or after its end (Kafka's
        fetchUpperBoundOffset); None when no entry lies there."""
        self._ensure_indexes()
        return self.offset_index.upper_bound_offset(start_position + fetch_size)

    # --- transactions -----------------------------------------------------------------

    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """A transaction ended by a marker in this segment: an aborted one is indexed."""
        if completed.is_aborted:
            self.txn_index.append(
                AbortedTxn.of(
                    completed.producer_id,
                    completed.first_offset,
                    completed.last_offset,
                    last_stable_offset,
                )
            )

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader, bytes]]:
        """Every whole batch from a position: (file position, header, buffer)."""
        return self.log.batches(start_position, whole=True, chunk_size=RECOVERY_CHUNK)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int = 0
    ) -> TimestampAndOffset | None:
        """The first record at or after `starting_offset` with a timestamp >= `timestamp`."""
        self._ensure_indexes()
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, starting_offset))
        for _, header, buffer in self.log.batches(position, whole=True):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            for record in decode_records(buffer, header):
                record_timestamp = (
                    header.max_timestamp if header.is_log_append_time else record.timestamp
                )
                if record_timestamp >= timestamp and record.offset >= starting_offset:
                    return TimestampAndOffset(
                        record_timestamp,
                        record.offset,
                        _epoch_or_none(header.partition_leader_epoch),
                    )
        return None

    def find_max_timestamp_record(self) -> TimestampAndOffset | None:
        """The first record holding the segment's max timestamp (ListOffsets -3).

        As in Kafka, a segment whose records carry no timestamp (-1) answers its first
        such record with timestamp -1; only a segment without records answers nothing.
        """
        timestamp, offset = self._max_timestamp()
        _, position = self.offset_index.lookup(offset)
        for _, header, buffer in self.log.batches(position, whole=True):
            if header.max_timestamp != timestamp:
                continue
            epoch = _epoch_or_none(header.partition_leader_epoch)
            if header.is_log_append_time:
                return TimestampAndOffset(timestamp, header.base_offset, epoch)
            for record in decode_records(buffer, header):
                if record.timestamp == timestamp:
                    return TimestampAndOffset(timestamp, record.offset, epoch)
            return None
        return None

    # --- recovery ---------------------------------------------------------------------

    def recover(
        self,
        leader_epoch_cache: LeaderEpochFileCache | None = None,
        producer_state: ProducerStateManager | None = None,
    ) -> int:
        """Validate every batch, rebuild the indexes, cut the log at the first bad batch.

        A batch is bad when its framing is torn, its magic is not 2, its CRC does not
        match, or its offsets do not increase. Returns the number of bytes truncated.
        Leader epochs met in the batches are added to `leader_epoch_cache`. Given
        `producer_state` (the producers' state at this segment's base offset), the
        batches are applied to it and the `.txnindex` is rebuilt from the ABORT
        markers met, as Kafka's LogSegment.recover does; without it the txn index is
        left as it is.
        """
        self.offset_index.delete()
        self.time_index.delete()
        if producer_state is not None:
            self.txn_index.reset()
        truncated = self._scan(
            truncate=True, leader_epoch_cache=leader_epoch_cache, producer_state=producer_state
        )
        self._indexes_checked = True
        return truncated

    def _update_producer_state(
        self, state: ProducerStateManager, header: BatchHeader, buffer: bytes
    ) -> None:
        # Kafka's LogSegment.updateProducerState: a marker that ends a transaction
        # indexes it (if aborted) with the LSO it leaves, then completes it.
        if header.producer_id >= 0:
            marker = read_end_txn_marker(buffer, header) if header.is_control else None
            completed = state.replay(header, marker)
            if completed is not None:
                self.update_txn_index(completed, state.last_stable_offset(completed))
                state.complete_txn(completed)
        state.update_map_end_offset(header.next_offset)

    def _scan(
        self,
        *,
        truncate: bool,
        leader_epoch_cache: LeaderEpochFileCache | None,
        producer_state: ProducerStateManager | None = None,
    ) -> int:
        self.offset_index.reset()
        self.time_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        max_timestamp, offset_of_max = NO_TIMESTAMP, self.base_offset
        previous_last_offset = self.base_offset - 1
        try:
            for position, header, buffer in self.batches():
                self._validate(header, buffer, previous_last_offset)
                if header.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max = header.max_timestamp, header.last_offset
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    self._make_room_in_indexes()
                    self.offset_index.append(header.last_offset, position)
                    self.time_index.maybe_append(max_timestamp, offset_of_max)
                    last_index_entry = valid_bytes
                valid_bytes += header.size
                previous_last_offset = header.last_offset
                epoch = header.partition_leader_epoch
                if leader_epoch_cache is not None and epoch >= 0:
                    latest = leader_epoch_cache.latest_epoch
                    if latest is None or epoch > latest:
                        leader_epoch_cache.assign(epoch, header.base_offset)
                if producer_state is not None:
                    self._update_producer_state(producer_state, header, buffer)
        except (CorruptRecordError, InvalidRecordError) as exc:
            logger.warning(
                "Found invalid messages in log segment %s at byte offset %d: %s",
                self.log.path,
                valid_bytes,
                exc,
            )
        truncated = self.log.size - valid_bytes
        if truncated > 0:
            if truncate:
                logger.warning(
                    "Truncating %d invalid bytes at the end of %s (from byte %d)",
                    truncated,
                    self.log.path,
                    valid_bytes,
                )
                self.log.truncate_to(valid_bytes)
            else:
                logger.error(
                    "Segment %s has %d unreadable bytes after byte %d; indexing only the"
                    " readable part",
                    self.log.path,
                    truncated,
                    valid_bytes,
                )
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(max_timestamp, offset_of_max, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._max_timestamp_and_offset = (max_timestamp, offset_of_max)
        self._next_offset = previous_last_offset + 1
        self._bytes_since_last_index_entry = valid_bytes - last_index_entry
        self._rolling_based_timestamp = None
        return truncated if truncate else 0

    def _make_room_in_indexes(self) -> None:
        # A segment written under a larger segment.index.bytes (or a smaller
        # index.interval.bytes) may need more entries than the current config allows;
        # grow the files rather than fail the rebuild.
        for index in (self.offset_index, self.time_index):
            if index.is_full:
                index.resize(2 * max(index.max_entries, 2) * index.ENTRY_SIZE)

    def _validate(self, header: BatchHeader, buffer: bytes, previous_last_offset: int) -> None:
        if header.magic != MAGIC_V2:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} has magic {header.magic}, not 2"
            )
        verify_crc(buffer, header)
        if header.last_offset_delta < 0:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} has a negative last offset delta"
            )
        if header.base_offset <= previous_last_offset:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} does not follow offset"
                f" {previous_last_offset}"
            )
        if header.last_offset - self.base_offset > INT32_MAX:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} is too far from base offset"
                f" {self.base_offset}"
            )

    # --- truncation -------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns bytes cut.

        The indexes are preallocated again: a truncated segment is about to become
        the active one.
        """
        self._ensure_indexes()
        found = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.max_index_size)
        self.time_index.resize(self.max_index_size)
        self.txn_index.truncate_to(offset)
        truncated = 0 if found is None else self.log.truncate_to(found[0])
        if self.log.size == 0:
            self.created_ms = self._clock()
            self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        self._next_offset = None
        self._max_timestamp_and_offset = None
        return truncated

    # --- lifecycle --------------------------------------------------------------------

    def on_become_inactive_segment(self) -> None:
        """Called when a newer segment takes over: record the max timestamp, trim."""
        self._ensure_indexes()
        self.time_index.maybe_append(*self._max_timestamp(), skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def resize_indexes(self, size: int) -> None:
        self._ensure_indexes()
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Record the max timestamp in the time index, trim the indexes, close files."""
        if self._max_timestamp_and_offset is not None and self._indexes_checked:
            try:
                self.time_index.maybe_append(*self._max_timestamp_and_offset, skip_full_check=True)
            except StorageError as exc:  # the segment must still close
                logger.warning("Could not record the max timestamp of %s: %s", self, exc)
        self.offset_index.close()
        self.time_index.close()
        self.log.close()
        self._indexes_checked = False

    def release_descriptors(self) -> None:
        """Close the files' descriptors, keeping what is loaded: they reopen on next use."""
        self.log.release_descriptor()
        self.offset_index.release_descriptor()
        self.time_index.release_descriptor()

    def close_handlers(self) -> None:
        """Release file descriptors without touching the files (before deletion)."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        self.log.close()
        self._indexes_checked = False

    def delete(self) -> None:
        self.close_handlers()
        self.log.delete()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename every file of the segment, e.g. to `.deleted` before removal."""

        def renamed(path: Path) -> Path:
            name = path.name
            if old_suffix and name.endswith(old_suffix):
                name = name[: -len(old_suffix)]
            return path.with_name(name + new_suffix)

        self.log.rename_to(renamed(self.log.path))
        self.offset_index.rename_to(renamed(self.offset_index.path))
        self.time_index.rename_to(renamed(self.time_index.path))
        self.txn_index.rename_to(renamed(self.txn_index.path))
