"""Offline compaction of a log dir with Spark: the broker's log cleaner, driven from
executors (`brook compact`, or compact_log_dir from Python).

Every partition directory of LOG_DIR is one Spark task. The task copies the directory
into OUT_DIR, opens the copy as the broker would (recovering it when LOG_DIR was not
shut down cleanly), and, for a compacted topic, runs storage.log_cleaner on it, plan
after plan, until everything below the active segment is clean: the same plan, clean
and swap as the broker's cleaner thread, so the same input gives the same records at
the same offsets. Then it closes the log cleanly (its producer snapshot at the log
end). Other topics are copied as they are. The driver then writes OUT_DIR's own files:
the checkpoints (recovery points, log start offsets, high watermarks, cleaner
checkpoints), meta.properties and Brook's config files copied from LOG_DIR, and the
clean-shutdown marker, so that a broker started on OUT_DIR serves it at once.

LOG_DIR is never written to. It must not be held by a broker: its `.lock` is taken
(shared) for the whole run, which a broker's exclusive lock refuses, and OUT_DIR's
(exclusive) too, so that no broker starts on a half-written OUT_DIR.

Imports brook.storage and brook.protocol, and pyspark only where Spark is driven: the
module must be importable by Spark's Python workers, which run compact_partition.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brook.storage import log_file_utils as files
from brook.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    OffsetCheckpointFile,
)
from brook.storage.errors import CorruptCheckpointError
from brook.storage.log import Log
from brook.storage.log_cleaner import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    DEFAULT_DEDUPE_BUFFER_SIZE,
    clean,
    plan_cleaning,
)
from brook.storage.log_config import LogConfig
from brook.storage.log_manager import CLEAN_SHUTDOWN_FILE, LOCK_FILE, write_clean_shutdown_marker
from brook.storage.reader import list_partitions

TopicPartition = tuple[str, int]

# Files of a log dir (not of its partitions) that OUT_DIR takes as they are: which
# broker and cluster it is, and Brook's topic and dynamic broker configs.
COPIED_LOG_DIR_FILES = (
    "meta.properties",
    "brook-topic-configs.json",
    "brook-broker-configs.json",
)
# Left out of a partition's copy: what its opening would delete anyway.
SKIPPED_SUFFIXES = (files.DELETED_FILE_SUFFIX, files.CLEANED_FILE_SUFFIX)
# How often the driver looks at Spark's progress.
PROGRESS_POLL_S = 0.5
# Spark tasks per core of the cluster: a few, so that a long partition does not leave the
# other cores idle at the end, and not one per partition, whose start-up (tens of ms
# each) would dwarf the work of the many small ones (__consumer_offsets' 50).
TASKS_PER_CORE = 4
# What a partition costs besides its bytes (opening, copying the small files, closing),
# counted as this many bytes when the partitions are dealt to the Spark tasks.
PARTITION_COST_BYTES = 1_000_000


class CompactionError(Exception):
    """The compaction cannot run: a message for the person who asked."""


class NotALogDirError(CompactionError):
    """LOG_DIR is missing or holds no partition directory: a wrong argument (the
    command's exit status 2, as `brook audit` answers it)."""


# --- one partition, on an executor ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PartitionTask:
    """What an executor needs to copy (and maybe compact) one partition directory."""

    topic: str
    partition: int
    source: str  # the partition directory in LOG_DIR
    target: str  # the one to write in OUT_DIR
    config: LogConfig
    compact: bool
    size: int
    clean_shutdown: bool
    recovery_point: int
    log_start_offset: int
    high_watermark: int | None
    cleaner_checkpoint: int | None
    now_ms: int
    offset_map_memory: int


@dataclass(frozen=True, slots=True)
class PartitionResult:
    topic: str
    partition: int
    compacted: bool
    recovery_point: int
    log_start_offset: int
    first_segment_base: int
    high_watermark: int
    log_end_offset: int
    cleaner_checkpoint: int | None
    size_before: int
    size_after: int
    records_read: int
    records_kept: int
    cleanings: int
    elapsed_s: float


def compact_partition(task: PartitionTask) -> PartitionResult:
    """Copy one partition directory into OUT_DIR and clean the copy (compacted topics)."""
    started = time.monotonic()
    source, target = Path(task.source), Path(task.target)
    # A retried task starts again from nothing.
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for entry in sorted(os.scandir(source), key=lambda e: e.name):
        if entry.is_file() and not entry.name.endswith(SKIPPED_SUFFIXES):
            shutil.copy2(entry.path, target / entry.name)
    log = Log.open(
        target,
        task.config,
        recovery_point=task.recovery_point,
        log_start_offset=task.log_start_offset,
        clean_shutdown=task.clean_shutdown,
    )
    try:
        # Without a checkpointed high watermark (a broker stopped uncleanly), a stopped
        # single broker's whole log counts as committed.
        high_watermark = task.high_watermark
        log.high_watermark = log.log_end_offset if high_watermark is None else high_watermark
        size_before = log.size_in_bytes
        checkpoint = task.cleaner_checkpoint
        records_read = records_kept = cleanings = 0
        while task.compact:
            plan = plan_cleaning(log, checkpoint, task.now_ms, force=True)
            if plan is None:
                break
            result = clean(plan, offset_map_memory=task.offset_map_memory)
            sizes = {s.base_offset: n for s, n in zip(plan.segments, plan.sizes, strict=True)}
            if not log.replace_segments(result.groups, sizes):
                result.discard()
                raise RuntimeError(f"{log.name} changed while it was cleaned")
            # The old segments' files go now: nobody reads them.
            log.purge_deleted_segments(2**62)
            checkpoint = result.end_offset
            records_read += result.stats.records_read
            records_kept += result.stats.records_kept
            cleanings += 1
        log.close()
    except BaseException:
        log.close_handlers()
        raise
    return PartitionResult(
        topic=task.topic,
        partition=task.partition,
        compacted=task.compact,
        recovery_point=log.recovery_point,
        log_start_offset=log.log_start_offset,
        first_segment_base=log.segments[0].base_offset,
        high_watermark=log.high_watermark,
        log_end_offset=log.log_end_offset,
        cleaner_checkpoint=checkpoint,
        size_before=size_before,
        size_after=log.size_in_bytes,
        records_read=records_read,
        records_kept=records_kept,
        cleanings=cleanings,
        elapsed_s=time.monotonic() - started,
    )


# --- the log dirs, on the driver ---------------------------------------------------------


@contextlib.contextmanager
def locked_dirs(log_dir: Path, out_dir: Path) -> Iterator[None]:
    """Check LOG_DIR and OUT_DIR and hold their locks while the compaction runs.

    Raises CompactionError when LOG_DIR is not a log dir or a broker holds it, or when
    OUT_DIR is not empty, is LOG_DIR or lies inside it."""
    log_dir, out_dir = log_dir.absolute(), out_dir.absolute()
    if not log_dir.is_dir():
        raise NotALogDirError(f"{log_dir} is not a directory")
    if out_dir == log_dir or log_dir in out_dir.parents:
        raise CompactionError(f"The output directory {out_dir} must lie outside {log_dir}")
    if out_dir.exists() and (
        not out_dir.is_dir() or any(entry.name != LOCK_FILE for entry in out_dir.iterdir())
    ):
        raise CompactionError(
            f"The output directory {out_dir} is not empty: give a new or empty directory"
        )
    with contextlib.ExitStack() as stack:
        lock = log_dir / LOCK_FILE
        if lock.exists():
            # A shared lock needs no write access, and a broker's exclusive one (Brook's
            # or Kafka's) refuses it. Held to the end: no broker starts here meanwhile.
            fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
            stack.callback(os.close, fd)
            try:
                fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                raise CompactionError(
                    f"{log_dir} is in use by a running broker (its {LOCK_FILE} is locked):"
                    " stop the broker, or compact a copy of the directory"
                ) from None
        created = not out_dir.exists()
        out_dir.mkdir(parents=True, exist_ok=True)
        out_fd = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        stack.callback(os.close, out_fd)
        try:
            fcntl.lockf(out_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise CompactionError(f"{out_dir} is in use by another process") from None
        try:
            yield
        except BaseException:
            if created:  # as it was: not there
                shutil.rmtree(out_dir, ignore_errors=True)
            raise


def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    try:
        return OffsetCheckpointFile(path).read()
    except FileNotFoundError:
        return {}
    except CorruptCheckpointError as exc:
        # As the broker: without it, logs recover from offset 0 (slower, but safe).
        print(f"Ignoring unreadable checkpoint file: {exc}", file=sys.stderr)
        return {}


@dataclass(slots=True)
class CompactionSummary:
    """What the compaction did, partition by partition."""

    results: list[PartitionResult] = field(default_factory=list)
    elapsed_s: float = 0.0

    @property
    def size_before(self) -> int:
        return sum(r.size_before for r in self.results)

    @property
    def size_after(self) -> int:
        return sum(r.size_after for r in self.results)


def plan_tasks(
    log_dir: Path,
    out_dir: Path,
    log_config: Callable[[str], LogConfig],
    *,
    topics: Collection[str] | None = None,
    offset_map_memory: int = DEFAULT_DEDUPE_BUFFER_SIZE,
    now_ms: int | None = None,
) -> list[PartitionTask]:
    """One task per partition directory of `log_dir`, largest first (so that the long
    ones start early). `topics`: compact only these (each must be compacted); the
    others are copied. Raises CompactionError for a topic that cannot be compacted."""
    log_dir, out_dir = log_dir.absolute(), out_dir.absolute()
    partitions = list_partitions(log_dir)
    if not partitions:
        # Compacting it would write an empty log dir with a clean-shutdown marker, which
        # a broker would serve as a log dir that lost every topic.
        raise NotALogDirError(
            f"{log_dir} holds no partition directory (<topic>-<partition>): is it a log dir?"
        )
    found = {p.topic for p in partitions}
    configs = {topic: log_config(topic) for topic in sorted(found)}
    if topics is not None:
        missing = sorted(set(topics) - found)
        if missing:
            raise CompactionError(f"No partition of {', '.join(missing)} in {log_dir}")
        not_compacted = sorted(t for t in topics if not configs[t].compact)
        if not_compacted:
            raise CompactionError(
                f"cleanup.policy of {', '.join(not_compacted)} does not include compact:"
                " only compacted topics are compacted"
            )
    clean_shutdown = (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    recovery_points = _read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
    log_starts = _read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE)
    high_watermarks = _read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE)
    cleaner_checkpoints = _read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT_FILE)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    tasks = []
    for p in partitions:
        tp = (p.topic, p.partition)
        config = configs[p.topic]
        tasks.append(
            PartitionTask(
                topic=p.topic,
                partition=p.partition,
                source=str(p.path),
                target=str(out_dir / p.path.name),
                config=config,
                compact=config.compact and (topics is None or p.topic in topics),
                size=p.size,
                clean_shutdown=clean_shutdown,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                high_watermark=high_watermarks.get(tp),
                cleaner_checkpoint=cleaner_checkpoints.get(tp),
                now_ms=now,
                offset_map_memory=offset_map_memory,
            )
        )
    tasks.sort(key=lambda task: task.size, reverse=True)
    return tasks


def write_log_dir_files(log_dir: Path, out_dir: Path, results: list[PartitionResult]) -> None:
    """OUT_DIR's own files, once every partition is written and closed: the broker
    starts on it as after a clean shutdown, with the cleaner checkpoints where the
    compaction left them."""
    for name in COPIED_LOG_DIR_FILES:
        if (log_dir / name).is_file():
            shutil.copy2(log_dir / name, out_dir / name)
    results = sorted(results, key=lambda r: (r.topic, r.partition))
    OffsetCheckpointFile(out_dir / RECOVERY_POINT_CHECKPOINT_FILE).write(
        {(r.topic, r.partition): r.recovery_point for r in results}
    )
    # As the broker writes it: only where the start lies inside the first segment.
    OffsetCheckpointFile(out_dir / LOG_START_OFFSET_CHECKPOINT_FILE).write(
        {
            (r.topic, r.partition): r.log_start_offset
            for r in results
            if r.log_start_offset > r.first_segment_base
        }
    )
    OffsetCheckpointFile(out_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).write(
        {(r.topic, r.partition): r.high_watermark for r in results}
    )
    OffsetCheckpointFile(out_dir / CLEANER_OFFSET_CHECKPOINT_FILE).write(
        {
            (r.topic, r.partition): r.cleaner_checkpoint
            for r in results
            if r.cleaner_checkpoint is not None
        }
    )
    write_clean_shutdown_marker(out_dir)


def compact_partitions(tasks: list[PartitionTask]) -> list[PartitionResult]:
    """One Spark task's partitions, one after the other."""
    return [compact_partition(task) for task in tasks]


def deal(tasks: list[PartitionTask], slots: int) -> list[list[PartitionTask]]:
    """The partitions dealt to at most `slots` Spark tasks of about equal work: each, the
    largest first, to the task with the least so far."""
    count = max(1, min(slots, len(tasks)))
    groups: list[list[PartitionTask]] = [[] for _ in range(count)]
    loads = [0] * count
    for task in sorted(tasks, key=lambda t: t.size, reverse=True):
        lightest = loads.index(min(loads))
        groups[lightest].append(task)
        loads[lightest] += task.size + PARTITION_COST_BYTES
    return groups


def run_tasks(
    spark: Any, tasks: list[PartitionTask], progress: Callable[[str], None]
) -> list[PartitionResult]:
    """compact_partition on every partition, spread over the executors in a few Spark
    tasks per core; progress reports the Spark tasks done as Spark completes them."""
    if not tasks:
        return []
    context = spark.sparkContext
    groups = deal(tasks, max(1, context.defaultParallelism) * TASKS_PER_CORE)
    group_id = f"brook-compact-{uuid.uuid4().hex}"
    outcome: dict[str, Any] = {}
    progress(f"{len(tasks)} partition(s) in {len(groups)} Spark task(s)")

    def job() -> None:
        try:
            # Thread-local in PySpark (pinned threads): names this thread's job.
            context.setJobGroup(group_id, f"brook compact: {len(tasks)} partitions")
            rdd = context.parallelize(groups, len(groups))
            outcome["results"] = rdd.flatMap(compact_partitions).collect()
        except BaseException as exc:
            outcome["error"] = exc

    runner = threading.Thread(target=job, name="brook-compact", daemon=True)
    runner.start()
    tracker = context.statusTracker()
    reported = -1
    while runner.is_alive():
        runner.join(PROGRESS_POLL_S)
        done = 0
        for job_id in tracker.getJobIdsForGroup(group_id):
            info = tracker.getJobInfo(job_id)
            for stage_id in info.stageIds if info else ():
                stage = tracker.getStageInfo(stage_id)
                done += stage.numCompletedTasks if stage else 0
        if done != reported and runner.is_alive():
            progress(f"[{done}/{len(groups)}] Spark tasks done")
            reported = done
    if "error" in outcome:
        raise outcome["error"]
    results: list[PartitionResult] = outcome["results"]
    return results


def _print_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _removed_on_failure(out_dir: Path) -> Iterator[None]:
    """A compaction that fails leaves OUT_DIR as empty as it found it: half of a log
    dir must never be served."""
    try:
        yield
    except BaseException:
        for entry in out_dir.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.name != LOCK_FILE:
                entry.unlink(missing_ok=True)
        raise


def compact_log_dir(
    spark: Any,
    log_dir: Path | str,
    out_dir: Path | str,
    log_config: Callable[[str], LogConfig] | Mapping[str, LogConfig],
    *,
    topics: Collection[str] | None = None,
    offset_map_memory: int = DEFAULT_DEDUPE_BUFFER_SIZE,
    now_ms: int | None = None,
    progress: Callable[[str], None] | None = None,
    started: float | None = None,
    say_done: bool = True,
) -> CompactionSummary:
    """Compact LOG_DIR into OUT_DIR with `spark` (see the module's description).

    `log_config(topic)` (or a mapping) gives each topic's config: its cleanup.policy
    says whether it is compacted, and its cleaner keys how. `offset_map_memory` is each
    task's log.cleaner.dedupe.buffer.size. `now_ms` is the time the delete horizons of
    tombstones count from (now by default). `started` (time.monotonic()'s clock) is when
    the run began, now by default: a command gives its own start, so that the time it
    reports counts its Spark session's start too. `say_done`: end with the "Done in"
    line (done_line()); a command that stops Spark afterwards says it itself then."""
    say = progress or _print_progress
    source, target = Path(log_dir).absolute(), Path(out_dir).absolute()
    config_of: Callable[[str], LogConfig]
    if isinstance(log_config, Mapping):
        mapping = log_config

        def config_of_topic(topic: str) -> LogConfig:
            return mapping.get(topic, LogConfig())

        config_of = config_of_topic
    else:
        config_of = log_config
    started = time.monotonic() if started is None else started
    with locked_dirs(source, target), _removed_on_failure(target):
        tasks = plan_tasks(
            source,
            target,
            config_of,
            topics=topics,
            offset_map_memory=offset_map_memory,
            now_ms=now_ms,
        )
        compacted = sorted({t.topic for t in tasks if t.compact})
        say(
            f"Compacting {source} into {target}: {len(tasks)} partition(s),"
            f" {sum(t.size for t in tasks) / 1e6:.1f} MB;"
            f" compacted topics: {', '.join(compacted) or 'none'};"
            " every other topic is copied as it is"
        )
        results = run_tasks(spark, tasks, say)
        write_log_dir_files(source, target, results)
    summary = CompactionSummary(results, time.monotonic() - started)
    for r in sorted(results, key=lambda r: (r.topic, r.partition)):
        if r.compacted:
            say(
                f"  {r.topic}-{r.partition}: {r.size_before / 1e6:.2f} MB -> "
                f"{r.size_after / 1e6:.2f} MB, {r.records_read} records read, "
                f"{r.records_kept} kept, {r.cleanings} cleaning(s), cleaned up to offset"
                f" {r.cleaner_checkpoint}, log end offset {r.log_end_offset}"
            )
    if say_done:
        say(done_line(summary, target, summary.elapsed_s))
    return summary


def done_line(summary: CompactionSummary, out_dir: Path, elapsed_s: float) -> str:
    return (
        f"Done in {elapsed_s:.1f} s: {summary.size_before / 1e6:.1f} MB ->"
        f" {summary.size_after / 1e6:.1f} MB in {out_dir}"
    )
