"""Every partition log of a broker, across its log dirs (Kafka's LogManager).

Each log dir holds:

    .lock                              held while a broker uses the dir
    meta.properties                    which broker and cluster the dir belongs to
    .kafka_cleanshutdown               present only after a clean shutdown
    recovery-point-offset-checkpoint   per partition: below this, data is on disk
    log-start-offset-checkpoint        per partition: log start offsets moved by
                                       DeleteRecords or retention inside a segment
    replication-offset-checkpoint      per partition: the high watermark
    <topic>-<partition>/               one directory per partition log

At startup the clean-shutdown marker decides whether logs are recovered: without it,
every log re-validates everything past its recovery point. The marker is deleted as
soon as it is read, so a crash during startup or later means recovery next time.
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from . import log_file_utils as files
from .checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    MetaProperties,
    OffsetCheckpointFile,
    read_meta_properties,
    write_meta_properties,
    write_partition_metadata,
)
from .errors import (
    CorruptCheckpointError,
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    InconsistentTopicIdError,
    LogDirLockedError,
    StorageError,
)
from .log import Log
from .log_config import LogConfig

logger = logging.getLogger("brook.storage.log_manager")

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

TopicPartition = tuple[str, int]


def generate_cluster_id() -> str:
    """A random id in Kafka's Uuid.toString() form (22 url-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class LogManager:
    """Opens, creates, flushes, checkpoints and closes the partition logs of a broker."""

    def __init__(
        self,
        log_dirs: Iterable[Path | str],
        broker_id: int,
        cluster_id: str | None,
        default_config_factory: Callable[[str], LogConfig],
        *,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        """`default_config_factory(topic)` gives the config of a topic's logs at startup.

        `cluster_id` None adopts the id stored in meta.properties (or generates one
        when there is none); otherwise a stored id must match it.
        """
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log dir is needed")
        self.broker_id = broker_id
        self._cluster_id = cluster_id
        self._config_factory = default_config_factory
        self._progress = progress
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._lock_fds: dict[Path, int] = {}
        self._started = False
        # Set when a partition directory may have been left renamed `-delete` but not
        # removed (removing needs descriptors, which may have run out): the periodic
        # purge then tries again, as Kafka's scheduled deletion of logs does.
        self._deleted_dirs_pending = False

    @property
    def cluster_id(self) -> str | None:
        return self._cluster_id

    # --- startup ----------------------------------------------------------------------

    def startup(self) -> None:
        """Lock and check every log dir, then load every partition log in it."""
        started = time.monotonic()
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._lock(log_dir)
        self._check_meta_properties()
        for log_dir in self.log_dirs:
            self._load_logs(log_dir)
        self._started = True
        logger.info(
            "Loaded %d partition log(s) from %d log dir(s) in %d ms",
            len(self._logs),
            len(self.log_dirs),
            (time.monotonic() - started) * 1000,
        )

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            # POSIX record locks, like Java's FileChannel.tryLock: a Kafka broker on the
            # same dir is kept out too.
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirLockedError(
                f"Failed to acquire lock on file {LOCK_FILE} in {log_dir}. A Kafka instance in"
                " another process or thread is using this directory."
            ) from None
        self._lock_fds[log_dir] = fd

    def _check_meta_properties(self) -> None:
        stored = {log_dir: read_meta_properties(log_dir) for log_dir in self.log_dirs}
        for log_dir, meta in stored.items():
            if meta is None:
                continue
            if meta.broker_id is not None and meta.broker_id != self.broker_id:
                raise InconsistentBrokerIdError(
                    f"Configured broker.id {self.broker_id} doesn't match stored broker.id"
                    f" {meta.broker_id} in meta.properties of {log_dir}. If you moved your"
                    " data, make sure your configured broker.id matches. If you intend to"
                    " create a new broker, you should remove all data in your data"
                    " directories (log.dirs)."
                )
            if meta.cluster_id is not None:
                if self._cluster_id is None:
                    self._cluster_id = meta.cluster_id
                elif meta.cluster_id != self._cluster_id:
                    raise InconsistentClusterIdError(
                        f"The Cluster ID {self._cluster_id} doesn't match stored clusterId"
                        f" {meta.cluster_id} in meta.properties of {log_dir}. The broker is"
                        " trying to join the wrong cluster."
                    )
        if self._cluster_id is None:
            self._cluster_id = generate_cluster_id()
            logger.info("Generated cluster id %s", self._cluster_id)
        for log_dir, meta in stored.items():
            if meta is None or meta.broker_id is None or meta.cluster_id is None:
                write_meta_properties(
                    log_dir,
                    MetaProperties(
                        version=meta.version if meta else 0,
                        broker_id=self.broker_id,
                        cluster_id=self._cluster_id,
                        extra=meta.extra if meta else (),
                    ),
                )

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as exc:
            # Without it, logs recover from offset 0 and keep their segments' start:
            # slower, but safe.
            logger.error("Ignoring unreadable checkpoint file: %s", exc)
            return {}

    def _load_logs(self, log_dir: Path) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean_shutdown = marker.exists()
        if clean_shutdown:
            marker.unlink()
            files.fsync_dir(log_dir)
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
        log_start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE)
        high_watermarks = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE)

        to_load: list[tuple[TopicPartition, Path]] = []
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            path = Path(entry.path)
            if entry.name.endswith(files.DELETE_DIR_SUFFIX):
                logger.info("Removing %s, a partition whose deletion was interrupted", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if entry.name.endswith((files.FUTURE_DIR_SUFFIX, files.STRAY_DIR_SUFFIX)):
                logger.warning("Skipping %s: future and stray logs are not supported", path)
                continue
            try:
                topic_partition = files.parse_topic_partition(entry.name)
            except ValueError:
                logger.warning("Skipping %s: not a partition directory", path)
                continue
            to_load.append((topic_partition, path))

        total = len(to_load)
        if total:
            logger.info(
                "Loading %d partition(s) in %s after %s shutdown",
                total,
                log_dir,
                "a clean" if clean_shutdown else "an unclean",
            )
        for number, (topic_partition, path) in enumerate(to_load, start=1):
            if topic_partition in self._logs:
                raise StorageError(
                    f"Duplicate log directories for {path.name} are found in both"
                    f" {self._dir_of[topic_partition]} and {log_dir}. It is likely because log"
                    " directory failure happened while broker was replacing current replica"
                    " with future replica."
                )
            topic, _ = topic_partition

            def progress(message: str, number: int = number) -> None:
                self._report(f"[{number}/{total} in {log_dir}] {message}")

            log = Log.open(
                path,
                self._config_factory(topic),
                recovery_point=recovery_points.get(topic_partition, 0),
                log_start_offset=log_start_offsets.get(topic_partition, 0),
                clean_shutdown=clean_shutdown,
                progress=progress,
            )
            high_watermark = high_watermarks.get(topic_partition)
            if high_watermark is not None:
                log.high_watermark = high_watermark
            self._logs[topic_partition] = log
            self._dir_of[topic_partition] = log_dir

    def _report(self, message: str) -> None:
        if self._progress is not None:
            self._progress(message)

    # --- access -----------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def get_or_create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> Log:
        """The log of a partition, created (in the least loaded log dir) if missing."""
        topic_partition = (topic, partition)
        log = self._logs.get(topic_partition)
        if log is not None:
            if topic_id is not None:
                if log.topic_id is None:
                    write_partition_metadata(log.dir, topic_id)
                    log.topic_id = topic_id
                elif log.topic_id != topic_id:
                    raise InconsistentTopicIdError(
                        f"log {log.name} has topic id {log.topic_id}, not {topic_id}"
                    )
            if config is not None:
                log.update_config(config)
            return log
        if not topic or "/" in topic or os.sep in topic or topic in (".", "..") or partition < 0:
            raise ValueError(f"invalid topic partition {topic!r}-{partition}")
        counts = {log_dir: 0 for log_dir in self.log_dirs}
        for log_dir in self._dir_of.values():
            counts[log_dir] += 1
        log_dir = min(self.log_dirs, key=lambda d: counts[d])
        try:
            log = Log.open(
                log_dir / f"{topic}-{partition}",
                config or self._config_factory(topic),
                topic_id=topic_id,
                clean_shutdown=True,
            )
        except OSError:
            self._deleted_dirs_pending = True  # Log.open set aside what it had made
            raise
        logger.info("Created log %s in %s", log.name, log_dir)
        self._logs[topic_partition] = log
        self._dir_of[topic_partition] = log_dir
        return log

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and its files; False when there was none."""
        topic_partition = (topic, partition)
        log = self._logs.pop(topic_partition, None)
        self._dir_of.pop(topic_partition, None)
        if log is None:
            return False
        log.delete()
        self._deleted_dirs_pending = True
        return True

    # --- periodic work ----------------------------------------------------------------

    def _logs_by_dir(self) -> dict[Path, list[tuple[TopicPartition, Log]]]:
        by_dir: dict[Path, list[tuple[TopicPartition, Log]]] = {d: [] for d in self.log_dirs}
        for topic_partition, log in self._logs.items():
            by_dir[self._dir_of[topic_partition]].append((topic_partition, log))
        return by_dir

    def checkpoint_recovery_points_and_log_start_offsets(self) -> None:
        for log_dir, logs in self._logs_by_dir().items():
            OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE).write(
                {tp: log.recovery_point for tp, log in logs}
            )
            # As Kafka: only where the start differs from the first segment's base.
            OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).write(
                {
                    tp: log.log_start_offset
                    for tp, log in logs
                    if log.log_start_offset > log.segments[0].base_offset
                }
            )

    def checkpoint_high_watermarks(self) -> None:
        for log_dir, logs in self._logs_by_dir().items():
            OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).write(
                {tp: log.high_watermark for tp, log in logs}
            )

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync logs that rolled since their last flush or whose flush.ms has passed.

        Returns how many logs were flushed. Call it every few seconds (Kafka's
        log.flush.scheduler.interval.ms); with Kafka's defaults it only flushes the
        segments left behind by a roll, which keeps recovery after a crash short.
        """
        now_ms = _now_ms() if now_ms is None else now_ms
        flushed = 0
        for log in list(self._logs.values()):
            try:
                if log.flush_if_due(now_ms):
                    flushed += 1
            except OSError:
                logger.exception("Error flushing log %s", log.name)
        return flushed

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        now_ms = _now_ms() if now_ms is None else now_ms
        deleted = 0
        for log in list(self._logs.values()):
            try:
                deleted += log.delete_old_segments(now_ms)
            except OSError:
                logger.exception("Error applying retention to log %s", log.name)
        return deleted

    def purge_deleted_segments(self, now_ms: int | None = None) -> int:
        """Remove `.deleted` segment files whose file.delete.delay.ms has passed, and
        partition directories whose removal could not finish."""
        now_ms = _now_ms() if now_ms is None else now_ms
        if self._deleted_dirs_pending:
            self._deleted_dirs_pending = self._remove_deleted_dirs()
        return sum(log.purge_deleted_segments(now_ms) for log in self._logs.values())

    def _remove_deleted_dirs(self) -> bool:
        """Remove `-delete` directories; True while some remain."""
        remaining = False
        for log_dir in self.log_dirs:
            try:
                entries = list(os.scandir(log_dir))
            except OSError:  # still out of descriptors: next round
                return True
            for entry in entries:
                if entry.is_dir() and entry.name.endswith(files.DELETE_DIR_SUFFIX):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    remaining = remaining or os.path.exists(entry.path)
        return remaining

    # --- shutdown ---------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker."""
        logger.info("Shutting down the log manager (%d logs)", len(self._logs))
        failed = False
        for log in self._logs.values():
            try:
                log.close()
            except OSError:
                failed = True
                logger.exception("Error closing log %s", log.name)
        if self._started:
            self.checkpoint_recovery_points_and_log_start_offsets()
            self.checkpoint_high_watermarks()
            if not failed:
                for log_dir in self.log_dirs:
                    self._write_clean_shutdown_marker(log_dir)
        self._logs.clear()
        self._dir_of.clear()
        for fd in self._lock_fds.values():
            os.close(fd)
        self._lock_fds.clear()
        self._started = False
        logger.info("Log manager shut down cleanly" if not failed else "Log manager shut down")

    def _write_clean_shutdown_marker(self, log_dir: Path) -> None:
        # Kafka writes a small JSON document (version and broker epoch) and only
        # checks that the file exists.
        path = log_dir / CLEAN_SHUTDOWN_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            os.write(fd, b'{"version":"0","broker_epoch":"-1"}')
            os.fsync(fd)
        finally:
            os.close(fd)
        files.fsync_dir(log_dir)
