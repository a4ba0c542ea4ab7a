"""One partition's log: Kafka's UnifiedLog, cut down to a single local log.

A Log is a list of segments ordered by base offset; only the last (active) one takes
appends. It tracks the offsets a partition exposes:

    log start offset <= last stable offset <= high watermark <= log end offset
    last stable offset: the first offset of the earliest transaction still open (or
        completed with its marker not yet below the high watermark), else the high
        watermark; read_committed consumers read no further
    recovery point: everything below it is known to be on disk (fsynced)

The high watermark is set by the broker: a single broker sets it to the log end
offset after each append; with replication it follows the in-sync replicas. Nothing
at or past it is returned to consumers, and retention never deletes past it.

Appends and reads work on batch headers and byte ranges only, never on records.
"""

from __future__ import annotations

import bisect
import functools
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from brook.protocol.errors import (
    InconsistentTopicIdError,
    KafkaError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from brook.protocol.record_batch import BatchHeader, split_batches, verify_crc

from . import log_file_utils as files
from .checkpoints import read_partition_metadata, topic_id_to_string, write_partition_metadata
from .clock import Clock, system_clock
from .deferred_fsync import defer, deferring
from .end_transaction_marker import read_end_txn_marker
from .file_records import FileRegion
from .leader_epoch_cache import LeaderEpochFileCache
from .load_progress import LoadProgress
from .log_config import LogConfig
from .log_dir_failure_channel import LogDirFailureChannel, is_disk_error
from .log_loader import LoadedLogOffsets, LogLoader, new_segment, replay_producer_state
from .log_segment import LogSegment, TimestampAndOffset
from .log_validator import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    AppendOrigin,
    validate_messages_and_assign_offsets,
)
from .producer_state import (
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
)
from .producer_state_config import ProducerStateManagerConfig
from .time_histogram import LOG_FLUSH_TIMES
from .transaction_index import AbortedTxn

logger = logging.getLogger("brook.storage.log")

NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """What an append did: the offsets assigned and what a produce response needs."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int
    log_start_offset: int
    record_count: int
    size: int


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """Whole batches read from the log, with the partition's offsets at read time.

    `aborted_transactions`: for a read_committed read, the aborted transactions that
    overlap the records (None for other reads)."""

    records: bytes | memoryview | FileRegion
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def data(self) -> bytes | memoryview:
        """The records' bytes (a lazy read's read now)."""
        records = self.records
        return bytes(records) if isinstance(records, FileRegion) else records


@dataclass(slots=True)
class _ProducerAppend:
    """What an append changes in the producers' state, taken once it is written."""

    updates: list[ProducerAppendInfo]
    completed_txns: list[CompletedTxn]


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _io(
    action: str,
) -> Callable[[Callable[Concatenate[Log, _P], _R]], Callable[Concatenate[Log, _P], _R]]:
    """Turn an OSError of the method into KAFKA_STORAGE_ERROR, taking the dir offline.

    As Kafka's maybeHandleIOException: after a disk error nothing more is done with
    the log (its state may no longer match its files) until the next start recovers it.
    """

    def decorate(method: Callable[Concatenate[Log, _P], _R]) -> Callable[Concatenate[Log, _P], _R]:
        @functools.wraps(method)
        def guarded(self: Log, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            if self._offline:
                raise KafkaStorageError(f"Log dir {self.dir.parent} holding {self.name} is offline")
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                raise self._io_error(action, exc) from exc

        return guarded

    return decorate


class Log:
    """A partition's log in `<log dir>/<topic>-<partition>/`. Use Log.open()."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        log_end_offset: int,
        recovery_point: int,
        leader_epoch_cache: LeaderEpochFileCache,
        topic_id: uuid.UUID | None,
        failure_channel: LogDirFailureChannel | None = None,
        clock: Clock = system_clock,
        producer_state_config: ProducerStateManagerConfig | None = None,
    ) -> None:
        self.dir = directory
        self._clock = clock
        self.topic, self.partition = files.parse_topic_partition(directory.name)
        self._config = config
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self._log_start_offset = log_start_offset
        self._log_end_offset = log_end_offset
        self._recovery_point = recovery_point
        # Kafka starts the high watermark at the log start offset; the broker moves it.
        self._high_watermark = log_start_offset
        self.leader_epoch_cache = leader_epoch_cache
        self.topic_id = topic_id
        self._last_flush_ms = self._clock()
        # Set by roll(): everything below this offset should be fsynced soon (Kafka
        # schedules that flush right after a roll; here flush_if_due() performs it).
        self._pending_flush_offset: int | None = None
        # Segments renamed `.deleted`, removed once file.delete.delay.ms has passed so
        # that a reader holding them open can finish (Kafka's asynchronous delete).
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self._closed = False
        # The producers' state and its snapshot files. The state itself is loaded on
        # first need (an idempotent append, a roll, DescribeProducers...): from the
        # newest snapshot plus the batches after it, so opening a log reads nothing.
        self._producer_state = ProducerStateManager(
            self.name, directory, producer_state_config, clock
        )
        self._producer_state_loaded = False
        # The producer state's first unstable offset (None: none, or not loaded yet),
        # never below the log start; the last stable offset follows from it.
        self._first_unstable_offset: int | None = None
        self._failure_channel = failure_channel
        self._offline = False

    # --- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        dir: Path,
        config: LogConfig,
        topic_id: uuid.UUID | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = True,
        progress: LoadProgress | None = None,
        failure_channel: LogDirFailureChannel | None = None,
        clock: Clock = system_clock,
        producer_state_config: ProducerStateManagerConfig | None = None,
    ) -> Log:
        """Open (or create) the log in `dir`, recovering it after an unclean shutdown.

        `recovery_point` and `log_start_offset` come from the log dir's checkpoint
        files (0 when absent). When `topic_id` is given, partition.metadata is written
        if missing and must match if present; otherwise the stored id (if any) is used.
        `progress` reports the opening: one line, and a long recovery's progress.
        """
        progress = progress or LoadProgress()
        dir = Path(dir)
        files.parse_topic_partition(dir.name)  # fail early on a bad directory name
        # The directory made here tells a new log from one to load (one lookup, not two).
        try:
            dir.mkdir()
            created = True
        except FileExistsError:
            created = False
        except FileNotFoundError:  # the log dir itself is missing
            dir.mkdir(parents=True)
            created = True
        started = time.monotonic()
        loaded = None
        try:
            if created:
                if deferring():
                    defer(directory=dir.parent)
                else:
                    files.fsync_dir(dir.parent)
            stored_topic_id = None if created else read_partition_metadata(dir)
            if topic_id is not None and stored_topic_id is not None and topic_id != stored_topic_id:
                raise InconsistentTopicIdError(
                    f"partition {dir.name} has topic id {topic_id_to_string(stored_topic_id)}"
                    f" on disk but {topic_id_to_string(topic_id)} was requested"
                )
            leader_epoch_cache = LeaderEpochFileCache(
                dir / files.LEADER_EPOCH_CHECKPOINT_FILE, absent=created
            )
            if created:
                loaded = _new_log(dir, config, log_start_offset, clock)
            else:
                loaded = LogLoader(
                    dir,
                    config,
                    recovery_point=recovery_point,
                    log_start_offset=log_start_offset,
                    clean_shutdown=clean_shutdown,
                    leader_epoch_cache=leader_epoch_cache,
                    progress=progress,
                    clock=clock,
                    producer_state_config=producer_state_config,
                ).load()
            if topic_id is not None and stored_topic_id is None:
                write_partition_metadata(dir, topic_id)
        except BaseException:
            # A log that cannot be created (too many open files, a full disk) leaves
            # neither open descriptors nor a half-made directory behind.
            if loaded is not None:
                for segment in loaded.segments:
                    segment.close_handlers()
            if created:
                _discard_new_dir(dir)
            raise
        log = cls(
            dir,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            log_end_offset=loaded.next_offset,
            recovery_point=loaded.recovery_point,
            leader_epoch_cache=leader_epoch_cache,
            topic_id=topic_id or stored_topic_id,
            failure_channel=failure_channel,
            clock=clock,
            producer_state_config=producer_state_config,
        )
        if created:
            log._producer_state.knows_no_snapshots()
        else:
            log._prune_snapshots_at_open(clean_shutdown)
        # What loading read (the tail, the indexes) leaves no descriptor open: a broker
        # loads tens of thousands of logs within its open-file limit.
        for segment in loaded.segments:
            segment.release_descriptors()
        line = (
            f"Loaded log {dir.name} with {len(loaded.segments)} segment(s), log start offset"
            f" {log.log_start_offset}, log end offset {log.log_end_offset}"
            f" in {(time.monotonic() - started) * 1000:.0f} ms"
        )
        if loaded.recovered_segments:
            line += (
                f", after recovering {loaded.recovered_segments} unflushed segment(s)"
                f" from recovery point {recovery_point}"
            )
        if created:
            # A log just made is empty: the broker's one line about its topic says
            # enough (a topic of 50 partitions would otherwise log 50 of these).
            logger.debug("%s", line)
        else:
            progress.loaded(line)
        return log

    # --- offsets and facts ------------------------------------------------------------

    def __repr__(self) -> str:
        return (
            f"Log({self.dir.name}, start={self._log_start_offset},"
            f" hw={self._high_watermark}, end={self._log_end_offset})"
        )

    @property
    def name(self) -> str:
        return self.dir.name

    # --- I/O errors -------------------------------------------------------------------

    @property
    def is_offline(self) -> bool:
        return self._offline

    def _io_error(self, action: str, exc: OSError) -> KafkaStorageError:
        message = f"Error while {action} {self.name} in dir {self.dir.parent}"
        if is_disk_error(exc):
            self._offline = True
            if self._failure_channel is not None:
                self._failure_channel.maybe_add_offline_log_dir(self.dir.parent, message, exc)
        return KafkaStorageError(f"{message}: {exc.strerror or exc}")

    def mark_offline(self) -> None:
        """Stop using the log (its dir failed): release its files, write nothing more."""
        self._offline = True
        for segment in self._segments:
            try:
                segment.close_handlers()
            except OSError as exc:
                logger.warning("Could not close the files of %s: %s", segment, exc)
        self._closed = True

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic configs; they take effect from the next append or roll."""
        self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
        if self._producer_state_loaded:
            # Completed transactions whose markers it passed are stable now.
            self._producer_state.on_high_watermark_updated(self._high_watermark)
            self._update_first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        """The high watermark, or the first offset of the earliest unstable transaction
        below it (Kafka's lastStableOffset). Loads the producer state if need be."""
        if not self._producer_state_loaded:
            self._ensure_producer_state()
        first_unstable = self._first_unstable_offset
        if first_unstable is not None and first_unstable < self._high_watermark:
            return first_unstable
        return self._high_watermark

    def _update_first_unstable_offset(self) -> None:
        first = self._producer_state.first_unstable_offset if self._producer_state_loaded else None
        self._first_unstable_offset = None if first is None else max(first, self._log_start_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self._recovery_point

    @property
    def last_flush_time_ms(self) -> int:
        return self._last_flush_ms

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def _segment_index_for(self, offset: int) -> int:
        """Index of the segment whose range holds `offset` (the first one if none does)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    # --- appending --------------------------------------------------------------------

    @_io("appending to")
    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        *,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> AppendInfo:
        """Validate one append's records, give them offsets from the log end, write them.

        `records` holds exactly the concatenated batches of one partition of a produce
        request (or a coordinator's write). The log validator checks them against this
        log's config and the origin's rules, then writes each batch's base offset and
        partition leader epoch into the copy it appends; neither is covered by the CRC.
        """
        now_ms = self._clock() if now_ms is None else now_ms
        validated = validate_messages_and_assign_offsets(
            records,
            self._config,
            origin=origin,
            next_offset=self._log_end_offset,
            leader_epoch=leader_epoch,
            now_ms=now_ms,
            topic_partition=self.name,
            max_decompressed_bytes=max_decompressed_bytes,
        )
        buffer, batches = validated.buffer, validated.batches
        size = len(buffer)
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"message batch size is {size} bytes in append to partition {self.name},"
                f" which exceeds the maximum configured segment size of"
                f" {self._config.segment_bytes}"
            )
        producer_append: _ProducerAppend | None = None
        if any(header.producer_id >= 0 for header in batches):
            prepared = self._prepare_producer_state(buffer, batches, origin)
            if isinstance(prepared, BatchMetadata):
                duplicate = prepared
                # A retried batch: answer with where it was written the first time.
                return AppendInfo(
                    duplicate.first_offset,
                    duplicate.last_offset,
                    duplicate.max_timestamp,
                    duplicate.last_offset,
                    NO_TIMESTAMP,
                    self._log_start_offset,
                    0,
                    0,
                )
            producer_append = prepared
        first_offset, last_offset = validated.first_offset, validated.last_offset
        if leader_epoch >= 0:
            latest = self.leader_epoch_cache.latest_epoch
            if latest is None or leader_epoch > latest:
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
        self._append(
            buffer,
            batches,
            first_offset,
            last_offset,
            validated.max_timestamp,
            validated.shallow_offset_of_max_timestamp,
            now_ms,
        )
        self._after_append(producer_append)
        self._maybe_flush_after_append()
        return AppendInfo(
            first_offset,
            last_offset,
            validated.max_timestamp,
            validated.shallow_offset_of_max_timestamp,
            validated.log_append_time,
            self._log_start_offset,
            validated.record_count,
            size,
        )

    # --- producer state ---------------------------------------------------------------

    def _prune_snapshots_at_open(self, clean_shutdown: bool) -> None:
        """Drop the snapshots that cannot describe this log (Kafka's LogLoader does the
        same): those of no segment (but the newest, from a clean shutdown), those past
        the log end, and after an unclean shutdown those past the recovery point, whose
        log may not have reached the disk."""
        state = self._producer_state
        state.remove_stray_snapshots(self._bases)
        state.delete_snapshots_after(self._log_end_offset)
        if not clean_shutdown:
            state.delete_snapshots_after(self._recovery_point)

    @property
    def producer_state(self) -> ProducerStateManager:
        """Idempotent producers' state, loaded on first use.

        The newest valid snapshot gives the state at its offset; the batch headers of
        the log after it are replayed (all of them when there is no snapshot).
        """
        if not self._producer_state_loaded:
            self._load_producer_state()
        return self._producer_state

    @_io("loading the producer state of")
    def _ensure_producer_state(self) -> None:
        if not self._producer_state_loaded:
            self._load_producer_state()

    def _load_producer_state(self) -> None:
        state = self._producer_state
        started = time.monotonic()
        state.truncate_and_reload(self._log_start_offset, self._log_end_offset)
        replay_from = max(state.map_end_offset, self._log_start_offset)
        replayed = 0
        if replay_from < self._log_end_offset:
            logger.debug(
                "Rebuilding the producer state of %s from offset %d to %d",
                self.name,
                replay_from,
                self._log_end_offset,
            )
            first = self._segment_index_for(replay_from)
            replayed = replay_producer_state(
                state, self._segments[first:], replay_from, self._log_end_offset
            )
        state.update_map_end_offset(self._log_end_offset)
        state.on_high_watermark_updated(self._high_watermark)
        self._producer_state_loaded = True
        self._update_first_unstable_offset()
        # As Kafka after a rebuild: the next start need not replay the same batches. Only
        # a saving: a snapshot that cannot be written (no descriptor left) fails neither
        # the load nor the fetch or append that asked for it.
        try:
            state.take_snapshot()
        except OSError as exc:
            logger.warning(
                "Could not write a producer snapshot of %s after loading its state: %s",
                self.name,
                exc.strerror or exc,
            )
        # A consumer's first fetch of each partition loads its state: one line per
        # partition only where there are producers to speak of.
        logger.log(
            logging.INFO if state.producers else logging.DEBUG,
            "Loaded the producer state of %s (%d producers, %d batches replayed) in %d ms",
            self.name,
            len(state.producers),
            replayed,
            (time.monotonic() - started) * 1000,
        )

    @_io("reading the producer state of")
    def active_producers(self) -> list[ProducerStateEntry]:
        """The producers this partition knows (DescribeProducers)."""
        return list(self.producer_state.producers.values())

    @_io("expiring producers of")
    def remove_expired_producers(self, now_ms: int | None = None) -> int:
        """Drop producers idle for producer.id.expiration.ms (a state not loaded yet
        drops them as it loads)."""
        if not self._producer_state_loaded:
            return 0
        return self._producer_state.remove_expired_producers(
            self._clock() if now_ms is None else now_ms
        )

    @_io("deleting producer snapshots of")
    def delete_snapshots_after_recovery_point_checkpoint(self) -> int:
        """Delete the snapshots no restart needs (Kafka's method of this name): keep
        those of the last two segments, and those from the segment before the recovery
        point on, where recovery after a crash would start. Returns the lowest kept."""
        active = self._segments[-1].base_offset
        i = bisect.bisect_left(self._bases, active) - 1
        two_segments = self._bases[i] if i >= 0 else active
        j = bisect.bisect_left(self._bases, self._recovery_point) - 1
        recovery = self._bases[j] if j >= 0 else self._recovery_point
        keep_from = min(two_segments, recovery)
        self._producer_state.delete_snapshots_before(keep_from)
        return keep_from

    def _prepare_producer_state(
        self,
        buffer: bytes | bytearray | memoryview,
        batches: Sequence[BatchHeader],
        origin: AppendOrigin,
    ) -> BatchMetadata | _ProducerAppend:
        """Check the batches of idempotent and transactional producers against their
        state, as `origin` requires (Kafka's analyzeAndValidateProducerState).

        Returns the earlier append of a client's retried batch (nothing is written
        then), or the changes to take once the batches are written, with the
        transactions their markers complete. Nothing changes here, so an append that
        is refused or fails to write leaves the state as it was.
        """
        state = self.producer_state
        pending: dict[int, ProducerAppendInfo] = {}
        completed_txns: list[CompletedTxn] = []
        for header in batches:
            if header.producer_id < 0:
                continue
            if origin is AppendOrigin.CLIENT:
                duplicate = state.find_duplicate(header)
                if duplicate is not None:
                    return duplicate
            info = pending.get(header.producer_id)
            if info is None:
                info = pending[header.producer_id] = state.prepare_update(
                    header.producer_id, origin
                )
            marker = read_end_txn_marker(buffer, header) if header.is_control else None
            completed = info.append(header, marker)
            if completed is not None:
                completed_txns.append(completed)
        return _ProducerAppend(list(pending.values()), completed_txns)

    def _after_append(self, producer_append: _ProducerAppend | None) -> None:
        """The batches are written: the producers' state moves on, and each
        transaction a marker completed is indexed (if aborted) in the active segment
        with the last stable offset it leaves (Kafka's append, after the write)."""
        if not self._producer_state_loaded:
            return
        state = self._producer_state
        if producer_append is not None:
            for update in producer_append.updates:
                state.update(update)
            segment = self._segments[-1]
            for completed in producer_append.completed_txns:
                segment.update_txn_index(completed, state.last_stable_offset(completed))
                state.complete_txn(completed)
        state.update_map_end_offset(self._log_end_offset)
        self._update_first_unstable_offset()

    @_io("appending to")
    def append_as_follower(
        self,
        buffer: bytes | bytearray | memoryview,
        batches: Sequence[BatchHeader] | None = None,
        now_ms: int | None = None,
    ) -> AppendInfo:
        """Append batches that already carry offsets and epochs (replication).

        Checks framing and CRC, that the first offset is not below the log end offset
        and that offsets increase; gaps (from a compacted leader) are allowed.
        """
        if batches is None:
            batches = split_batches(buffer)
        if not batches:
            raise ValueError("an append needs at least one batch")
        now_ms = self._clock() if now_ms is None else now_ms
        producer_append: _ProducerAppend | None = None
        size = len(buffer)
        if size > self._config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"batch of {size} bytes exceeds segment size {self._config.segment_bytes}"
            )
        first_offset = batches[0].base_offset
        if (
            first_offset < self._log_end_offset
            and self._log_end_offset == self._log_start_offset
            and batches[0].last_offset >= self._log_end_offset
        ):
            # An empty log that starts inside the leader's first batch (DeleteRecords
            # moved the leader's log start into a batch, and this log started over
            # there): it starts again at the batch, as Kafka's follower does; the log
            # start offset the leader sends moves it back up.
            self.truncate_fully_and_start_at(first_offset)
        if first_offset < self._log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"first offset {first_offset} of a follower append to {self.name} is below"
                f" the log end offset {self._log_end_offset}"
            )
        previous_last = self._log_end_offset - 1
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = first_offset
        record_count = 0
        for header in batches:
            verify_crc(buffer, header)
            if header.base_offset <= previous_last or header.last_offset_delta < 0:
                raise UnexpectedAppendOffsetError(
                    f"offsets of a follower append to {self.name} are not increasing at"
                    f" {header.base_offset}"
                )
            previous_last = header.last_offset
            record_count += header.record_count
            if header.max_timestamp > max_timestamp:
                max_timestamp = header.max_timestamp
                offset_of_max_timestamp = header.last_offset
        if any(header.producer_id >= 0 for header in batches):
            # A follower keeps the producers' state and the txn index too, so that it
            # can lead; the leader checked these batches already.
            prepared = self._prepare_producer_state(buffer, batches, AppendOrigin.REPLICATION)
            assert isinstance(prepared, _ProducerAppend)
            producer_append = prepared
        for header in batches:
            epoch = header.partition_leader_epoch
            latest = self.leader_epoch_cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                self.leader_epoch_cache.assign(epoch, header.base_offset)
        self._append(
            buffer,
            batches,
            first_offset,
            previous_last,
            max_timestamp,
            offset_of_max_timestamp,
            now_ms,
        )
        self._after_append(producer_append)
        self._maybe_flush_after_append()
        return AppendInfo(
            first_offset,
            previous_last,
            max_timestamp,
            offset_of_max_timestamp,
            NO_TIMESTAMP,
            self._log_start_offset,
            record_count,
            size,
        )

    def _append(
        self,
        buffer: bytes | bytearray | memoryview,
        batches: Sequence[BatchHeader],
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
        now_ms: int,
    ) -> None:
        # A new leader's epoch entry, kept in memory until now (LeaderEpochFileCache.assign
        # with flush=False), is on disk before any record of the epoch is.
        self.leader_epoch_cache.write_pending()
        config = self._config
        segment = self._segments[-1]
        if segment.should_roll(
            messages_size=len(buffer),
            max_timestamp_in_messages=max_timestamp,
            max_offset_in_messages=last_offset,
            now_ms=now_ms,
            max_segment_bytes=config.segment_bytes,
            max_segment_ms=config.segment_ms,
        ):
            segment = self.roll(first_offset)
        segment.append(last_offset, max_timestamp, offset_of_max_timestamp, buffer, batches)
        self._log_end_offset = last_offset + 1

    def _maybe_flush_after_append(self) -> None:
        if self.unflushed_messages >= self._config.flush_messages:
            self.flush()

    # --- rolling and flushing ---------------------------------------------------------

    @_io("rolling a segment of")
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or a later expected offset)."""
        new_offset = max(expected_next_offset or 0, self._log_end_offset)
        active = self._segments[-1]
        replacing = active.base_offset == new_offset and active.size == 0
        if replacing:
            # An empty segment asked to roll (its index was full at size 0): replace it.
            logger.warning("Replacing empty active segment %s of %s", new_offset, self.name)
            self._segments.pop()
            self._bases.pop()
            active.delete()
        elif new_offset in self._bases:
            raise KafkaError(
                f"trying to roll {self.name} to offset {new_offset}, which already has a segment"
            )
        for stale in (
            files.log_file(self.dir, new_offset),
            files.offset_index_file(self.dir, new_offset),
            files.time_index_file(self.dir, new_offset),
            files.txn_index_file(self.dir, new_offset),
        ):
            if stale.exists():
                logger.warning("Deleting stale file %s before rolling to it", stale)
                stale.unlink()
        segment = new_segment(self.dir, new_offset, self._config, clock=self._clock)
        try:
            segment.resize_indexes(self._config.max_index_size)  # creates the index files
            if not replacing:
                active.on_become_inactive_segment()
        except BaseException:
            # Out of descriptors or space: the active segment stays active, and the
            # half-made one leaves no descriptor or file behind.
            segment.delete()
            raise
        self._segments.append(segment)
        self._bases.append(new_offset)
        self._pending_flush_offset = new_offset
        logger.info("Rolled new log segment %d of %s", new_offset, self.name)
        # A snapshot at the new segment's base: recovering the segment, or a restart,
        # starts from it and replays this segment alone (Kafka's roll does the same).
        state = self.producer_state
        state.update_map_end_offset(new_offset)
        state.take_snapshot()
        return segment

    @_io("flushing")
    def flush(self, up_to_offset: int | None = None) -> None:
        """fsync the segments holding offsets below `up_to_offset` (default: all).

        Advances the recovery point: after a crash, only what lies beyond it is
        re-validated.
        """
        offset = self._log_end_offset if up_to_offset is None else up_to_offset
        offset = min(offset, self._log_end_offset)
        if offset <= self._recovery_point:
            return
        started = time.perf_counter()
        first = self._segment_index_for(self._recovery_point)
        new_segments = False
        for i in range(first, len(self._segments)):
            segment = self._segments[i]
            if segment.base_offset >= offset:
                break
            segment.flush()
            new_segments = new_segments or segment.base_offset >= self._recovery_point
        if new_segments:
            files.fsync_dir(self.dir)
        LOG_FLUSH_TIMES.observe((time.perf_counter() - started) * 1000)
        self._recovery_point = offset
        self._last_flush_ms = self._clock()
        if self._pending_flush_offset is not None and self._pending_flush_offset <= offset:
            self._pending_flush_offset = None

    def flush_if_due(self, now_ms: int) -> bool:
        """The periodic flush: after a roll, and every flush.ms. Returns whether it flushed."""
        if self._pending_flush_offset is not None:
            self.flush(self._pending_flush_offset)
            self._pending_flush_offset = None
            flushed = True
        else:
            flushed = False
        if now_ms - self._last_flush_ms >= self._config.flush_ms:
            self.flush()
            self._last_flush_ms = now_ms
            flushed = True
        return flushed

    # --- reading ----------------------------------------------------------------------

    @_io("reading")
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_message: bool = True,
        include_aborted_txns: bool = False,
        lazy: bool = False,
    ) -> FetchDataInfo:
        """Whole batches from the one holding `fetch_offset`, within one segment.

        At most `max_bytes` bytes, except that `min_one_message` returns the first
        batch whatever its size. Nothing at or past `max_offset` (exclusive, e.g. the
        high watermark) is returned: a batch reaching it is left out entirely.
        With `include_aborted_txns` (read_committed), the aborted transactions that
        overlap the records read come too. `lazy`: the records as a FileRegion, read
        when they are sent (a Fetch response). Raises OffsetOutOfRangeError when
        `fetch_offset` lies outside [log start offset, log end offset].
        """
        log_end_offset = self._log_end_offset
        if fetch_offset < self._log_start_offset or fetch_offset > log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is out of range for partition {self.name}: log start"
                f" offset {self._log_start_offset}, log end offset {log_end_offset}"
            )
        limit = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        records: bytes | memoryview | FileRegion = b""
        aborted: list[AbortedTxn] | None = [] if include_aborted_txns else None
        if fetch_offset < limit:
            segments = self._segments
            i = self._segment_index_for(fetch_offset)
            while i < len(segments):
                segment = segments[i]
                upper = self._bases[i + 1] if i + 1 < len(segments) else log_end_offset
                if limit >= upper:
                    max_position = segment.size
                elif limit <= segment.base_offset:
                    break
                else:
                    found = segment.translate_offset(limit)
                    max_position = segment.size if found is None else found[0]
                read = segment.read_from(
                    fetch_offset, max_bytes, max_position, min_one_message, lazy
                )
                if read is not None:
                    position, records = read
                    if aborted is not None:
                        # Kafka's addAbortedTransactions: up to an offset at or past
                        # the end of what was read, from this segment's txn index on.
                        bound = segment.fetch_upper_bound_offset(position, len(records))
                        aborted = self._collect_aborted_transactions(
                            fetch_offset, upper if bound is None else bound, i
                        )
                    break
                i += 1
        return FetchDataInfo(
            records,
            self._high_watermark,
            self.last_stable_offset,
            self._log_start_offset,
            log_end_offset,
            aborted,
        )

    def _collect_aborted_transactions(
        self, start_offset: int, upper_bound_offset: int, first_segment: int
    ) -> list[AbortedTxn]:
        """The aborted transactions overlapping [start_offset, upper_bound_offset), from
        the txn indexes of the segment at `first_segment` on, until one says no later
        segment can add any (Kafka's collectAbortedTransactions)."""
        aborted: list[AbortedTxn] = []
        for segment in self._segments[first_segment:]:
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            aborted += result.aborted_transactions
            if result.is_complete:
                break
        return aborted

    # --- offsets by timestamp ---------------------------------------------------------

    @_io("searching by timestamp in")
    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The earliest record at or after the log start whose timestamp >= `timestamp`."""
        for segment in self._segments:
            if segment.max_timestamp_so_far < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self._log_start_offset)
            if found is not None:
                return found
        return None

    def earliest_timestamp_and_offset(self) -> TimestampAndOffset:
        """ListOffsets -2: the log start offset and the epoch it belongs to."""
        offset = self._log_start_offset
        return TimestampAndOffset(
            NO_TIMESTAMP, offset, self.leader_epoch_cache.epoch_for_offset(offset)
        )

    def latest_timestamp_and_offset(self) -> TimestampAndOffset:
        """ListOffsets -1 at the log end (the broker may cap it at the HW or LSO)."""
        return TimestampAndOffset(
            NO_TIMESTAMP, self._log_end_offset, self.leader_epoch_cache.latest_epoch
        )

    @_io("searching by timestamp in")
    def max_timestamp_and_offset(self) -> TimestampAndOffset | None:
        """ListOffsets -3: the first record holding the largest timestamp in the log."""
        best: LogSegment | None = None
        for segment in self._segments:
            if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                best = segment
        if best is None:
            return None
        return best.find_max_timestamp_record()

    # --- truncation and deletion ------------------------------------------------------

    @_io("truncating")
    def truncate_to(self, target_offset: int) -> bool:
        """Remove everything from `target_offset` on (a follower diverged from its leader).

        Returns False when there is nothing to remove.
        """
        if target_offset < 0:
            raise ValueError(f"cannot truncate {self.name} to a negative offset")
        if target_offset >= self._log_end_offset:
            return False
        if target_offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(target_offset)
            return True
        logger.info("Truncating %s to offset %d", self.name, target_offset)
        while len(self._segments) > 1 and self._segments[-1].base_offset > target_offset:
            segment = self._segments.pop()
            self._bases.pop()
            self._delete_segment_files(segment)
        active = self._segments[-1]
        active.truncate_to(target_offset)
        self._log_end_offset = active.next_offset
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        if self._pending_flush_offset is not None:
            self._pending_flush_offset = min(self._pending_flush_offset, self._log_end_offset)
        # The state is what the newest snapshot left below the cut, plus the batches up
        # to it (Kafka rebuilds it the same way); loaded again when next needed.
        self._producer_state.delete_snapshots_after(self._log_end_offset)
        self._producer_state_loaded = False
        self._first_unstable_offset = None
        return True

    @_io("truncating")
    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete every segment and start an empty log at `new_offset`."""
        logger.info("Truncating %s fully and starting at offset %d", self.name, new_offset)
        for segment in self._segments:
            self._delete_segment_files(segment)
        segment = new_segment(self.dir, new_offset, self._config, clock=self._clock)
        segment.resize_indexes(self._config.max_index_size)
        self._segments = [segment]
        self._bases = [new_offset]
        self.leader_epoch_cache.clear_and_flush()
        self._log_start_offset = new_offset
        self._log_end_offset = new_offset
        self._high_watermark = new_offset
        self._recovery_point = new_offset
        self._pending_flush_offset = None
        self._producer_state.truncate_fully_and_start_at(new_offset)
        self._producer_state_loaded = True
        self._update_first_unstable_offset()

    @_io("deleting records of")
    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Move the log start offset forward (DeleteRecords) and drop segments below it.

        Raises OffsetOutOfRangeError beyond the high watermark, as Kafka does.
        """
        if new_log_start_offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot increment the log start offset of {self.name} to"
                f" {new_log_start_offset}: it is beyond the high watermark"
                f" {self._high_watermark}"
            )
        if new_log_start_offset <= self._log_start_offset:
            return False
        # Loaded first: producers whose batches go keep their state in memory.
        self.producer_state.on_log_start_offset_incremented(new_log_start_offset)
        self._update_log_start_offset(new_log_start_offset)
        self._delete_segments(
            self._deletable_segments(
                lambda segment, following: (
                    following is not None and following.base_offset <= self._log_start_offset
                )
            ),
            "log start offset breach",
        )
        return True

    def _update_log_start_offset(self, offset: int) -> None:
        logger.info("Incrementing the log start offset of %s to %d", self.name, offset)
        self._log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        self._high_watermark = max(self._high_watermark, offset)
        self._recovery_point = max(self._recovery_point, offset)
        self._update_first_unstable_offset()

    @_io("deleting old segments of")
    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Retention: delete whole segments past retention.ms / retention.bytes.

        Only segments wholly below the high watermark go. When the active segment
        itself is past retention it is rolled first, as Kafka does, so an idle topic
        empties. Returns the number of segments deleted.
        """
        now_ms = self._clock() if now_ms is None else now_ms
        config = self._config
        deleted = 0
        if config.delete_enabled:
            if config.retention_ms >= 0:
                deleted += self._delete_segments(
                    self._deletable_segments(
                        lambda segment, _: now_ms - segment.largest_timestamp > config.retention_ms
                    ),
                    f"retention time {config.retention_ms} ms breach",
                )
            size = self.size_in_bytes
            if config.retention_bytes >= 0 and size >= config.retention_bytes:
                excess = size - config.retention_bytes

                def over_size(segment: LogSegment, _: LogSegment | None) -> bool:
                    nonlocal excess
                    if excess - segment.size >= 0:
                        excess -= segment.size
                        return True
                    return False

                deleted += self._delete_segments(
                    self._deletable_segments(over_size),
                    f"retention size {config.retention_bytes} bytes breach",
                )
        deleted += self._delete_segments(
            self._deletable_segments(
                lambda segment, following: (
                    following is not None and following.base_offset <= self._log_start_offset
                )
            ),
            "log start offset breach",
        )
        return deleted

    def _deletable_segments(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool]
    ) -> list[LogSegment]:
        deletable: list[LogSegment] = []
        segments = self._segments
        for i, segment in enumerate(segments):
            following = segments[i + 1] if i + 1 < len(segments) else None
            if following is None and segment.size == 0:
                break
            upper = following.base_offset if following is not None else self._log_end_offset
            if self._high_watermark < upper or not predicate(segment, following):
                break
            deletable.append(segment)
        return deletable

    def _delete_segments(self, deletable: list[LogSegment], reason: str) -> int:
        if not deletable:
            return 0
        # Loaded first: producers whose batches go keep their state in memory.
        state = self.producer_state
        if deletable[-1] is self._segments[-1]:
            self.roll()
        count = len(deletable)
        for segment in deletable:
            logger.info(
                "Deleting segment %d of %s due to %s", segment.base_offset, self.name, reason
            )
        del self._segments[:count]
        del self._bases[:count]
        new_start = max(self._log_start_offset, self._segments[0].base_offset)
        if new_start > self._log_start_offset:
            self._update_log_start_offset(new_start)
            state.on_log_start_offset_incremented(new_start)
            self._update_first_unstable_offset()
        for segment in deletable:
            self._delete_segment_files(segment)
            state.remove_snapshot(segment.base_offset)
        return count

    def _delete_segment_files(self, segment: LogSegment) -> None:
        # Renamed first, as Kafka does: a crash mid-way leaves `.deleted` files, which
        # the next start removes, instead of a segment with half its files.
        segment.close_handlers()
        segment.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
        delay = self._config.file_delete_delay_ms
        if delay <= 0:
            segment.delete()
        else:
            self._pending_deletes.append((self._clock() + delay, segment))

    @_io("removing deleted segments of")
    def purge_deleted_segments(self, now_ms: int | None = None) -> int:
        """Remove the `.deleted` files whose file.delete.delay.ms has passed."""
        if not self._pending_deletes:
            return 0
        now_ms = self._clock() if now_ms is None else now_ms
        due = [segment for deadline, segment in self._pending_deletes if deadline <= now_ms]
        self._pending_deletes = [
            (deadline, segment) for deadline, segment in self._pending_deletes if deadline > now_ms
        ]
        for segment in due:
            segment.delete()
        return len(due)

    # --- compaction -------------------------------------------------------------------

    @_io("swapping cleaned segments into")
    def replace_segments(
        self,
        groups: Sequence[tuple[LogSegment, Sequence[LogSegment]]],
        sizes: dict[int, int],
        on_step: Callable[[str], None] | None = None,
    ) -> bool:
        """Swap cleaned segments (named `.cleaned`) in for the segments they replace
        (Kafka's replaceSegments), or refuse (False) when those are no longer the log's
        as they were when cleaning began (retention, truncation or DeleteRecords moved
        them meanwhile). `sizes`: each old segment's size then, by base offset.

        Each step leaves a log that opens whole: `.cleaned` -> `.swap` (a crash now
        keeps the old segments or, at start, swaps in the new one), the old segments
        renamed `.deleted`, then `.swap` -> the segment's own name. `on_step` is told
        each step done ("swap-renamed", "old-deleted"): crash tests stop there.
        """
        step = on_step or (lambda _: None)
        positions: list[int] = []
        for _, old in groups:
            for segment in old:
                i = self._segment_index_for(segment.base_offset)
                if (
                    self._segments[i] is not segment
                    or segment.size != sizes.get(segment.base_offset)
                    or i == len(self._segments) - 1
                ):
                    return False
                positions.append(i)
        if positions != list(range(positions[0], positions[0] + len(positions))):
            return False
        for cleaned, _ in groups:
            cleaned.change_file_suffixes(files.CLEANED_FILE_SUFFIX, files.SWAP_FILE_SUFFIX)
        files.fsync_dir(self.dir)
        step("swap-renamed")
        replacing = {segment.base_offset for _, old in groups for segment in old}
        kept = [segment for segment in self._segments if segment.base_offset not in replacing]
        for _, old in groups:
            for segment in old:
                self._delete_segment_files(segment)
        # As Kafka's replaceSegments: the producer snapshots of segments merged into
        # another go with them (a cleaned segment keeps its first old segment's base
        # offset, and so that segment's snapshot). The cleaner writes none: cleaning
        # changes no producer's state.
        bases = {cleaned.base_offset for cleaned, _ in groups}
        for base in sorted(replacing - bases):
            self._producer_state.remove_snapshot(base)
        step("old-deleted")
        for cleaned, _ in groups:
            cleaned.change_file_suffixes(files.SWAP_FILE_SUFFIX, "")
        files.fsync_dir(self.dir)
        segments = kept + [cleaned for cleaned, _ in groups]
        segments.sort(key=lambda segment: segment.base_offset)
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        return True

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        """Flush everything, record max timestamps, trim the indexes, close the files."""
        if self._closed:
            return
        if self._offline:
            self.mark_offline()
            return
        self.flush()
        # A truncation made at load, if nothing wrote it (and not a new leader's epoch
        # that no record has: LeaderEpochFileCache.flush_at_close).
        self.leader_epoch_cache.flush_at_close(self._log_end_offset)
        if self._producer_state_loaded:
            # At the log end, so that the next start replays nothing.
            self._producer_state.update_map_end_offset(self._log_end_offset)
            self._producer_state.take_snapshot()
        for segment in self._segments:
            segment.close()
        self._closed = True

    def close_handlers(self) -> None:
        for segment in self._segments:
            segment.close_handlers()
        self._closed = True

    def delete(self) -> None:
        """Remove the partition directory and everything in it.

        The directory is first renamed `<topic>-<n>.<uuid>-delete` (Kafka's marker of
        a deletion in progress), so a crash part-way leaves a directory that the next
        start recognises and removes.
        """
        self.close_handlers()
        target = self.dir.with_name(files.delete_dir_name(self.topic, self.partition))
        try:
            os.rename(self.dir, target)
        except FileNotFoundError:
            return
        files.fsync_dir(target.parent)
        shutil.rmtree(target, ignore_errors=True)
        logger.info("Deleted log %s", self.dir.name)


def _new_log(dir: Path, config: LogConfig, start_offset: int, clock: Clock) -> LoadedLogOffsets:
    """What loading a directory just made would find: one empty segment, its indexes
    preallocated, read from nothing (a CreateTopics of thousands makes thousands). The
    directory is empty, so its files are made without first looking for them."""
    segment = new_segment(dir, start_offset, config, clock=clock, new=True)
    return LoadedLogOffsets([segment], start_offset, start_offset, start_offset)


def _discard_new_dir(dir: Path) -> None:
    """Remove a partition directory that Log.open made before it failed.

    It is renamed `-delete` first, which needs no descriptor: removing the files needs
    some, and running out of them may be why the open failed. A `-delete` directory is
    no partition to anyone, and the next start removes whatever is left of it.
    """
    target = dir.with_name(f"{dir.name}.{uuid.uuid4().hex}{files.DELETE_DIR_SUFFIX}")
    try:
        os.rename(dir, target)
    except OSError:
        target = dir
    shutil.rmtree(target, ignore_errors=True)
