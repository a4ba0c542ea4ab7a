"""Descriptors of segment files, closed again when they go unused.

Kafka keeps a descriptor open per segment `.log` and maps its indexes; a broker of many
partitions needs a raised open-file limit. Brook opens a segment's files only when it
reads or writes them (a new partition holds none), and a broker's loop calls
`close_idle` from time to time: each file opened on that thread and not used since the
previous call has its descriptor closed (it reopens on next use). A partition that
nobody writes or reads thus holds no descriptor, however many there are.

Only the thread that opened a descriptor closes it when idle: a segment file opened on
another thread (a cleaner thread writing a cleaned segment) is never closed under it.
Each thread that calls `sweep_this_thread` keeps its own registry; on other threads,
opening registers nothing.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Protocol

from .log_file_utils import fsync_existing


class IdleClosable(Protocol):
    """A file whose descriptor can be let go and reopened on next use."""

    # Set on every use; cleared by close_idle, which closes it when found clear.
    used: bool

    def release_descriptor(self) -> None: ...


class ReleasableFile:
    """What a segment file (FileRecords, an index) keeps of its descriptor: open on use,
    let go when idle, and whether bytes written through it still wait for an fsync, so
    that a flush after the descriptor went still syncs them (by path: Linux syncs the
    inode's pages, whoever wrote them)."""

    path: Path

    def __init__(self) -> None:
        self._fd: int | None = None
        self.used = False
        self._unflushed = False

    def release_descriptor(self) -> None:
        """Close the descriptor (unsynced bytes stay in the page cache for flush)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        closed(self)

    def _sync(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
        elif self._unflushed:  # written, then let go while idle
            fsync_existing(self.path)
        self._unflushed = False


class _Registry(threading.local):
    def __init__(self) -> None:
        self.enabled = False
        self.open: set[IdleClosable] = set()


_registry = _Registry()


def sweep_this_thread() -> None:
    """Files this thread opens from now on are closed by its calls to close_idle."""
    _registry.enabled = True


def opened(handle: IdleClosable) -> None:
    """`handle` opened its descriptor (on the calling thread)."""
    if _registry.enabled:
        _registry.open.add(handle)


def closed(handle: IdleClosable) -> None:
    """`handle` closed its descriptor (it may not have been registered)."""
    _registry.open.discard(handle)


def open_count() -> int:
    """Descriptors this thread's registry holds open."""
    return len(_registry.open)


def close_idle() -> int:
    """Close the descriptors of this thread's files unused since the previous call;
    returns how many were closed."""
    released = 0
    for handle in list(_registry.open):
        if handle.used:
            handle.used = False
            continue
        handle.release_descriptor()
        _registry.open.discard(handle)
        released += 1
    return released
