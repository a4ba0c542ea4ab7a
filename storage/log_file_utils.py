"""File names inside a partition directory, as Kafka spells them.

Every segment file is named by its base offset, zero-padded to 20 digits, so that a
plain directory listing sorts segments in offset order.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable
from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
PRODUCER_SNAPSHOT_FILE_SUFFIX = ".snapshot"

# Suffixes added to whole segments during deletion, cleaning and swapping.
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"

INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
SEGMENT_SUFFIXES = (LOG_FILE_SUFFIX, *INDEX_SUFFIXES)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"

# A deleted partition's directory is renamed `<topic>-<n>.<uuid hex>-delete` first.
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"


def filename_prefix_from_offset(offset: int) -> str:
    return f"{offset:020d}"


def log_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def txn_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"


def producer_snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{PRODUCER_SNAPSHOT_FILE_SUFFIX}"


def offset_from_file_name(name: str) -> int | None:
    """The base offset a segment file name starts with, or None for other files."""
    prefix = name.split(".", 1)[0]
    if len(prefix) != 20 or not prefix.isdigit():
        return None
    return int(prefix)


def parse_topic_partition(dir_name: str) -> tuple[str, int]:
    """Split a partition directory name `<topic>-<n>` (topics may contain dashes).

    Also reads the names Kafka gives a partition's directory while it is being deleted,
    moved to another log dir or left stray: `<topic>-<n>.<unique id>-delete` (`-future`,
    `-stray`).
    """
    if dir_name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
        dir_name = dir_name.rpartition(".")[0]
    topic, sep, partition = dir_name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{dir_name!r} is not a partition directory name (<topic>-<partition>)")
    return topic, int(partition)


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in `directory` durable (the entry lives in the dir)."""
    fsync_path(directory, os.O_RDONLY | os.O_DIRECTORY)


def fsync_path(path: Path, flags: int = os.O_RDONLY) -> None:
    """Fsync a file (or, with O_DIRECTORY, a directory) by its path; gone, nothing."""
    try:
        fsync_existing(path, flags)
    except FileNotFoundError:
        return


def fsync_existing(path: Path, flags: int = os.O_RDONLY) -> None:
    """Fsync a file by its path through a descriptor of its own (Linux syncs the inode's
    pages, whoever wrote them); raises OSError when it cannot."""
    fd = os.open(path, flags | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Delete a directory and everything in it, ignoring what is already gone."""
    import shutil  # with its compression modules, worth importing only when deleting

    shutil.rmtree(path, ignore_errors=True)


def future_dir_name(topic: str, partition: int) -> str:
    """Where a partition being moved to another log dir is copied: Kafka's name for it."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"


def delete_dir_name(topic: str, partition: int) -> str:
    """What a partition directory is renamed to before it is removed."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


@functools.cache
def _syncfs_function() -> Callable[[int], int] | None:
    # Looked up at the first bulk sync, not at import: ctypes costs the broker's start
    # some 4 ms, and most brokers never sync 1,000 files at once.
    import ctypes

    try:
        function: Callable[[int], int] = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):  # not Linux (or a libc without it)
        return None
    return function


def syncfs_supported() -> bool:
    return _syncfs_function() is not None


def syncfs(directory: Path) -> None:
    """Write every dirty page and inode of the filesystem holding `directory` to disk and
    wait for it (Linux's syncfs(2)): one call in place of thousands of fsyncs. Raises
    OSError as fsync would, or when the platform has no syncfs (syncfs_supported)."""
    function = _syncfs_function()
    if function is None:
        raise OSError("syncfs is not available on this platform")
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if function(fd) != 0:
            import ctypes

            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(directory))
    finally:
        os.close(fd)
