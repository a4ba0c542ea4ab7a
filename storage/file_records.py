"""A segment's `.log` file: concatenated v2 record batches.

Appends go through one O_APPEND descriptor with os.write (page cache only; fsync only
in flush()). Reads use os.pread, so readers never move a shared file position and a
read costs one system call. Walking the file batch by batch reads only the 12-byte
prefix and the header of each batch, a chunk at a time.

Opened with `mutable=False` (as Kafka's FileRecords.open does for DumpLogSegments), the
file is opened O_RDONLY, never created, and every change is refused: what tools and
Spark executors use on files a broker may own.
"""

from __future__ import annotations

import io
import logging
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from brook.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header

from . import idle_files

# Smallest legal batchLength: a header with no records.
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
LAST_OFFSET_DELTA_OFFSET = 23

logger = logging.getLogger("brook.storage.file_records")

HEADER_SCAN_CHUNK = 16 * 1024
RECOVERY_CHUNK = 1024 * 1024


class FileRecords(idle_files.ReleasableFile):
    """The .log file of one segment. The descriptor is opened on first use, and a
    mutable file's is closed again when it goes unused (storage/idle_files.py).

    A mutable file is created when missing; an immutable one must exist (its size is
    taken when it is opened: bytes a broker appends later are not seen).
    """

    def __init__(self, path: Path, size: int | None = None, *, mutable: bool = True) -> None:
        super().__init__()
        self.path = path
        self.mutable = mutable
        if size is None:
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                if not mutable:
                    raise
                # Made now, opened when first written: a new partition holds no descriptor.
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
                size = 0
        self._size = size

    @classmethod
    def create(cls, path: Path) -> FileRecords:
        """A new empty mutable file, which must not exist yet (no lookup first)."""
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
        return cls(path, 0)

    def _open(self) -> int:
        self.used = True
        if self._fd is None:
            if self.mutable:
                flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
                self._fd = os.open(self.path, flags, 0o644)
                idle_files.opened(self)
            else:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        return self._fd

    def _check_mutable(self, action: str) -> None:
        if not self.mutable:
            raise io.UnsupportedOperation(f"cannot {action} {self.path}: it is open read-only")

    @property
    def size(self) -> int:
        return self._size

    # --- writing ----------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write `data` at the end of the file; returns the number of bytes written."""
        if not self.mutable:  # inline: this runs on every produce
            self._check_mutable("append to")
        fd = self._fd if self._fd is not None else self._open()
        self.used = True
        self._unflushed = True
        total = len(data)
        try:
            written = os.write(fd, data)
            if written < total:  # only on a full disk or a signal; finish or raise
                view = memoryview(data)
                while written < total:
                    written += os.write(fd, view[written:])
        except OSError:
            # A write cut short (ENOSPC after part of the batch) must not leave bytes
            # that `size` does not count: later appends would land after them while
            # indexes and reads use the stale size. Cut back to where this append began.
            self._discard_after(fd, self._size)
            raise
        self._size += total
        return total

    def _discard_after(self, fd: int, size: int) -> None:
        try:
            os.ftruncate(fd, size)
        except OSError as exc:  # the dir goes offline; recovery cuts the tail at start
            logger.error(
                "Could not cut %s back to %d bytes after a failed write: %s", self.path, size, exc
            )

    def truncate_to(self, size: int) -> int:
        """Cut the file to `size` bytes; returns how many bytes were removed."""
        self._check_mutable("truncate")
        if size < 0 or size > self._size:
            raise ValueError(f"cannot truncate {self.path} of size {self._size} to {size}")
        removed = self._size - size
        if removed:
            if self._fd is not None:
                os.ftruncate(self._fd, size)
            else:  # a recovery cutting many logs' tails keeps no descriptor open
                os.truncate(self.path, size)
            self._size = size
            self._unflushed = True
        return removed

    def flush(self) -> None:
        self._sync()

    # --- reading ----------------------------------------------------------------------

    def read(self, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position` (fewer only at the end of the file)."""
        size = min(size, self._size - position)
        if size <= 0:
            return b""
        return os.pread(self._open(), size, position)

    def batches(
        self,
        start: int = 0,
        end: int | None = None,
        *,
        whole: bool = False,
        chunk_size: int = HEADER_SCAN_CHUNK,
    ) -> Iterator[tuple[int, BatchHeader, bytes]]:
        """Yield (file position, header, buffer) for each batch from `start`.

        `header.position` is the batch's position inside `buffer`. With `whole`, the
        buffer holds the entire batch (for CRC checks and record decoding); otherwise
        it is only sure to hold the header. The walk stops at `end`, at a batch that
        runs past `end` (a torn tail), or at a length too small to be a batch.
        """
        limit = self._size if end is None else min(end, self._size)
        position = start
        buffer = b""
        buffer_start = start
        while limit - position >= HEADER_SIZE:
            relative = position - buffer_start
            if relative + HEADER_SIZE > len(buffer):
                buffer = self.read(position, min(max(chunk_size, HEADER_SIZE), limit - position))
                buffer_start = position
                relative = 0
                if len(buffer) < HEADER_SIZE:  # the file shrank under an immutable reader
                    return
            header = parse_header(buffer, relative)
            if header.batch_length < MIN_BATCH_LENGTH:
                return
            size = header.batch_length + LOG_OVERHEAD
            if position + size > limit:
                return
            if whole and relative + size > len(buffer):
                buffer = self.read(position, max(chunk_size, size))
                buffer_start = position
                header.position = 0
                if len(buffer) < size:
                    return
            yield position, header, buffer
            position += size

    def search_for_offset(self, target_offset: int, start: int = 0) -> tuple[int, int] | None:
        """(position, size) of the first batch from `start` whose last offset >= target.

        Reads only each batch's base offset, length and last offset delta: this runs
        on every fetch.
        """
        limit = self._size
        position = start
        buffer = b""
        buffer_start = start
        unpack_offset_and_length = _OFFSET_AND_LENGTH.unpack_from
        unpack_int = _INT32.unpack_from
        while limit - position >= HEADER_SIZE:
            relative = position - buffer_start
            if relative + HEADER_SIZE > len(buffer):
                buffer = self.read(position, min(HEADER_SCAN_CHUNK, limit - position))
                buffer_start = position
                relative = 0
            base_offset, batch_length = unpack_offset_and_length(buffer, relative)
            if batch_length < MIN_BATCH_LENGTH:
                return None
            size = batch_length + LOG_OVERHEAD
            (delta,) = unpack_int(buffer, relative + LAST_OFFSET_DELTA_OFFSET)
            if base_offset + delta >= target_offset:
                return position, size
            position += size
        return None

    # --- lifecycle --------------------------------------------------------------------

    def close(self) -> None:
        self.release_descriptor()

    def delete(self) -> bool:
        self._check_mutable("delete")
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: Path) -> None:
        self._check_mutable("rename")
        os.rename(self.path, path)
        self.path = path


class FileRegion:
    """Whole batches of a segment's .log, from `position`, `size` bytes, read only when
    asked: a Fetch response streams them to the socket a piece at a time, so that a
    consumer that reads slowly (or not at all) holds no more than a piece in memory, as
    Kafka sends a FileRecords slice from its file (storage/../protocol/wire.py, LazyBytes).

    The batches below the high watermark never change, so reading them later reads what
    the fetch chose; a log truncated meanwhile (a leader stepping down) or a segment
    removed past file.delete.delay.ms cannot give them any more: read raises OSError and
    the connection is closed (the client fetches again), as Kafka's does."""

    __slots__ = ("position", "records", "size")

    def __init__(self, records: FileRecords, position: int, size: int) -> None:
        self.records = records
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return self.read(0, self.size)

    def __repr__(self) -> str:
        return f"FileRegion({self.records.path.name}, {self.position}, {self.size})"

    def read(self, offset: int, size: int) -> bytes:
        size = max(0, min(size, self.size - offset))
        data = self.records.read(self.position + offset, size) if size else b""
        if len(data) != size:
            raise OSError(
                f"{self.records.path} no longer holds {size} bytes at"
                f" {self.position + offset} (truncated to {self.records.size})"
            )
        return data


def whole_batches_end(buffer: bytes | bytearray | memoryview, start: int = 0) -> int:
    """The end of the last complete batch in `buffer`, walking from batch boundary `start`."""
    end = len(buffer)
    position = start
    unpack_int = _INT32.unpack_from
    while end - position >= LOG_OVERHEAD:
        (batch_length,) = unpack_int(buffer, position + 8)
        size = batch_length + LOG_OVERHEAD
        if batch_length < MIN_BATCH_LENGTH or position + size > end:
            break
        position += size
    return position
