"""Which log the cleaner takes next, and what it remembers between cleanings (Kafka's
LogCleanerManager): the cleaner checkpoint of each log dir, the logs being cleaned (one
cleaner thread each), the logs that failed.

Runs where the logs are owned (the broker's event loop): choosing a log reads its
offsets, and swapping the cleaned segments in changes its segment list. The cleaning
itself (storage.log_cleaner.clean) runs wherever the driver likes, e.g. a thread.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .log import Log
from .log_cleaner import CleanerCheckpoints, CleanPlan, CleanResult, describe, plan_cleaning

logger = logging.getLogger("brook.storage.log_cleaner")

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CleaningDone:
    """One cleaning swapped in: what tests and metrics read (Kafka logs the same)."""

    topic_partition: TopicPartition
    first_dirty_offset: int
    end_offset: int
    bytes_read: int
    buffer_utilization: float
    elapsed_s: float


class LogCleanerManager:
    def __init__(self) -> None:
        self._checkpoints: dict[Path, CleanerCheckpoints] = {}
        # Logs whose cleaning failed for a reason other than a disk error (Kafka's
        # uncleanable partitions): skipped until the broker restarts.
        self.uncleanable: set[TopicPartition] = set()
        # Logs a cleaner thread has taken and not finished: no other thread takes them.
        self.in_progress: set[TopicPartition] = set()
        # What tests and metrics read: logs cleaned and bytes read since start.
        self.cleaned_logs = 0
        self.bytes_cleaned = 0
        self.recent: deque[CleaningDone] = deque(maxlen=1000)

    def checkpoints(self, log_dir: Path) -> CleanerCheckpoints:
        found = self._checkpoints.get(log_dir)
        if found is None:
            found = self._checkpoints[log_dir] = CleanerCheckpoints(log_dir)
        return found

    def grab_filthiest_log(
        self, logs: Mapping[TopicPartition, Log], now_ms: int
    ) -> tuple[Log, CleanPlan] | None:
        """The compacted log most in need of cleaning (an overdue one first, then the
        highest dirty ratio at or above min.cleanable.dirty.ratio), with its plan. The
        log counts as in progress until done_cleaning."""
        best: tuple[tuple[bool, float], TopicPartition, Log] | None = None
        for tp, log in logs.items():
            if not log.config.compact or log.is_offline:
                continue
            if tp in self.uncleanable or tp in self.in_progress:
                continue
            checkpoint = self.checkpoints(log.dir.parent).get(*tp)
            plan = plan_cleaning(log, checkpoint, now_ms, with_state=False)
            if plan is None:
                continue
            rank = (plan.overdue, plan.dirty_ratio)
            if best is None or rank > best[0]:
                best = (rank, tp, log)
        if best is None:
            return None
        _, tp, log = best
        checkpoint = self.checkpoints(log.dir.parent).get(*tp)
        plan = plan_cleaning(log, checkpoint, now_ms)
        if plan is None:
            return None
        self.in_progress.add(tp)
        return log, plan

    def done_cleaning(self, log: Log) -> None:
        """The cleaner thread is done with `log` (swapped in, given up or failed)."""
        self.in_progress.discard((log.topic, log.partition))

    def swap_in(
        self, log: Log, result: CleanResult, on_step: Callable[[str], None] | None = None
    ) -> bool:
        """Swap the cleaned segments into `log` and move its checkpoint on, or discard
        them when the log changed meanwhile. Returns whether they were swapped in."""
        plan = result.plan
        sizes = {s.base_offset: size for s, size in zip(plan.segments, plan.sizes, strict=True)}
        try:
            swapped = log.replace_segments(result.groups, sizes, on_step)
        except BaseException:
            result.discard()
            raise
        if not swapped:
            logger.info("Not swapping the cleaned segments of %s: the log changed", log.name)
            result.discard()
            return False
        self.checkpoints(log.dir.parent).update(log.topic, log.partition, result.end_offset)
        self.cleaned_logs += 1
        self.bytes_cleaned += result.stats.bytes_read
        self.recent.append(
            CleaningDone(
                (log.topic, log.partition),
                plan.first_dirty_offset,
                result.end_offset,
                result.stats.bytes_read,
                result.stats.buffer_utilization,
                result.stats.elapsed_s,
            )
        )
        logger.info("%s", describe(result))
        return True

    def mark_uncleanable(self, log: Log) -> None:
        self.uncleanable.add((log.topic, log.partition))
