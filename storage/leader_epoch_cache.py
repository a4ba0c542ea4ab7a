"""The leader epoch cache: at which offset each leader epoch of a partition began.

Kept in the partition dir as `leader-epoch-checkpoint`, in Kafka's checkpoint format
(version 0, count, then "epoch startOffset" lines). Followers use it through
OffsetForLeaderEpoch to find where their log diverges from the leader's; consumers
use it to detect truncation. Entries are ordered by epoch and by start offset.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path

from .checkpoints import CheckpointFile

logger = logging.getLogger("brook.storage.leader_epoch_cache")

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


def _to_line(entry: EpochEntry) -> str:
    return f"{entry.epoch} {entry.start_offset}"


def _from_line(line: str) -> EpochEntry:
    epoch, start_offset = line.split()
    return EpochEntry(int(epoch), int(start_offset))


def _checkpoint_file(path: Path) -> CheckpointFile[EpochEntry]:
    return CheckpointFile(path, LeaderEpochFileCache.VERSION, _to_line, _from_line)


def read_leader_epoch_checkpoint(path: Path) -> list[EpochEntry]:
    """The entries of a `leader-epoch-checkpoint` as stored (none when it is missing).

    Only reads: for tools and readers that must not change the file.
    """
    return _checkpoint_file(path).read()


class LeaderEpochFileCache:
    """Epoch -> start offset, persisted on every change (changes are rare)."""

    VERSION = 0

    def __init__(self, path: Path, name: str = "", *, absent: bool = False) -> None:
        """`absent`: the file is known not to exist (its directory was just made), so
        it is not looked for."""
        self.path = path
        self._name = name or path.parent.name
        self._checkpoint = _checkpoint_file(path)
        self._entries: list[EpochEntry] = (
            [] if absent else sorted(self._checkpoint.read(), key=lambda e: e.epoch)
        )
        # What the file holds (None: no file yet): a flush that would write the same
        # again writes nothing.
        self._on_disk: list[EpochEntry] | None = (
            None if absent or not path.exists() else list(self._entries)
        )
        # An entry assigned with flush=False and not written yet (write_pending).
        self.pending = False

    # --- queries ----------------------------------------------------------------------

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def is_empty(self) -> bool:
        return not self._entries

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        slot = self._slot(epoch)
        if slot < len(self._entries) and self._entries[slot].epoch == epoch:
            return self._entries[slot]
        return None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below `epoch` (default: below the latest epoch)."""
        if epoch is None:
            if not self._entries:
                return None
            epoch = self._entries[-1].epoch
        slot = self._slot(epoch)
        return self._entries[slot - 1].epoch if slot > 0 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds `offset` (the last one starting at or before it)."""
        previous = None
        for entry in self._entries:
            if entry.start_offset == offset:
                return entry.epoch
            if entry.start_offset > offset:
                return previous
            previous = entry.epoch
        return previous

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, with Kafka's semantics.

        The epoch returned is the largest known epoch <= the requested one; its end
        offset is the start offset of the next larger epoch, or the log end offset
        for the latest epoch. An undefined request, or one above every known epoch,
        gets (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET). A request below every known
        epoch gets (requested epoch, start offset of the first epoch).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right([e.epoch for e in self._entries], requested_epoch)
        if higher >= len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def _slot(self, epoch: int) -> int:
        return bisect.bisect_left([e.epoch for e in self._entries], epoch)

    # --- updates ----------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> None:
        """Record that `epoch` starts at `start_offset`.

        Nothing changes when the latest entry already has this epoch at an offset no
        larger. Entries that the new one contradicts (a later or equal epoch, or a
        start offset at or after the new one) are removed first.

        `flush=False` (a new leader's epoch, starting at the log end): the file is written
        by write_pending, which the log calls before it appends the epoch's first record.
        Until then the entry describes no record, and a load drops it anyway (it starts
        at the log end: truncate_from_end), so a crash loses nothing the file would have
        kept; thousands of partitions led at once (a new topic, a broker's start, a
        controlled shutdown moving leaders) write no file until they are written to.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return
        new = EpochEntry(epoch, start_offset)
        before = list(self._entries)
        removed: list[EpochEntry] = []
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            removed.append(self._entries.pop())
        if len(removed) > 1 or (removed and removed[0].start_offset != start_offset):
            logger.warning(
                "[%s] New epoch entry %s caused truncation of conflicting entries %s",
                self._name,
                new,
                removed,
            )
        self._entries.append(new)
        if not flush:
            self.pending = True
            return
        try:
            self.flush()
        except OSError:
            # Not written (out of descriptors or space): the append that brought the
            # epoch fails, and the next one assigns it again, so memory and file agree.
            self._entries = before
            raise

    def truncate_from_end(self, end_offset: int, flush: bool = True) -> None:
        """Remove every entry starting at or after `end_offset` (the log was truncated).

        `flush=False` (a log being loaded): the file keeps the old entries until the next
        change is flushed. Loading truncates to the log's end each time, so the file is
        never read without this truncation; and an empty log's one entry, removed here,
        usually comes back when the partition is led, so a restart writes nothing."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        if flush:
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before `start_offset`; the epoch in force there now starts at it.

        Exclusive, as Kafka's: truncate_from_start(6) keeps an entry starting at 6.
        """
        count = 0
        while count < len(self._entries) and self._entries[count].start_offset <= start_offset:
            count += 1
        if not count:
            return
        last_removed = self._entries[count - 1]
        self._entries[:count] = [EpochEntry(last_removed.epoch, start_offset)]
        self.flush()

    def clear_and_flush(self) -> None:
        self._entries.clear()
        self.flush()

    def flush_at_close(self, log_end_offset: int) -> None:
        """flush, for a log closing at `log_end_offset`, leaving out the entries that start
        at or after it: the next load drops them (truncate_from_end) whatever the file
        says, so a new leader's epoch never written to (assign with flush=False) is not
        written at the close either."""
        if self._entries != self._on_disk:
            self._write([e for e in self._entries if e.start_offset < log_end_offset])
        self.pending = False

    def write_pending(self) -> None:
        """Write what assign(flush=False) left in memory (before its epoch's first record)."""
        if self.pending:
            self.flush()

    def flush(self) -> None:
        self._write(self._entries)
        self.pending = False

    def _write(self, entries: list[EpochEntry]) -> None:
        """The file made to hold `entries`, unless it does already (or its dir is gone)."""
        if entries != self._on_disk and self.path.parent.exists():
            self._checkpoint.write(entries)
            self._on_disk = list(entries)
