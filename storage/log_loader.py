"""Opening a partition directory: find its segments, finish or undo interrupted work,
and after an unclean shutdown re-validate everything past the recovery point.

The steps follow Kafka's LogLoader:

1. Delete leftovers of interrupted deletions (`.deleted`) and cleanings (`.cleaned`);
   note `.swap` files, which are finished cleanings that were being swapped in.
2. Open a segment per `.log` file; delete index files whose `.log` is gone.
3. Finish each swap: the swapped-in segment replaces the segments it overlaps.
4. Recover the segments whose indexes are missing or whose `.txnindex` is damaged.
   After an unclean shutdown, recover every segment from the one holding the recovery
   point: check every batch, rebuild the indexes, cut a torn or corrupt tail, and drop
   any segment after a cut. A recovery starts from the producers' state at the
   segment's base offset (a snapshot plus the batches after it), so that it rebuilds
   the `.txnindex` from the ABORT markers it meets, as Kafka's recoverSegment does.
5. Settle the offsets: log start, log end, recovery point.

The broker's own producer state is loaded later, on first need (storage/log.py); the
states built here serve recovery only and take no snapshot.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from brook.protocol.record_batch import parse_header

from . import log_file_utils as files
from .clock import Clock, system_clock
from .end_transaction_marker import read_end_txn_marker
from .errors import CorruptIndexError
from .leader_epoch_cache import LeaderEpochFileCache
from .load_progress import LoadProgress
from .log_config import LogConfig
from .log_segment import LogSegment
from .producer_state import ProducerStateManager
from .producer_state_config import ProducerStateManagerConfig

logger = logging.getLogger("brook.storage.log")


@dataclass(slots=True)
class LoadedLogOffsets:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    next_offset: int
    # Segments re-validated past the recovery point after an unclean shutdown.
    recovered_segments: int = 0


def new_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    suffix: str = "",
    clock: Clock = system_clock,
    new: bool = False,
) -> LogSegment:
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.max_index_size,
        roll_jitter_ms=config.random_segment_jitter(),
        file_suffix=suffix,
        clock=clock,
        new=new,
    )


def replay_producer_state(
    state: ProducerStateManager, segments: Sequence[LogSegment], start: int, end: int
) -> int:
    """Apply the batches of [start, end) to `state` without checks, completing the
    transactions whose markers they hold (Kafka's rebuildProducerState). Reads batch
    headers only, and the whole batch of each transaction marker. Returns how many
    batches were applied."""
    replayed = 0
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if upper is not None and upper <= start:
            continue
        if segment.base_offset >= end:
            break
        found = segment.translate_offset(start)
        if found is None:
            continue
        for position, header, _ in segment.log.batches(found[0]):
            if header.base_offset >= end:
                break
            if header.next_offset <= start:
                continue
            replayed += 1
            if header.producer_id < 0:
                continue
            marker = None
            if header.is_control:
                whole = segment.log.read(position, header.size)
                marker = read_end_txn_marker(whole, parse_header(whole))
            completed = state.replay(header, marker)
            if completed is not None:
                state.complete_txn(completed)
    state.update_map_end_offset(max(state.map_end_offset, end))
    return replayed


class LogLoader:
    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        leader_epoch_cache: LeaderEpochFileCache,
        progress: LoadProgress | None = None,
        clock: Clock = system_clock,
        producer_state_config: ProducerStateManagerConfig | None = None,
    ) -> None:
        self.dir = directory
        self.producer_state_config = producer_state_config
        self.clock = clock
        self.config = config
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clean_shutdown = clean_shutdown
        self.leader_epoch_cache = leader_epoch_cache
        self.progress = progress or LoadProgress()
        self.name = directory.name
        self.recovered_segments = 0
        # Every segment opened here, so that a failure part-way (a full disk, too many
        # open files) closes their descriptors instead of leaking them.
        self._opened: list[LogSegment] = []

    def load(self) -> LoadedLogOffsets:
        try:
            return self._load()
        except BaseException:
            for segment in self._opened:
                segment.close_handlers()
            raise

    def _segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        segment = new_segment(self.dir, base_offset, self.config, suffix, self.clock)
        self._opened.append(segment)
        return segment

    def _load(self) -> LoadedLogOffsets:
        swap_files = self._remove_temp_files_and_collect_swap_files()
        segments, without_indexes = self._load_segment_files()
        self._complete_swap_operations(swap_files, segments)
        ordered = [segments[base] for base in sorted(segments)]
        ordered = self._recover(ordered, without_indexes)

        next_offset = ordered[-1].next_offset if ordered else self.log_start_offset
        if ordered and self.log_start_offset > next_offset:
            logger.warning(
                "Log start offset %d of %s is beyond its log end offset %d; deleting every segment",
                self.log_start_offset,
                self.name,
                next_offset,
            )
            for segment in ordered:
                segment.delete()
            ordered = []
            self.leader_epoch_cache.clear_and_flush()
        if not ordered:
            ordered = [self._segment(self.log_start_offset)]
            next_offset = self.log_start_offset

        log_start_offset = max(self.log_start_offset, ordered[0].base_offset)
        if self.clean_shutdown:
            recovery_point = next_offset
        else:
            recovery_point = min(self.recovery_point, next_offset)
        # In memory: the next change writes it (see truncate_from_end).
        self.leader_epoch_cache.truncate_from_end(next_offset, flush=False)
        self.leader_epoch_cache.truncate_from_start(log_start_offset)
        # The active segment takes appends: give its indexes their preallocated room.
        ordered[-1].resize_indexes(self.config.max_index_size)
        return LoadedLogOffsets(
            ordered, log_start_offset, recovery_point, next_offset, self.recovered_segments
        )

    # --- step 1 -----------------------------------------------------------------------

    def _remove_temp_files_and_collect_swap_files(self) -> list[Path]:
        swap_files: list[Path] = []
        for entry in os.scandir(self.dir):
            if not entry.is_file():
                continue
            name = entry.name
            path = Path(entry.path)
            if name.endswith((files.DELETED_FILE_SUFFIX, files.CLEANED_FILE_SUFFIX)):
                logger.info("Deleting leftover file %s", path)
                path.unlink(missing_ok=True)
            elif name.endswith(files.SWAP_FILE_SUFFIX):
                base_name = name[: -len(files.SWAP_FILE_SUFFIX)]
                logger.info("Found file %s from an interrupted swap operation", path)
                if base_name.endswith(files.LOG_FILE_SUFFIX):
                    swap_files.append(path)
                elif base_name.endswith(files.INDEX_SUFFIXES):
                    # Indexes of a swapped segment are rebuilt when the swap completes.
                    path.unlink(missing_ok=True)
        return swap_files

    # --- step 2 -----------------------------------------------------------------------

    def _load_segment_files(self) -> tuple[dict[int, LogSegment], set[int]]:
        names = {entry.name for entry in os.scandir(self.dir) if entry.is_file()}
        segments: dict[int, LogSegment] = {}
        without_indexes: set[int] = set()
        for name in sorted(names):
            base_offset = files.offset_from_file_name(name)
            if base_offset is None:
                continue
            prefix = files.filename_prefix_from_offset(base_offset)
            if name.endswith(files.INDEX_SUFFIXES) and name.count(".") == 1:
                if f"{prefix}{files.LOG_FILE_SUFFIX}" not in names:
                    logger.warning("Deleting orphaned index file %s/%s", self.dir, name)
                    (self.dir / name).unlink(missing_ok=True)
            elif name == f"{prefix}{files.LOG_FILE_SUFFIX}":
                segments[base_offset] = self._segment(base_offset)
                index = f"{prefix}{files.INDEX_FILE_SUFFIX}"
                time_index = f"{prefix}{files.TIME_INDEX_FILE_SUFFIX}"
                if index not in names or time_index not in names:
                    without_indexes.add(base_offset)
                elif f"{prefix}{files.TXN_INDEX_FILE_SUFFIX}" in names:
                    try:
                        segments[base_offset].txn_index.sanity_check()
                    except CorruptIndexError as exc:
                        logger.warning("%s; recovering segment %s", exc, name)
                        without_indexes.add(base_offset)
        return segments, without_indexes

    # --- step 3 -----------------------------------------------------------------------

    def _complete_swap_operations(
        self, swap_files: list[Path], segments: dict[int, LogSegment]
    ) -> None:
        for path in sorted(swap_files):
            base_offset = files.offset_from_file_name(path.name)
            if base_offset is None:
                continue
            swapped = self._segment(base_offset, files.SWAP_FILE_SUFFIX)
            # Rebuilt with the producers' state at its base, as Kafka's recoverSegment
            # does, so that its `.txnindex` (removed above) comes back from its markers.
            earlier = [segments[base] for base in sorted(segments) if base < base_offset]
            swapped.recover(None, self._producer_state_at(earlier, base_offset))
            next_offset = swapped.next_offset
            replaced = [
                segment
                for base, segment in segments.items()
                if base_offset <= base < next_offset
                and (base == base_offset or segment.next_offset > base_offset)
            ]
            for segment in replaced:
                logger.info("Swap of %s replaces %s", path.name, segment)
                del segments[segment.base_offset]
                segment.delete()
            swapped.close()
            swapped.change_file_suffixes(files.SWAP_FILE_SUFFIX, "")
            segments[base_offset] = self._segment(base_offset)

    # --- step 4 -----------------------------------------------------------------------

    def _recover(self, segments: list[LogSegment], without_indexes: set[int]) -> list[LogSegment]:
        first_unflushed = len(segments)
        if not self.clean_shutdown:
            # Every segment whose range reaches the recovery point or beyond.
            for i in range(len(segments)):
                upper = segments[i + 1].base_offset if i + 1 < len(segments) else None
                if upper is None or upper > self.recovery_point:
                    first_unflushed = i
                    break
        for i, segment in enumerate(segments[:first_unflushed]):
            if segment.base_offset in without_indexes:
                logger.warning(
                    "Could not find the index files of %s, or its transaction index is"
                    " damaged; rebuilding them",
                    segment.log.path,
                )
                state = self._producer_state_at(segments[:i], segment.base_offset)
                segment.recover(self.leader_epoch_cache, state)
        unflushed = segments[first_unflushed:]
        if not unflushed:
            last = segments[-1] if segments else None
            if last is not None and not last.tail_is_consistent():
                logger.warning(
                    "The active segment %s does not end where its batches end, although the"
                    " log was shut down cleanly; recovering it",
                    last.log.path,
                )
                state = self._producer_state_at(segments[:-1], last.base_offset)
                last.recover(self.leader_epoch_cache, state)
            return segments
        total = len(unflushed)
        self.recovered_segments = total
        # One state carries through: the end of one segment is the next one's base.
        state = self._producer_state_at(segments[:first_unflushed], unflushed[0].base_offset)
        for number, segment in enumerate(unflushed, start=1):
            self.progress.recovering_segment(self.name, number, total)
            truncated = segment.recover(self.leader_epoch_cache, state)
            if truncated > 0:
                dropped = unflushed[number:]
                if dropped:
                    logger.warning(
                        "Corruption in %s: deleting the %d segment(s) after it",
                        segment.log.path,
                        len(dropped),
                    )
                for later in dropped:
                    later.delete()
                return segments[: first_unflushed + number]
        return segments

    def _producer_state_at(
        self, earlier: Sequence[LogSegment], offset: int
    ) -> ProducerStateManager:
        """The producers' state at `offset` (a segment's base): the newest snapshot at
        or below it, plus the batches of the `earlier` segments after that snapshot."""
        state = ProducerStateManager(self.name, self.dir, self.producer_state_config, self.clock)
        state.load_for_recovery(self.log_start_offset, offset)
        start = max(state.map_end_offset, self.log_start_offset)
        if start < offset:
            replay_producer_state(state, earlier, start, offset)
        return state
