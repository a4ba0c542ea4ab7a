"""Producer-state snapshots (`<offset>.snapshot`), as Kafka's ProducerStateManager writes them.

A snapshot holds the state of every idempotent or transactional producer at the log
offset in its name, so that a broker need not replay the whole log to rebuild it:

    version int16 (1) | crc uint32 (CRC32C of everything after it) | count int32 |
    count x (producer id int64, epoch int16, last sequence int32, last offset int64,
             offset delta int32, timestamp int64, coordinator epoch int32,
             current transaction first offset int64)

Brook rebuilds producer state from batch headers and writes no snapshots yet; this
reads Kafka's, read-only, for the tools and the Spark jobs.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

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
