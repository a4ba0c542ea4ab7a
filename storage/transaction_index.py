"""The aborted-transaction index (`.txnindex`) of a segment, as Kafka's TransactionIndex.

One 34-byte entry per aborted transaction whose ABORT marker lies in the segment:

    version int16 (0) | producer id int64 | first offset int64 | last offset int64 |
    last stable offset int64                                       (big-endian)

`first offset` is the transaction's first data offset (possibly in an earlier
segment), `last offset` the offset of its ABORT marker, and `last stable offset` the
first offset still undecided once this transaction was complete. A read_committed
fetch collects the entries that overlap what it returns, and the consumer drops
those producers' records in those ranges. The file exists only for segments that
hold an ABORT marker of a non-empty transaction; it is created by the first entry.

This module is the one place that knows the format: the broker's segments append,
truncate and search it; `brook dump-log` and the Spark jobs read it read-only.
"""

from __future__ import annotations

import bisect
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import CorruptIndexError

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    @classmethod
    def of(
        cls, producer_id: int, first_offset: int, last_offset: int, last_stable_offset: int
    ) -> AbortedTxn:
        """An entry of the current version."""
        return cls(CURRENT_VERSION, producer_id, first_offset, last_offset, last_stable_offset)

    def encode(self) -> bytes:
        return ENTRY.pack(
            self.version,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    """The aborted transactions of one segment overlapping a fetch, and whether the
    search is complete (no later segment can hold another that overlaps it)."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


def decode_entries(data: bytes, path: Path) -> list[AbortedTxn]:
    """The entries of a `.txnindex` file's bytes; CorruptIndexError when damaged."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(
            f"transaction index {path} has size {len(data)}, which is not a multiple"
            f" of the entry size {ENTRY_SIZE}"
        )
    entries = [AbortedTxn(*fields) for fields in ENTRY.iter_unpack(data)]
    for entry in entries:
        if entry.version > CURRENT_VERSION:
            raise CorruptIndexError(
                f"Unexpected aborted transaction version {entry.version} in transaction"
                f" index {path}, current version is {CURRENT_VERSION}"
            )
    return entries


class TransactionIndex:
    """The `.txnindex` of the segment starting at `start_offset`.

    The entries are read once, on first use, and kept in memory (a segment holds few
    aborted transactions, and a read_committed fetch searches them every time);
    appends write through to the file. No descriptor is held open: an append opens,
    writes and closes, and `flush` fsyncs what was appended since the last flush.
    """

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._entries: list[AbortedTxn] | None = None
        # The entries' last offsets, ascending: a search starts at the first that can
        # overlap the fetch instead of walking every entry of a busy segment.
        self._last_offsets: list[int] = []
        self._unflushed = False

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path})"

    # --- reading ----------------------------------------------------------------------

    def _loaded(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                with open(self.path, "rb") as file:
                    data = file.read()
            except FileNotFoundError:
                data = b""
            self._entries = decode_entries(data, self.path)
            self._last_offsets = [entry.last_offset for entry in self._entries]
        return self._entries

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry in file order; none when the file does not exist (as Kafka)."""
        return list(self._loaded())

    @property
    def last_offset(self) -> int | None:
        entries = self._loaded()
        return entries[-1].last_offset if entries else None

    def collect_aborted_txns(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> TxnIndexSearchResult:
        """The entries overlapping [fetch_offset, upper_bound_offset) (Kafka's
        collectAbortedTxns). The search is complete at the first entry whose last
        stable offset reaches the upper bound: every transaction aborted after it
        started at or past that offset, beyond the fetched range.

        Entries that end before `fetch_offset` are skipped by a binary search: none
        overlaps, and none can complete the search, since an entry's last stable
        offset is at most its last offset + 1."""
        entries = self._loaded()
        found = []
        for entry in entries[bisect.bisect_left(self._last_offsets, fetch_offset) :]:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def sanity_check(self) -> None:
        """Kafka's check: no aborted transaction may end before the segment starts (and,
        here, the file must hold whole entries of a known version)."""
        for entry in self._loaded():
            if entry.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {entry} in index {self.path} is less"
                    f" than start offset {self.start_offset}"
                )

    # --- writing (the broker's segments only) -----------------------------------------

    def append(self, entry: AbortedTxn) -> None:
        """Add an entry; last offsets must increase, as markers come in log order."""
        entries = self._loaded()
        if entries and entries[-1].last_offset >= entry.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but"
                f" {entry.last_offset} is not greater than current last offset"
                f" {entries[-1].last_offset} of index {self.path}"
            )
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            data = memoryview(entry.encode())
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
        entries.append(entry)
        self._last_offsets.append(entry.last_offset)
        self._unflushed = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries of transactions aborted at or after `offset` (their markers
        are gone with the log they were in)."""
        entries = self._loaded()
        for i, entry in enumerate(entries):
            if entry.last_offset >= offset:
                self._cut(i)
                return

    def reset(self) -> None:
        """Remove every entry (the segment's recovery writes them again); the file may
        be damaged, so it is not read first."""
        self._cut(0)

    def _cut(self, count: int) -> None:
        # An index left without entries goes: the file exists only while it has some.
        if count == 0:
            self.delete()
            return
        os.truncate(self.path, count * ENTRY_SIZE)
        self._unflushed = True
        assert self._entries is not None
        del self._entries[count:]
        del self._last_offsets[count:]

    def flush(self) -> None:
        """fsync the entries appended (or cut) since the last flush."""
        if not self._unflushed:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._unflushed = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unflushed = False

    def delete(self) -> bool:
        """Remove the file; whether there was one."""
        self._entries = []
        self._last_offsets = []
        self._unflushed = False
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, path: Path) -> None:
        """Give the file a new name (e.g. `.deleted`); the index follows it either way."""
        try:
            if self.path.exists():
                os.rename(self.path, path)
        finally:
            self.path = path
