"""Fsyncs that may wait: those of the files a new partition starts with.

A partition made by CreateTopics (or assigned to this broker) starts with an empty log, its
`partition.metadata` and its leader epoch checkpoint. Four fsyncs each (file and
directory, twice) made creating thousands of partitions cost a disk flush per file, on the
event loop. None of them guards acknowledged data: should the machine lose them (a power
cut before the disk has them), the partition's assignment and topic id live in the
metadata store and are written again when the broker starts (an empty or missing
`partition.metadata` reads as none). So, as Kafka flushes a new partition's metadata file
from its scheduler, these writes are made at once and their fsyncs run later, together,
off the event loop (`sync_deferred`), and at a clean shutdown at the latest.

A clean shutdown defers the checkpoints its logs write as they close (thousands of them
when thousands of logs were loaded or handed over) and syncs them all before it marks the
dir cleanly shut down.

The same holds for the leader epoch checkpoints a broker rewrites when it loads thousands
of logs (truncated to each log's end) and leads them again at start: Kafka too writes those
truncations without a sync (KAFKA-15046), since the next load truncates again, and the
entries a leader assigns are written again by the next leadership.

Thousands of deferred fsyncs are made as one syncfs(2) of each filesystem they are on: a
worker thread per fsync, each taking the GIL back as its fsync returns, slowed the event
loop making the partitions (three brokers making 9,000 partitions each took 43-47 s with
16 threads of fsyncs, 33 s with syncfs, and a quarter less CPU). syncfs also writes out
whatever else is dirty on that filesystem (segment data not flushed yet, which Kafka's
defaults leave to the page cache), from the worker thread, never the loop; fewer than
SYNCFS_FROM are fsynced one by one.

Writes are deferred only inside `deferring_fsyncs()`; everything else is fsynced as it is
written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from .log_file_utils import fsync_dir, fsync_path, syncfs, syncfs_supported

# A change that makes (or loads) at least this many partitions defers their fsyncs; a
# few are fsynced as they are made, as any file.
BULK_PARTITIONS = 64

_DEFERRING: ContextVar[bool] = ContextVar("brook_deferring_fsyncs", default=False)
# From this many fsyncs, they run on SYNC_THREADS threads at once.
PARALLEL_FROM = 32
SYNC_THREADS = 16
# From this many, one syncfs of each filesystem instead (where the platform has it).
SYNCFS_FROM = 1000
_lock = threading.Lock()
# Kept as strings: a new Path hashes its parts each time, which cost a tenth of making a
# partition (three paths deferred each).
_files: set[str] = set()
_dirs: set[str] = set()


@contextmanager
def deferring_fsyncs() -> Iterator[None]:
    """Within: atomic writes and new directories leave their fsyncs to sync_deferred."""
    token = _DEFERRING.set(True)
    try:
        yield
    finally:
        _DEFERRING.reset(token)


def deferring() -> bool:
    return _DEFERRING.get()


def defer(file: Path | None = None, directory: Path | None = None) -> None:
    """Remember a file (and a directory whose entries changed) to fsync later."""
    with _lock:
        if file is not None:
            _files.add(os.fspath(file))
        if directory is not None:
            _dirs.add(os.fspath(directory))


def pending() -> int:
    with _lock:
        return len(_files) + len(_dirs)


def sync_deferred() -> int:
    """Fsync what waits: the files, then their directories (or, for SYNCFS_FROM or more,
    their filesystems whole). Safe from any thread; a file or directory gone meanwhile (a
    topic deleted) is skipped. Returns how many."""
    with _lock:
        files, dirs = set(_files), set(_dirs)
        _files.clear()
        _dirs.clear()
    directories = dirs | {os.path.dirname(path) for path in files}
    if len(files) + len(directories) >= SYNCFS_FROM and syncfs_supported():
        for directory in _one_directory_per_filesystem(directories):
            syncfs(Path(directory))
    elif len(files) + len(directories) < PARALLEL_FROM:
        for path in sorted(files):
            fsync_path(Path(path))
        for directory in sorted(directories):
            fsync_dir(Path(directory))
    else:
        # Thousands of small fsyncs: side by side, the filesystem's journal commits many
        # in one flush (16 threads made 1,000 of them 4.4x faster here than one after
        # another). The files first, then the directories that name them.
        with ThreadPoolExecutor(SYNC_THREADS, thread_name_prefix="deferred-fsync") as pool:
            list(pool.map(fsync_path, map(Path, sorted(files))))
            list(pool.map(fsync_dir, map(Path, sorted(directories))))
    return len(files) + len(dirs)


def _one_directory_per_filesystem(directories: set[str]) -> list[str]:
    """A directory of each filesystem that `directories` are on (a gone one is skipped: a
    deleted topic's)."""
    by_device: dict[int, str] = {}
    for directory in sorted(directories):
        try:
            by_device.setdefault(os.stat(directory).st_dev, directory)
        except FileNotFoundError:
            continue
    return list(by_device.values())
