"""Read-only readers of the files in a partition directory, for `brook dump-log`.

The storage classes open index files read-write (they preallocate, trim and rebuild
them); a dump tool must never change what it inspects, possibly a file of a running
Kafka or Brook broker. So these readers only read, and they report damage instead of
repairing it. Formats are Kafka's:

- `.log`: concatenated record batches (offset int64, length int32, then the rest).
- `.index`: 8-byte entries (relative offset int32, position int32).
- `.timeindex`: 12-byte entries (timestamp int64, relative offset int32).
- `.txnindex`: 34-byte aborted-transaction entries (version int16, producer id int64,
  first offset int64, last offset int64, last stable offset int64).
- `.snapshot`: producer state (version int16 = 1, crc uint32 = CRC32C of everything
  after it, then an int32 count of 46-byte entries: producer id int64, epoch int16,
  last sequence int32, last offset int64, offset delta int32, timestamp int64,
  coordinator epoch int32, current transaction first offset int64).
- `leader-epoch-checkpoint`: text, version 0, a count, then "epoch startOffset" lines.

Index files may be preallocated (a Kafka or Brook segment still active): their tail is
zeros, which are free space rather than entries, as Kafka reads them too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import crc32c

from brook.protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    parse_header,
)
from brook.storage.errors import StorageError
from brook.storage.leader_epoch_cache import EpochEntry, LeaderEpochFileCache

OFFSET_INDEX_ENTRY = struct.Struct(">ii")
TIME_INDEX_ENTRY = struct.Struct(">qi")
TXN_INDEX_ENTRY = struct.Struct(">hqqqq")
SNAPSHOT_HEADER = struct.Struct(">hIi")
SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
PRODUCER_SNAPSHOT_VERSION = 1
MAGIC_OFFSET = 16  # of a batch (v2) or a message (v0/v1): after offset, length and crc/epoch


class FileFormatError(Exception):
    """The file is not what its name says, or is damaged beyond reading."""


def base_offset_of(path: Path) -> int | None:
    """The base offset a segment file's name starts with (20 digits), else None."""
    prefix = path.name.split(".", 1)[0]
    return int(prefix) if len(prefix) == 20 and prefix.isdigit() else None


# --- .log ---------------------------------------------------------------------------------


@dataclass(slots=True)
class Batch:
    position: int
    header: BatchHeader
    data: bytes  # the whole batch, header included (header.position is 0 in it)


@dataclass(slots=True)
class Damage:
    """Where a segment stops being readable, and why: the rest of the file is skipped."""

    position: int
    invalid_bytes: int
    reason: str


def read_batches(path: Path) -> Iterator[Batch | Damage]:
    """Every batch of a `.log` file in order; a Damage item ends the walk early."""
    with open(path, "rb") as file:
        size = file.seek(0, 2)
        file.seek(0)
        position = 0
        while position < size:
            damage = _check_frame(file, position, size)
            if damage is not None:
                yield damage
                return
            file.seek(position)
            length = struct.unpack(">i", file.read(LOG_OVERHEAD)[8:])[0]
            file.seek(position)
            data = file.read(LOG_OVERHEAD + length)
            yield Batch(position, parse_header(data), data)
            position += LOG_OVERHEAD + length


def _check_frame(file: BinaryIO, position: int, size: int) -> Damage | None:
    remaining = size - position
    if remaining < LOG_OVERHEAD:
        return Damage(position, remaining, "a torn batch: too few bytes for a batch header")
    file.seek(position)
    head = file.read(MAGIC_OFFSET + 1)
    (length,) = struct.unpack_from(">i", head, 8)
    if len(head) > MAGIC_OFFSET and head[MAGIC_OFFSET] != MAGIC_V2:
        magic = head[MAGIC_OFFSET]
        if magic in (0, 1):
            reason = f"message format v{magic} (magic {magic}) is not supported, only v2 batches"
        else:
            reason = f"magic byte {magic} is not a record format"
        return Damage(position, remaining, reason)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        return Damage(position, remaining, f"batch length {length} is below the minimum")
    if LOG_OVERHEAD + length > remaining:
        return Damage(
            position,
            remaining,
            f"a torn batch: it claims {LOG_OVERHEAD + length} bytes, {remaining} follow",
        )
    return None


# --- indexes ------------------------------------------------------------------------------


def _used_part(path: Path, entry_size: int) -> bytes:
    data = path.read_bytes()
    if len(data) % entry_size:
        raise FileFormatError(
            f"its size {len(data)} is not a multiple of the entry size {entry_size}"
        )
    # A preallocated tail is zeros; an entry may end in zero bytes, so round back up.
    used = len(data.rstrip(b"\x00"))
    used += -used % entry_size
    return data[:used]


def read_offset_index(path: Path) -> list[tuple[int, int]]:
    """(relative offset, position) entries."""
    return list(OFFSET_INDEX_ENTRY.iter_unpack(_used_part(path, OFFSET_INDEX_ENTRY.size)))


def read_time_index(path: Path) -> list[tuple[int, int]]:
    """(timestamp, relative offset) entries."""
    return list(TIME_INDEX_ENTRY.iter_unpack(_used_part(path, TIME_INDEX_ENTRY.size)))


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def read_txn_index(path: Path) -> list[AbortedTxn]:
    data = path.read_bytes()
    if len(data) % TXN_INDEX_ENTRY.size:
        raise FileFormatError(
            f"its size {len(data)} is not a multiple of the entry size {TXN_INDEX_ENTRY.size}"
        )
    entries = [AbortedTxn(*fields) for fields in TXN_INDEX_ENTRY.iter_unpack(data)]
    for entry in entries:
        if entry.version != 0:
            raise FileFormatError(f"an entry has version {entry.version}; only 0 is known")
    return entries


# --- producer state snapshot --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProducerEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def read_producer_snapshot(path: Path) -> list[ProducerEntry]:
    data = path.read_bytes()
    if len(data) < SNAPSHOT_HEADER.size:
        raise FileFormatError(f"{len(data)} bytes are too few for a producer snapshot")
    version, crc, count = SNAPSHOT_HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise FileFormatError(
            f"producer snapshot version {version}; only {PRODUCER_SNAPSHOT_VERSION} is known"
        )
    computed = crc32c.crc32c(data[6:])  # the CRC covers everything after itself
    if computed != crc:
        raise FileFormatError(f"CRC {crc} does not match the computed {computed}")
    if count < 0 or len(data) != SNAPSHOT_HEADER.size + count * SNAPSHOT_ENTRY.size:
        raise FileFormatError(
            f"it promises {count} entries but holds {len(data) - SNAPSHOT_HEADER.size} bytes"
        )
    return [
        ProducerEntry(*fields)
        for fields in SNAPSHOT_ENTRY.iter_unpack(data[SNAPSHOT_HEADER.size :])
    ]


# --- leader epoch checkpoint --------------------------------------------------------------


def read_leader_epochs(path: Path) -> list[EpochEntry]:
    if not path.is_file():
        raise FileFormatError("no such file")
    try:
        return LeaderEpochFileCache(path).epoch_entries()
    except StorageError as exc:
        raise FileFormatError(str(exc)) from None
