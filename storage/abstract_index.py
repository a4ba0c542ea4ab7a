"""What the offset index and the time index share: a file of fixed-size entries.

Kafka preallocates an index file to `segment.index.bytes` when it is created, writes
entries into that space, and trims the file to the used size when the segment stops
being active or is closed. Brook does the same (the preallocation is a sparse
ftruncate), so a directory written by either broker looks the same.

Kafka memory-maps the file; Brook keeps the entries in arrays instead (binary search
over an array is what a lookup needs) and writes each new entry with pwrite. An index
is loaded lazily, on first use, so opening a log with thousands of segments reads
nothing but the directory listing. Its descriptor is closed once the entries are read,
opened again for a write and closed when idle (storage/idle_files.py).

A file from an unclean shutdown may still be preallocated: its tail is zeros. Zero
entries are never written (the first entry of a segment always points past position
0), so trailing all-zero entries are taken as free space rather than as corruption.

An index opened with `writable=False` (Kafka's flag, used by DumpLogSegments) reads the
file O_RDONLY and closes it again: it never creates, preallocates, trims or locks the
file, and loading does not judge the entries (a tool lists them as they are); its
sanity_check() reports what a writable index would refuse to load.
"""

from __future__ import annotations

import bisect
import contextlib
import io
import itertools
import operator
import os
from array import array
from pathlib import Path
from typing import ClassVar

from . import idle_files
from .errors import CorruptIndexError, IndexOffsetOverflowError

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
INT32_MAX = 2**31 - 1


def strictly_increasing(values: array[int]) -> bool:
    """True when every value is larger than the one before it (C-speed iteration)."""
    return all(map(operator.lt, values, itertools.islice(values, 1, None)))


def non_decreasing(values: array[int]) -> bool:
    return all(map(operator.le, values, itertools.islice(values, 1, None)))


class AbstractIndex(idle_files.ReleasableFile):
    """A lazily loaded, preallocated file of `ENTRY_SIZE`-byte entries."""

    ENTRY_SIZE: ClassVar[int]
    # Each entry's offset relative to the base offset, in file order (ascending): every
    # index kind has one, beside its other columns.
    _offsets: array[int]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        super().__init__()
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.writable = writable
        self._loaded = False
        # How many entries the file has room for at its current length (Kafka's
        # mmap limit / entry size). A trimmed file is full until it is resized.
        self._max_entries = 0
        self._parse(b"")  # no entries until the file is loaded

    # --- subclass hooks ---------------------------------------------------------------

    def _parse(self, data: bytes) -> None:
        """Fill the in-memory entries from the used part of the file."""
        raise NotImplementedError

    def _check(self) -> None:
        """Raise CorruptIndexError when the loaded entries are out of order."""
        raise NotImplementedError

    def _truncate_entries(self, count: int) -> None:
        raise NotImplementedError

    def _entry_count(self) -> int:
        return len(self._offsets)

    # --- loading ----------------------------------------------------------------------

    def _round(self, size: int) -> int:
        return size - size % self.ENTRY_SIZE

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self._load()

    def _load(self, new: bool = False) -> None:
        """Read the index from its file, made (empty, preallocated) when missing. `new`:
        the file is known not to exist (a new partition's directory is empty), so no
        open is tried first, which on a slow filesystem is a lookup that costs as much."""
        if not self.writable:
            self._load_read_only()
            return
        created = new
        if new:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        else:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                created = True
        try:
            if created:
                length = self._round(self.max_index_size)
                os.ftruncate(fd, length)
                self._parse(b"")
            else:
                length = self._read_used_part(fd)
                self._check()
        except BaseException:
            os.close(fd)
            self._truncate_entries(0)
            raise
        # The entries are in memory now; the descriptor opens again for a write (so
        # a new or idle segment holds none: storage/idle_files.py).
        os.close(fd)
        self._unflushed = created
        self._max_entries = length // self.ENTRY_SIZE
        self._loaded = True

    def create(self) -> None:
        """Make the file, which must not exist yet, preallocated to max_index_size."""
        self._check_writable("create")
        self._load(new=True)

    def _descriptor(self) -> int:
        """The open descriptor of a writable index, opened when needed."""
        self.used = True
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
            idle_files.opened(self)
        return self._fd

    def _truncate_file(self, length: int) -> None:
        """Set the file's length for a one-off change (a resize, a truncation) through the
        open descriptor, or by path: loading or closing thousands of logs, each of whose
        active indexes is preallocated or trimmed, opens no descriptor for it."""
        if self._fd is not None:
            os.ftruncate(self._fd, length)
        else:
            os.truncate(self.path, length)

    def _load_read_only(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            length = self._read_used_part(fd)
        finally:
            os.close(fd)
        self._max_entries = length // self.ENTRY_SIZE
        self._loaded = True

    def _read_used_part(self, fd: int) -> int:
        """Parse the entries before the zero tail; returns the file's length."""
        length = os.fstat(fd).st_size
        if length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"index file {self.path} has size {length}, which is not a multiple"
                f" of the entry size {self.ENTRY_SIZE}"
            )
        data = os.pread(fd, length, 0) if length else b""
        used = len(data.rstrip(b"\x00"))
        used += -used % self.ENTRY_SIZE
        self._parse(data[:used])
        return length

    def sanity_check(self) -> None:
        """Load the index if needed; raises CorruptIndexError when it is damaged."""
        self._ensure_loaded()
        if not self.writable:  # a writable index is checked as it loads
            self._check()

    def _check_writable(self, action: str) -> None:
        if not self.writable:
            raise io.UnsupportedOperation(f"cannot {action} {self.path}: it is open read-only")

    # --- state ------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        self._ensure_loaded()
        return self._entry_count()

    @property
    def max_entries(self) -> int:
        self._ensure_loaded()
        return self._max_entries

    @property
    def is_full(self) -> bool:
        self._ensure_loaded()
        return self._entry_count() >= self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.ENTRY_SIZE

    def exists(self) -> bool:
        return self._loaded or self.path.exists()

    def _relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"offset {offset} is not within int32 of base offset {self.base_offset}"
                f" of index {self.path}"
            )
        return relative

    def _write_entry(self, data: bytes) -> None:
        fd = self._descriptor()
        self._unflushed = True
        count = self._entry_count()
        os.pwrite(fd, data, count * self.ENTRY_SIZE)
        if count + 1 > self._max_entries:
            self._max_entries = count + 1

    # --- sizing -----------------------------------------------------------------------

    def resize(self, new_size: int) -> None:
        """Set the file length (never below the used part): preallocate or trim."""
        self._check_writable("resize")
        self._ensure_loaded()
        length = max(self._round(new_size), self._entry_count() * self.ENTRY_SIZE)
        if length != self._max_entries * self.ENTRY_SIZE:
            self._truncate_file(length)
            self._unflushed = True
        self._max_entries = length // self.ENTRY_SIZE

    def trim_to_valid_size(self) -> None:
        if self._loaded:
            self.resize(self._entry_count() * self.ENTRY_SIZE)

    def truncate_to_entries(self, count: int) -> None:
        """Keep the first `count` entries, zeroing the rest of the file on disk.

        The dropped entries are cut off and the file is grown back to its length,
        which leaves zeros (free space) rather than stale entries behind.
        """
        self._check_writable("truncate")
        self._ensure_loaded()
        if count >= self._entry_count():
            return
        self._truncate_entries(count)
        length = self._max_entries * self.ENTRY_SIZE
        self._truncate_file(count * self.ENTRY_SIZE)
        self._truncate_file(length)
        self._unflushed = True

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for an offset >= `offset` (the entries before the first
        such one stay: offsets never go backwards in an index)."""
        self._ensure_loaded()
        self.truncate_to_entries(bisect.bisect_left(self._offsets, offset - self.base_offset))

    def reset(self) -> None:
        """Drop every entry and preallocate: the start of a rebuild."""
        self.truncate_to_entries(0)
        self.resize(self.max_index_size)

    # --- lifecycle --------------------------------------------------------------------

    def flush(self) -> None:
        self._sync()

    def close(self) -> None:
        """Trim the file to its entries and release it; it reloads if used again."""
        if not self._loaded:
            return
        try:
            if self.writable:
                self.trim_to_valid_size()
        finally:
            self.close_handler()

    def close_handler(self) -> None:
        """Release the file without trimming it; the entries reload on next use."""
        self.release_descriptor()
        self._loaded = False
        self._truncate_entries(0)
        self._max_entries = 0

    def delete(self) -> bool:
        self._check_writable("delete")
        self.close_handler()
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: Path) -> None:
        """Rename the file (missing files are fine: the index may never have been used)."""
        self._check_writable("rename")
        with contextlib.suppress(FileNotFoundError):
            os.rename(self.path, path)
        self.path = path
