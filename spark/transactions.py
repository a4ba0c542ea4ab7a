"""What became of each transactional batch of a partition, and Kafka's read_committed.

A read_committed consumer (Kafka's isolation.level) is given the records below the
partition's last stable offset (LSO: the first offset of the oldest transaction still
open, else the log end), minus those of aborted transactions, which the fetch's list of
aborted transactions (from the `.txnindex` files) lets it drop: a transactional batch of
producer P at offset O is aborted when an aborted transaction of P spans O (from its
first offset to its ABORT marker). The same facts give every batch an outcome:

    committed  transactional data below its producer's COMMIT marker
    aborted    transactional data that an ABORT marker ended
    open       transactional data with no marker after it yet (at or above the LSO)
    none       not transactional data: a plain batch, or a marker itself

They are gathered once per partition, on the driver, from files a stopped broker
leaves: the `.txnindex` of every segment, then the producers' open transactions from
the newest `.snapshot` (a broker writes one at the log end when it stops cleanly), and
the batch headers after that snapshot (none after a clean stop), whose ABORT markers
also add to the aborted transactions, as a broker's recovery rebuilds its
`.txnindex` from them. Each split gets the part that concerns its segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.protocol.record_batch import BatchHeader
from brook.storage.end_transaction_marker import read_end_txn_marker
from brook.storage.errors import StorageError
from brook.storage.producer_snapshot import NO_TXN_FIRST_OFFSET
from brook.storage.reader import (
    Damage,
    PartitionFiles,
    SegmentReader,
    TransactionIndex,
    read_snapshot,
)

COMMITTED = "committed"
ABORTED = "aborted"
OPEN = "open"
NONE = "none"
OUTCOMES = (COMMITTED, ABORTED, OPEN, NONE)
READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


@dataclass(frozen=True, slots=True)
class PartitionTransactions:
    """The aborted transactions (producer id, first offset, the ABORT marker's offset)
    and the open ones (producer id -> first offset) of a partition."""

    aborted: tuple[tuple[int, int, int], ...] = ()
    open_first: dict[int, int] = field(default_factory=dict)

    @property
    def last_stable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None: none is open, the
        LSO is the log end)."""
        return min(self.open_first.values(), default=None)

    def within(self, first_offset: int, next_offset: int | None) -> PartitionTransactions:
        """What concerns the batches of [first_offset, next_offset): a split's share."""
        aborted = tuple(
            entry
            for entry in self.aborted
            if entry[2] >= first_offset and (next_offset is None or entry[1] < next_offset)
        )
        return PartitionTransactions(aborted, self.open_first)

    def outcome(self, header: BatchHeader) -> str:
        if not header.is_transactional or header.is_control:
            return NONE
        producer, offset = header.producer_id, header.base_offset
        for aborted_by, first, last in self.aborted:
            if aborted_by == producer and first <= offset <= last:
                return ABORTED
        first_open = self.open_first.get(producer)
        if first_open is not None and offset >= first_open:
            return OPEN
        return COMMITTED


NO_TRANSACTIONS = PartitionTransactions()


def partition_transactions(partition: PartitionFiles) -> PartitionTransactions:
    aborted: dict[tuple[int, int], int] = {}
    for segment in partition.segments:
        if not segment.has_txn_index:
            continue
        try:
            index = TransactionIndex(segment.txn_index_path, segment.base_offset)
            for entry in index.all_aborted_txns():
                aborted[(entry.producer_id, entry.first_offset)] = entry.last_offset
        except (OSError, StorageError):
            continue  # damaged: the markers read below may still say it
    open_first, replay_from = _snapshot(partition)
    for segment_number, segment in enumerate(partition.segments):
        following = partition.segments[segment_number + 1 : segment_number + 2]
        if following and following[0].base_offset <= replay_from:
            continue  # every batch of it is below the snapshot's offset
        with SegmentReader(segment.log_path) as reader:
            start: int | None = 0
            if segment.base_offset < replay_from:
                start = reader.position_of_offset(replay_from)  # through the .index
            if start is None:
                continue
            for batch in reader.batches(start):
                if isinstance(batch, Damage):
                    break
                header = batch.header
                if (
                    header.last_offset < replay_from
                    or not header.is_transactional
                    or not batch.crc_is_valid()
                ):
                    continue
                producer = header.producer_id
                if not header.is_control:
                    open_first.setdefault(producer, header.base_offset)
                    continue
                try:
                    marker = read_end_txn_marker(batch.data, header)
                except (CorruptRecordError, InvalidRecordError):
                    continue
                first = open_first.pop(producer, None)
                if marker is not None and marker.is_abort and first is not None:
                    aborted.setdefault((producer, first), header.base_offset)
    entries = tuple(sorted((pid, first, last) for (pid, first), last in aborted.items()))
    return PartitionTransactions(entries, open_first)


def _snapshot(partition: PartitionFiles) -> tuple[dict[int, int], int]:
    """The open transactions of the newest readable snapshot and its offset (nothing
    and 0 without one: the replay starts at the log's start)."""
    for offset in reversed(partition.snapshot_offsets):
        try:
            entries = read_snapshot(partition.snapshot_path(offset))
        except (OSError, StorageError):
            continue
        open_first = {
            e.producer_id: e.current_txn_first_offset
            for e in entries
            if e.current_txn_first_offset != NO_TXN_FIRST_OFFSET
        }
        return open_first, offset
    return {}, 0
