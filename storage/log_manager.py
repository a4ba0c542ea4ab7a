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
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from brook.protocol.errors import InconsistentTopicIdError, KafkaStorageError

from . import log_file_utils as files
from .checkpoints import (
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_OFFSET_CHECKPOINT_FILE,
    MetaProperties,
    OffsetCheckpointFile,
    read_meta_properties,
    topic_id_to_string,
    write_meta_properties,
    write_partition_metadata,
)
from .clock import Clock, system_clock
from .deferred_fsync import BULK_PARTITIONS, deferring_fsyncs, sync_deferred
from .errors import (
    CorruptCheckpointError,
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    LogDirError,
    LogDirLockedError,
    StorageError,
)
from .load_progress import LoadProgress
from .log_dir_failure_channel import LogDirFailureChannel, is_disk_error
from .producer_state_config import ProducerStateManagerConfig

if TYPE_CHECKING:
    from .log import Log
    from .log_config import LogConfig

logger = logging.getLogger("brook.storage.log_manager")


def _log_class() -> type[Log]:
    """Log, imported with the first log to open: a broker on an empty data dir starts
    (and accepts connections) without loading the segment, index and producer-state code."""
    from .log import Log

    return Log


CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"

TopicPartition = tuple[str, int]


def generate_cluster_id() -> str:
    """A random id in Kafka's Uuid.toString() form (22 url-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


# The partition directory of Kafka's KRaft metadata log (__cluster_metadata, partition 0).
KRAFT_METADATA_DIR = "__cluster_metadata-0"


def prepare_log_dirs(log_dirs: Iterable[Path]) -> None:
    """Make each configured log dir where it is missing; a path that is not a directory,
    or one that cannot be made, stops start-up with an error naming that configured
    directory (not a file the broker would have opened in it next)."""
    for log_dir in log_dirs:
        if log_dir.exists() and not log_dir.is_dir():
            raise LogDirError(f"Log dir {log_dir} (log.dirs) is not a directory")
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LogDirError(
                f"Cannot create log dir {log_dir} (log.dirs): {exc.strerror or exc}"
            ) from None
        if not os.access(log_dir, os.R_OK | os.W_OK | os.X_OK):
            raise LogDirError(
                f"Log dir {log_dir} (log.dirs) is not readable and writable by this user"
            )


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
        failure_channel: LogDirFailureChannel | None = None,
        clock: Clock = system_clock,
        producer_state_config: ProducerStateManagerConfig | None = None,
    ) -> None:
        """`default_config_factory(topic)` gives the config of a topic's logs at startup.

        `cluster_id` None adopts the id stored in meta.properties (or generates one
        when there is none); otherwise a stored id must match it. I/O errors on a log
        dir are reported to `failure_channel` (whose listeners learn of offline dirs).
        `progress` takes the lines that loading the logs writes (each partition's one
        line, and a long recovery's progress) instead of the storage log's logger.
        """
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log dir is needed")
        self.broker_id = broker_id
        self._cluster_id = cluster_id
        self._config_factory = default_config_factory
        self._progress = progress
        self._clock = clock
        # One for every log, so that a change of producer.id.expiration.ms reaches all.
        self.producer_state_config = producer_state_config or ProducerStateManagerConfig()
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        # How many logs each log dir holds: a new log goes to the emptiest, and counting
        # them at each creation would make creating n partitions cost n squared.
        self._logs_in_dir: Counter[Path] = Counter()
        # Copies of partitions being moved to another log dir (AlterReplicaLogDirs).
        self._future_logs: dict[TopicPartition, Log] = {}
        self._lock_fds: dict[Path, int] = {}
        self._started = False
        self.failure_channel = failure_channel or LogDirFailureChannel()
        self.failure_channel.add_listener(self._on_log_dir_failure)
        # Set when a partition directory may have been left renamed `-delete` but not
        # removed (removing needs descriptors, which may have run out): the periodic
        # purge then tries again, as Kafka's scheduled deletion of logs does.
        self._deleted_dirs_pending = False
        # What each dir's replication-offset-checkpoint last had written: the write every
        # replica.high.watermark.checkpoint.interval.ms is skipped while nothing moved
        # (sorting and formatting thousands of lines every 5 s, for the same file).
        self._high_watermarks_written: dict[Path, dict[TopicPartition, int]] = {}

    @property
    def cluster_id(self) -> str | None:
        return self._cluster_id

    # --- offline log dirs ---------------------------------------------------------------

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    def is_offline(self, log_dir: Path) -> bool:
        return self.failure_channel.is_offline(log_dir)

    def dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def _on_log_dir_failure(self, log_dir: Path) -> None:
        # Every log of the dir stops at once: none of them may take another write that
        # would land after bytes of unknown state. They stay listed, answering
        # KAFKA_STORAGE_ERROR, until the broker restarts.
        offline = [log for tp, log in self._logs.items() if self._dir_of[tp] == log_dir]
        for log in offline:
            log.mark_offline()
        for topic_partition, future in list(self._future_logs.items()):
            if future.dir.parent == log_dir or self._dir_of[topic_partition] == log_dir:
                # A move into or out of the failed dir cannot complete.
                future.mark_offline()
                del self._future_logs[topic_partition]
        logger.error(
            "Log dir %s is offline: %d partition(s) in it answer KAFKA_STORAGE_ERROR (%d of"
            " %d log dirs online)",
            log_dir,
            len(offline),
            len(self.online_dirs),
            len(self.log_dirs),
        )

    def _report_io_error(self, log_dir: Path, message: str, exc: OSError) -> None:
        if is_disk_error(exc):
            self.failure_channel.maybe_add_offline_log_dir(log_dir, message, exc)
        else:
            logger.error("%s: %s", message, exc)

    # --- startup ----------------------------------------------------------------------

    def startup(self) -> None:
        """Lock and check every log dir, then load every partition log in it."""
        started = time.monotonic()
        prepare_log_dirs(self.log_dirs)
        for log_dir in self.log_dirs:
            self._lock(log_dir)
        self._check_meta_properties()
        future_dirs: list[Path] = []
        for log_dir in self.log_dirs:
            future_dirs += self._load_logs(log_dir)
        self._settle_future_dirs(future_dirs)
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

    def _load_logs(self, log_dir: Path) -> list[Path]:
        """Open every partition log of `log_dir`; returns the `-future` dirs found."""
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean_shutdown = marker.exists()
        if clean_shutdown:
            marker.unlink()
            files.fsync_dir(log_dir)
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
        log_start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE)
        high_watermarks = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE)

        to_load: list[tuple[TopicPartition, Path]] = []
        future_dirs: list[Path] = []
        for entry in sorted(os.scandir(log_dir), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            path = Path(entry.path)
            if entry.name.endswith(files.DELETE_DIR_SUFFIX):
                logger.info("Removing %s, a partition whose deletion was interrupted", path)
                files.remove_tree(path)
                continue
            if entry.name.endswith(files.FUTURE_DIR_SUFFIX):
                future_dirs.append(path)
                continue
            if entry.name.endswith(files.STRAY_DIR_SUFFIX):
                logger.warning("Skipping %s: stray logs are not supported", path)
                continue
            if entry.name == KRAFT_METADATA_DIR:
                # A KRaft broker's metadata log (a log dir Apache Kafka 3.x/4.x wrote): Kafka
                # keeps it apart from the topics' logs, and Brook has no KRaft quorum.
                logger.info("Leaving %s alone: Kafka's KRaft metadata log, not a topic", path)
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
            progress = LoadProgress(f"{number}/{total} in {log_dir}", self._progress)
            # Loading rewrites each log's leader epoch checkpoint when it truncates the
            # cache to the log's end (an empty log's one entry goes, to come back when the
            # partition is led): many logs leave those fsyncs to sync_deferred, which the
            # broker runs off its loop once started (a truncation lost to a power cut is
            # made again at the next load).
            with deferring_fsyncs() if total >= BULK_PARTITIONS else nullcontext():
                log = _log_class().open(
                    path,
                    self._config_factory(topic),
                    recovery_point=recovery_points.get(topic_partition, 0),
                    log_start_offset=log_start_offsets.get(topic_partition, 0),
                    clean_shutdown=clean_shutdown,
                    progress=progress,
                    failure_channel=self.failure_channel,
                    clock=self._clock,
                    producer_state_config=self.producer_state_config,
                )
            high_watermark = high_watermarks.get(topic_partition)
            if high_watermark is not None:
                log.high_watermark = high_watermark
            self._logs[topic_partition] = log
            self._place(topic_partition, log_dir)
        return future_dirs

    def _settle_future_dirs(self, future_dirs: list[Path]) -> None:
        """Finish or undo moves between log dirs that a stop interrupted.

        A move renames the current directory away only once the copy is complete and
        synced, so a `-future` dir without a current log is the whole partition: it
        takes the partition's name. One beside a current log is an unfinished copy and
        is removed; the move can be asked for again.
        """
        for path in future_dirs:
            topic_partition = files.parse_topic_partition(path.name)
            topic, partition = topic_partition
            if topic_partition in self._logs:
                logger.warning(
                    "Removing %s: the move of %s-%d to %s did not finish before the broker stopped",
                    path,
                    topic,
                    partition,
                    path.parent,
                )
                files.remove_tree(path)
                continue
            target = path.with_name(f"{topic}-{partition}")
            logger.info("Completing the move of %s-%d to %s", topic, partition, path.parent)
            os.rename(path, target)
            files.fsync_dir(path.parent)
            self._logs[topic_partition] = _log_class().open(
                target,
                self._config_factory(topic),
                clean_shutdown=False,
                failure_channel=self.failure_channel,
                clock=self._clock,
                producer_state_config=self.producer_state_config,
            )
            self._place(topic_partition, path.parent)

    # --- access -----------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[Log]:
        return list(self._logs.values())

    @property
    def logs(self) -> dict[TopicPartition, Log]:
        return dict(self._logs)

    def _place(self, topic_partition: TopicPartition, log_dir: Path | None) -> None:
        """The partition's log is in `log_dir` now (None: it is gone)."""
        previous = self._dir_of.pop(topic_partition, None)
        if previous is not None:
            self._logs_in_dir[previous] -= 1
        if log_dir is not None:
            self._dir_of[topic_partition] = log_dir
            self._logs_in_dir[log_dir] += 1

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
                        f"log {log.name} has topic id {topic_id_to_string(log.topic_id)},"
                        f" not {topic_id_to_string(topic_id)}"
                    )
            if config is not None:
                log.update_config(config)
            return log
        if not topic or "/" in topic or os.sep in topic or topic in (".", "..") or partition < 0:
            raise ValueError(f"invalid topic partition {topic!r}-{partition}")
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(
                f"Cannot create log {topic}-{partition}: no log dir is online"
                f" (offline: {', '.join(str(d) for d in self.log_dirs)})"
            )
        log_dir = min(online, key=lambda d: self._logs_in_dir[d])
        try:
            log = _log_class().open(
                log_dir / f"{topic}-{partition}",
                config or self._config_factory(topic),
                topic_id=topic_id,
                clean_shutdown=True,
                failure_channel=self.failure_channel,
                clock=self._clock,
                producer_state_config=self.producer_state_config,
            )
        except OSError as exc:
            self._deleted_dirs_pending = True  # Log.open set aside what it had made
            message = f"Error while creating log for {topic}-{partition} in dir {log_dir}"
            self._report_io_error(log_dir, message, exc)
            raise KafkaStorageError(f"{message}: {exc.strerror or exc}") from exc
        # DEBUG: the broker logs one line per topic created, not one per partition.
        logger.debug("Created log %s in %s", log.name, log_dir)
        self._logs[topic_partition] = log
        self._place(topic_partition, log_dir)
        return log

    # --- moving a partition to another log dir -------------------------------------------

    def log_dir_by_path(self, path: str) -> Path | None:
        """The configured log dir with this absolute path (None when there is none)."""
        return next((d for d in self.log_dirs if str(d) == path), None)

    def future_log(self, topic: str, partition: int) -> Log | None:
        return self._future_logs.get((topic, partition))

    @property
    def future_logs(self) -> dict[TopicPartition, Log]:
        return dict(self._future_logs)

    def create_future_log(self, topic: str, partition: int, log_dir: Path) -> Log:
        """An empty copy of a partition's log in `log_dir`, to be filled and swapped in.

        Any earlier copy (to another dir) is dropped first.
        """
        current = self._logs[(topic, partition)]
        self.abandon_future_log(topic, partition)
        path = log_dir / files.future_dir_name(topic, partition)
        try:
            future = _log_class().open(
                path,
                current.config,
                topic_id=current.topic_id,
                clean_shutdown=True,
                failure_channel=self.failure_channel,
                clock=self._clock,
                producer_state_config=self.producer_state_config,
            )
        except OSError as exc:
            message = f"Error while creating a future log for {topic}-{partition} in {log_dir}"
            self._deleted_dirs_pending = True  # Log.open set aside what it had made
            self._report_io_error(log_dir, message, exc)
            raise KafkaStorageError(f"{message}: {exc.strerror or exc}") from exc
        self._future_logs[(topic, partition)] = future
        logger.info("Created future log %s for %s-%d in %s", path.name, topic, partition, log_dir)
        return future

    def abandon_future_log(self, topic: str, partition: int) -> None:
        future = self._future_logs.pop((topic, partition), None)
        if future is not None:
            logger.info("Abandoning the move of %s-%d to %s", topic, partition, future.dir.parent)
            future.delete()

    def replace_current_with_future_log(
        self, topic: str, partition: int, *, log_start_offset: int
    ) -> Log:
        """Swap a caught-up future log in for the current one; returns the new log.

        The future is synced and closed first, then the current directory is renamed
        away, then the future takes the partition's name: a crash at any point leaves
        a state that startup completes (see _settle_future_dirs).
        """
        topic_partition = (topic, partition)
        future = self._future_logs.pop(topic_partition)
        current = self._logs[topic_partition]
        target_dir = future.dir.parent
        high_watermark = current.high_watermark
        try:
            future.close()
            current.close()
            doomed = current.dir.with_name(files.delete_dir_name(topic, partition))
            os.rename(current.dir, doomed)
            files.fsync_dir(current.dir.parent)
            final = target_dir / f"{topic}-{partition}"
            os.rename(future.dir, final)
            files.fsync_dir(target_dir)
        except OSError as exc:
            message = f"Error while moving {topic}-{partition} to {target_dir}"
            self._report_io_error(target_dir, message, exc)
            raise KafkaStorageError(f"{message}: {exc.strerror or exc}") from exc
        replaced = _log_class().open(
            final,
            current.config,
            topic_id=current.topic_id,
            log_start_offset=log_start_offset,
            clean_shutdown=True,
            failure_channel=self.failure_channel,
            clock=self._clock,
            producer_state_config=self.producer_state_config,
        )
        replaced.high_watermark = high_watermark
        self._logs[topic_partition] = replaced
        self._place(topic_partition, target_dir)
        files.remove_tree(doomed)
        logger.info("Moved %s-%d to %s", topic, partition, target_dir)
        return replaced

    def delete_log(self, topic: str, partition: int) -> bool:
        """Remove a partition's log and its files; False when there was none."""
        topic_partition = (topic, partition)
        self.abandon_future_log(topic, partition)
        log = self._logs.pop(topic_partition, None)
        self._place(topic_partition, None)
        if log is None:
            return False
        log.delete()
        self._deleted_dirs_pending = True
        return True

    # --- periodic work ----------------------------------------------------------------

    def _logs_by_online_dir(self) -> dict[Path, list[tuple[TopicPartition, Log]]]:
        online = self.online_dirs
        if len(self.log_dirs) == 1 and online:
            return {online[0]: list(self._logs.items())}  # one dir holds every log
        by_dir: dict[Path, list[tuple[TopicPartition, Log]]] = {d: [] for d in online}
        for topic_partition, log in self._logs.items():
            logs = by_dir.get(self._dir_of[topic_partition])
            if logs is not None:
                logs.append((topic_partition, log))
        return by_dir

    def checkpoint_recovery_points_and_log_start_offsets(self) -> None:
        for log_dir, logs in self._logs_by_online_dir().items():
            try:
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
            except OSError as exc:
                self._report_io_error(
                    log_dir, f"Error while writing the offset checkpoints of {log_dir}", exc
                )
                continue
            # With the recovery points on disk, older snapshots are no longer needed.
            for _, log in logs:
                if not log.is_offline:
                    try:
                        log.delete_snapshots_after_recovery_point_checkpoint()
                    except KafkaStorageError as exc:
                        logger.error("Error pruning the snapshots of %s: %s", log.name, exc)

    def checkpoint_high_watermarks(self) -> None:
        for log_dir, logs in self._logs_by_online_dir().items():
            high_watermarks = {tp: log.high_watermark for tp, log in logs}
            if self._high_watermarks_written.get(log_dir) == high_watermarks:
                continue
            self._high_watermarks_written.pop(log_dir, None)
            try:
                OffsetCheckpointFile(log_dir / REPLICATION_OFFSET_CHECKPOINT_FILE).write(
                    high_watermarks
                )
                self._high_watermarks_written[log_dir] = high_watermarks
            except OSError as exc:
                self._report_io_error(
                    log_dir, f"Error while writing the high watermark checkpoint of {log_dir}", exc
                )

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """fsync logs that rolled since their last flush or whose flush.ms has passed.

        Returns how many logs were flushed. Call it every few seconds (Kafka's
        log.flush.scheduler.interval.ms); with Kafka's defaults it only flushes the
        segments left behind by a roll, which keeps recovery after a crash short.
        """
        now_ms = self._clock() if now_ms is None else now_ms
        return self._for_each_online_log("flushing", lambda log: int(log.flush_if_due(now_ms)))

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Apply retention to every log; returns the number of segments deleted."""
        now_ms = self._clock() if now_ms is None else now_ms
        return self._for_each_online_log(
            "applying retention to", lambda log: log.delete_old_segments(now_ms)
        )

    def remove_expired_producers(
        self, now_ms: int | None = None, producer_id_expiration_ms: int | None = None
    ) -> int:
        """Drop producers idle for producer.id.expiration.ms from every log (Kafka runs
        this every producer.id.expiration.check.interval.ms). `producer_id_expiration_ms`
        is the value in force, which a dynamic config change may have moved. Returns how
        many producers went."""
        if producer_id_expiration_ms is not None:
            self.producer_state_config.producer_id_expiration_ms = producer_id_expiration_ms
        now_ms = self._clock() if now_ms is None else now_ms
        return self._for_each_online_log(
            "expiring producers of", lambda log: log.remove_expired_producers(now_ms)
        )

    def purge_deleted_segments(self, now_ms: int | None = None) -> int:
        """Remove `.deleted` segment files whose file.delete.delay.ms has passed, and
        partition directories whose removal could not finish."""
        now_ms = self._clock() if now_ms is None else now_ms
        if self._deleted_dirs_pending:
            self._deleted_dirs_pending = self._remove_deleted_dirs()
        return self._for_each_online_log(
            "removing deleted segments of", lambda log: log.purge_deleted_segments(now_ms)
        )

    def _for_each_online_log(self, action: str, work: Callable[[Log], int]) -> int:
        """Periodic work on every log not in an offline dir; returns the sum of its counts.

        A log that fails is logged and skipped (a disk error has taken its dir offline by
        then), so one bad log does not stop the round for the others.
        """
        total = 0
        for log in list(self._logs.values()):
            if log.is_offline:
                continue
            try:
                total += work(log)
            except KafkaStorageError as exc:
                logger.error("Error %s log %s: %s", action, log.name, exc.message)
        return total

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
                    files.remove_tree(entry.path)
                    remaining = remaining or os.path.exists(entry.path)
        return remaining

    # --- shutdown ---------------------------------------------------------------------

    def shutdown(self) -> None:
        """Flush and close every log, write the checkpoints and the clean-shutdown marker."""
        logger.info("Shutting down the log manager (%d logs)", len(self._logs))
        try:
            sync_deferred()  # new partitions' files, before the clean-shutdown marker
        except OSError as exc:
            logger.error("Could not fsync the files of new partitions: %s", exc)
        for future in self._future_logs.values():
            # Left on disk: the next start sees the copy is unfinished and removes it.
            future.close_handlers()
        self._future_logs.clear()
        failed_dirs: set[Path] = set()
        # The checkpoints the logs write as they close are synced together below, before
        # any dir is marked cleanly shut down.
        with deferring_fsyncs():
            for topic_partition, log in self._logs.items():
                try:
                    log.close()
                except (OSError, KafkaStorageError) as exc:
                    failed_dirs.add(self._dir_of[topic_partition])
                    logger.error("Error closing log %s: %s", log.name, exc)
        try:
            sync_deferred()
        except OSError as exc:
            logger.error("Could not fsync the checkpoints of closed logs: %s", exc)
            failed_dirs.update(self.online_dirs)
        if self._started:
            self.checkpoint_recovery_points_and_log_start_offsets()
            self.checkpoint_high_watermarks()
            # An offline dir (or one whose logs did not close) gets no marker: the next
            # start recovers it from its recovery point.
            for log_dir in self.online_dirs:
                if log_dir in failed_dirs:
                    continue
                try:
                    self._write_clean_shutdown_marker(log_dir)
                except OSError as exc:
                    logger.error("Could not mark %s as cleanly shut down: %s", log_dir, exc)
                    failed_dirs.add(log_dir)
        failed = bool(failed_dirs) or bool(self.failure_channel.offline_dirs)
        self._logs.clear()
        self._dir_of.clear()
        self._logs_in_dir.clear()
        for fd in self._lock_fds.values():
            os.close(fd)
        self._lock_fds.clear()
        self._started = False
        logger.info("Log manager shut down cleanly" if not failed else "Log manager shut down")

    def _write_clean_shutdown_marker(self, log_dir: Path) -> None:
        write_clean_shutdown_marker(log_dir)


def write_clean_shutdown_marker(log_dir: Path) -> None:
    """Mark `log_dir` cleanly shut down: its next start trusts the recovery points.
    Kafka writes a small JSON document (version and broker epoch) and only checks that
    the file exists."""
    path = log_dir / CLEAN_SHUTDOWN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, b'{"version":"0","broker_epoch":"-1"}')
        os.fsync(fd)
    finally:
        os.close(fd)
    files.fsync_dir(log_dir)
