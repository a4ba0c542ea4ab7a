"""Opening a partition directory: find its segments, finish or undo interrupted work,
and after an unclean shutdown re-validate everything past the recovery point.

The steps follow Kafka's LogLoader:

1. Delete leftovers of interrupted deletions (`.deleted`) and cleanings (`.cleaned`);
   note `.swap` files, which are finished cleanings that were being swapped in.
2. Open a segment per `.log` file; delete index files whose `.log` is gone.
3. Finish each swap: the swapped-in segment replaces the segments it overlaps.
4. Rebuild the indexes of segments that have none. After an unclean shutdown, recover
   every segment from the one holding the recovery point: check every batch, rebuild
   the indexes, cut a torn or corrupt tail, and drop any segment after a cut.
5. Settle the offsets: log start, log end, recovery point.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import log_file_utils as files
from .clock import Clock, system_clock
from .leader_epoch_cache import LeaderEpochFileCache
from .log_config import LogConfig
from .log_segment import LogSegment

logger = logging.getLogger("brook.storage.log")


@dataclass(slots=True)
class LoadedLogOffsets:
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    next_offset: int


def new_segment(
    directory: Path,
    base_offset: int,
    config: LogConfig,
    suffix: str = "",
    clock: Clock = system_clock,
) -> LogSegment:
    return LogSegment(
        directory,
        base_offset,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.max_index_size,
        roll_jitter_ms=config.random_segment_jitter(),
        file_suffix=suffix,
        clock=clock,
    )


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
        progress: Callable[[str], None] | None = None,
        clock: Clock = system_clock,
    ) -> None:
        self.dir = directory
        self.clock = clock
        self.config = config
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clean_shutdown = clean_shutdown
        self.leader_epoch_cache = leader_epoch_cache
        self.progress = progress
        self.name = directory.name

    def _new_segment(self, base_offset: int, suffix: str = "") -> LogSegment:
        return new_segment(self.dir, base_offset, self.config, suffix, self.clock)

    def load(self) -> LoadedLogOffsets:
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
            ordered = [self._new_segment(self.log_start_offset)]
            next_offset = self.log_start_offset

        log_start_offset = max(self.log_start_offset, ordered[0].base_offset)
        if self.clean_shutdown:
            recovery_point = next_offset
        else:
            recovery_point = min(self.recovery_point, next_offset)
        self.leader_epoch_cache.truncate_from_end(next_offset)
        self.leader_epoch_cache.truncate_from_start(log_start_offset)
        # The active segment takes appends: give its indexes their preallocated room.
        ordered[-1].resize_indexes(self.config.max_index_size)
        return LoadedLogOffsets(ordered, log_start_offset, recovery_point, next_offset)

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
                segments[base_offset] = self._new_segment(base_offset)
                index = f"{prefix}{files.INDEX_FILE_SUFFIX}"
                time_index = f"{prefix}{files.TIME_INDEX_FILE_SUFFIX}"
                if index not in names or time_index not in names:
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
            swapped = self._new_segment(base_offset, files.SWAP_FILE_SUFFIX)
            swapped.recover()
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
            segments[base_offset] = self._new_segment(base_offset)

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
        for segment in segments[:first_unflushed]:
            if segment.base_offset in without_indexes:
                logger.warning(
                    "Could not find the index files of %s; rebuilding them", segment.log.path
                )
                segment.recover(self.leader_epoch_cache)
        unflushed = segments[first_unflushed:]
        if not unflushed:
            last = segments[-1] if segments else None
            if last is not None and not last.tail_is_consistent():
                logger.warning(
                    "The active segment %s does not end where its batches end, although the"
                    " log was shut down cleanly; recovering it",
                    last.log.path,
                )
                last.recover(self.leader_epoch_cache)
            return segments
        total = len(unflushed)
        logger.info(
            "Recovering %d unflushed segment(s) of %s from recovery point %d",
            total,
            self.name,
            self.recovery_point,
        )
        for number, segment in enumerate(unflushed, start=1):
            self._report(
                f"Recovering segment {number}/{total} of {self.name} ({number * 100 // total}%)"
            )
            truncated = segment.recover(self.leader_epoch_cache)
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

    def _report(self, message: str) -> None:
        logger.info("%s", message)
        if self.progress is not None:
            self.progress(message)
