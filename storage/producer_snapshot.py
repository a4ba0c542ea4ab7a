"""Producer-state snapshots (`<offset>.snapshot`), as Kafka's ProducerStateManager writes them.

A snapshot holds the state of every idempotent or transactional producer at the log
offset in its name, so that a broker need not replay the whole log to rebuild it:

    version int16 (1) | crc uint32 (CRC32C of everything after it) | count int32 |
    count x (producer id int64, epoch int16, last sequence int32, last offset int64,
             offset delta int32, timestamp int64, coordinator epoch int32,
             current transaction first offset int64)

`offset delta` is last offset - first offset of the producer's last batch, so that
the batch can be told again from its retry; `timestamp` is the producer's last
timestamp (what producer.id.expiration.ms counts from). The broker writes them and
reads them back at start; the tools and the Spark jobs read them read-only.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import astuple, dataclass
from pathlib import Path

from brook.protocol import crc32c

from . import log_file_utils as files
from .checkpoints import atomic_write_bytes
from .errors import CorruptSnapshotError

HEADER = struct.Struct(">hIi")
ENTRY = struct.Struct(">qhiqiqiq")
PRODUCER_SNAPSHOT_VERSION = 1
CRC_END = 6  # the CRC covers everything after the version and itself
NO_TXN_FIRST_OFFSET = -1


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1 when no transaction is open


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    """The entries of a snapshot file; CorruptSnapshotError when it is damaged."""
    with open(path, "rb") as file:
        data = file.read()
    if len(data) < HEADER.size:
        raise CorruptSnapshotError(f"{len(data)} bytes are too few for a producer snapshot")
    version, crc, count = HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c.crc32c(data[CRC_END:])
    if computed != crc:
        raise CorruptSnapshotError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}."
            f" Computed crc: {computed}"
        )
    if count < 0 or len(data) != HEADER.size + count * ENTRY.size:
        raise CorruptSnapshotError(
            f"the snapshot promises {count} entries but holds {len(data) - HEADER.size} bytes"
        )
    return [SnapshotEntry(*fields) for fields in ENTRY.iter_unpack(data[HEADER.size :])]


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """A snapshot file's bytes: the entries, then the header with the CRC over them."""
    body = bytearray(4)
    count = 0
    for entry in entries:
        body += ENTRY.pack(*astuple(entry))
        count += 1
    struct.pack_into(">i", body, 0, count)
    return struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def write_snapshot(path: Path, entries: Iterable[SnapshotEntry]) -> None:
    """Write a snapshot so that a crash leaves no torn one under its name.

    Kafka writes the file in place and relies on the CRC to reject a torn one; here it
    goes to `<name>.tmp`, is fsynced and renamed (as the checkpoint files are), so a
    snapshot under its real name is always whole.
    """
    atomic_write_bytes(path, encode_snapshot(entries))


def list_snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshot files in a partition directory, ascending."""
    offsets = []
    for entry in os.scandir(directory):
        name = entry.name
        if name.endswith(files.PRODUCER_SNAPSHOT_FILE_SUFFIX) and entry.is_file():
            offset = files.offset_from_file_name(name)
            if offset is not None and name.count(".") == 1:
                offsets.append(offset)
    return sorted(offsets)
