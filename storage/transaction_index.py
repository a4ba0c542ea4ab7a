"""The aborted-transaction index (`.txnindex`) of a segment, as Kafka's TransactionIndex.

One 34-byte entry per transaction whose abort marker lies in the segment: version int16
(0), producer id int64, first offset int64, last offset int64, and the last stable
offset when it was aborted int64, big-endian. A read_committed fetch drops the records
of these ranges. The file exists only for segments that hold an abort marker.

Brook does not abort transactions yet, so nothing here writes the file; this reads what
Kafka wrote, for the tools and the Spark jobs, opening it read-only.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from .errors import CorruptIndexError

ENTRY = struct.Struct(">hqqqq")
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    version: int
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The `.txnindex` of the segment starting at `start_offset`."""

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every entry in file order; none when the file does not exist (as Kafka)."""
        try:
            with open(self.path, "rb") as file:
                data = file.read()
        except FileNotFoundError:
            return []
        if len(data) % ENTRY.size:
            raise CorruptIndexError(
                f"transaction index {self.path} has size {len(data)}, which is not a multiple"
                f" of the entry size {ENTRY.size}"
            )
        entries = [AbortedTxn(*fields) for fields in ENTRY.iter_unpack(data)]
        for entry in entries:
            if entry.version > CURRENT_VERSION:
                raise CorruptIndexError(
                    f"Unexpected aborted transaction version {entry.version} in transaction"
                    f" index {self.path}, current version is {CURRENT_VERSION}"
                )
        return entries

    def sanity_check(self) -> None:
        """Kafka's check: no aborted transaction may end before the segment starts."""
        for entry in self.all_aborted_txns():
            if entry.last_offset < self.start_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {entry} in index {self.path} is less"
                    f" than start offset {self.start_offset}"
                )
