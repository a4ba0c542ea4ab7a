"""One share partition: the records of one topic partition that one share group has in
flight (KIP-932's SharePartition), on the partition's leader.

The group reads the partition from its share-partition start offset (SPSO) on. Every
offset from there up to the end offset (SPEO, the next offset never fetched) is in
flight and has a state: AVAILABLE (to be delivered, again or for the first time),
ACQUIRED (delivered to one member, locked until its acquisition lock runs out),
ACKNOWLEDGED (accepted: done) or ARCHIVED (rejected, delivered too often, a gap or a
record of an aborted transaction: done too). Offsets below the start offset are done.
The start offset moves up over the done offsets at its front, and the end offset moves
up as new records are acquired; how far apart they may be is bounded by
group.share.partition.max.record.locks, so a slow group stops acquiring instead of
holding an unbounded state.

This module is the state machine only: it reads no log and keeps no time of its own.
The caller (SharePartitionManager) reads batches, gives the clock, runs the lock
timers and persists what `state_batches` returns after each change.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from brook.protocol.record_batch import BatchHeader

log = logging.getLogger("brook.share")

# How many in-flight windows of offsets a restored state may cover (see _restore).
RESTORED_WINDOWS = 10

# Kafka's RecordState ids, as __share_group_state stores them.


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """What a member says of a record (ShareFetch/ShareAcknowledge's AcknowledgeTypes)."""

    GAP = 0  # no record at this offset (compacted away, a control record)
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2: keep it acquired, with a fresh lock (KIP-1222)


@dataclass(slots=True)
class InFlightRecord:
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class AcquiredRange:
    """Consecutive offsets acquired in one go, all delivered `delivery_count` times."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """Consecutive offsets in one state with one delivery count, as persisted."""

    first_offset: int
    last_offset: int
    delivery_state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class AcknowledgementBatch:
    first_offset: int
    last_offset: int
    # One type for the whole range, or one per offset.
    acknowledge_types: Sequence[int]

    def type_at(self, offset: int) -> int:
        if len(self.acknowledge_types) == 1:
            return self.acknowledge_types[0]
        return self.acknowledge_types[offset - self.first_offset]


RENEW = AcknowledgeType.RENEW.value


class InvalidRecordStateError(Exception):
    """An acknowledgement for offsets this member has not acquired (INVALID_RECORD_STATE)."""


class InvalidAcknowledgementError(Exception):
    """A malformed acknowledgement: ranges that overlap or run backwards, an unknown type,
    a type count that is neither 1 nor the range's length (INVALID_REQUEST)."""


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int


class SharePartition:
    def __init__(
        self,
        group_id: str,
        topic: str,
        partition: int,
        start_offset: int,
        *,
        max_in_flight: int,
        delivery_count_limit: int,
        state_batches: Iterable[StateBatch] = (),
        state_epoch: int = 0,
    ) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.max_in_flight = max_in_flight
        self.delivery_count_limit = delivery_count_limit
        self.state_epoch = state_epoch
        self.records: dict[int, InFlightRecord] = {}
        for batch in state_batches:
            self._restore(batch)
        # Offsets between the start and the persisted batches were never delivered.
        for offset in range(self.start_offset, self.end_offset):
            self.records.setdefault(offset, InFlightRecord(RecordState.AVAILABLE, 0))
        self._advance_start()

    def _restore(self, batch: StateBatch) -> None:
        # A record acquired when the state was written is no longer locked by anyone:
        # it is delivered again, with the delivery already counted.
        state = batch.delivery_state
        if state is RecordState.ACQUIRED:
            state = RecordState.AVAILABLE
        # The records are kept one by one: a state this broker wrote spans at most its
        # in-flight window, and a span past any such window (a state written by hand
        # through WriteShareGroupState) is cut rather than expanded offset by offset.
        limit = self.start_offset + RESTORED_WINDOWS * max(self.max_in_flight, 1)
        last = min(batch.last_offset, limit - 1)
        if last < batch.last_offset:
            log.warning(
                "Share group %s, %s-%d: the stored state's batch %d-%d reaches past the"
                " in-flight window; kept up to offset %d",
                self.group_id,
                self.topic,
                self.partition,
                batch.first_offset,
                batch.last_offset,
                last,
            )
        for offset in range(max(batch.first_offset, self.start_offset), last + 1):
            self.records[offset] = InFlightRecord(state, batch.delivery_count)
        self.end_offset = max(self.end_offset, last + 1)

    # --- what the manager asks ----------------------------------------------------------

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def next_fetch_offset(self) -> int:
        """Where a read for this partition starts: the first record that could be
        delivered, an available one in flight or the end offset."""
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is not None and record.state is RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether a fetch could acquire anything: an available record in flight, or room
        to take new records in."""
        if self.in_flight() < self.max_in_flight:
            return True
        return any(r.state is RecordState.AVAILABLE for r in self.records.values())

    def move_start_to(self, log_start_offset: int) -> None:
        """The log's start moved past the start offset (retention, DeleteRecords): what
        it removed is gone for the group too."""
        if log_start_offset <= self.start_offset:
            return
        for offset in range(self.start_offset, min(log_start_offset, self.end_offset)):
            self.records.pop(offset, None)
        self.start_offset = log_start_offset
        self.end_offset = max(self.end_offset, log_start_offset)

    def acquire(
        self,
        member_id: str,
        batches: Sequence[BatchHeader],
        max_records: int,
        now_ms: int,
        lock_duration_ms: int,
        aborted: Sequence[AbortedTransaction] | None = None,
        record_limit: bool = False,
    ) -> list[AcquiredRange]:
        """Acquire for `member_id` what `batches` (read from the log at
        next_fetch_offset(), in order) hold: available records in flight, then new ones
        past the end offset, about `max_records` of them (whole batches: the limit is
        passed to finish a batch, as Kafka's batch-optimized mode does; exactly
        `max_records` with `record_limit`, ShareFetch v2's record-limit mode, the rest of
        the batch staying available). Records of an aborted transaction (`aborted` given:
        a read_committed group) and control records are archived on the way, never
        delivered."""
        acquired: list[int] = []
        deadline = now_ms + lock_duration_ms
        aborting = _AbortTracker(aborted)
        for batch in batches:
            if batch.last_offset < self.start_offset:
                continue
            if len(acquired) >= max_records:
                break
            dropped = aborting.drops(batch)  # first: an ABORT marker closes its transaction
            skip = batch.is_control or dropped
            new_offsets = batch.last_offset >= self.end_offset
            if new_offsets and not skip and self.in_flight() >= self.max_in_flight:
                # No room for more records in flight: what is there must finish first.
                if not self._acquire_available(batch, member_id, deadline, acquired, max_records):
                    break
                continue
            for offset in range(max(batch.base_offset, self.start_offset), batch.last_offset + 1):
                record = self.records.get(offset)
                if offset >= self.end_offset:
                    record = InFlightRecord(RecordState.AVAILABLE, 0)
                    self.records[offset] = record
                    self.end_offset = offset + 1
                    if skip:
                        record.state = RecordState.ARCHIVED
                        continue
                if record is None or record.state is not RecordState.AVAILABLE:
                    continue
                if skip:
                    record.state = RecordState.ARCHIVED
                    continue
                if record_limit and len(acquired) >= max_records:
                    continue  # in flight, available for the next fetch
                self._lock(record, member_id, deadline)
                acquired.append(offset)
        self._advance_start()
        return _ranges(acquired, self.records)

    def _acquire_available(
        self,
        batch: BatchHeader,
        member_id: str,
        deadline: int,
        acquired: list[int],
        max_records: int,
    ) -> bool:
        """Acquire the available records in flight that `batch` holds; False once the
        batch runs past the end offset (nothing after it can be acquired)."""
        for offset in range(max(batch.base_offset, self.start_offset), batch.last_offset + 1):
            if offset >= self.end_offset:
                return False
            record = self.records.get(offset)
            if record is not None and record.state is RecordState.AVAILABLE:
                if len(acquired) >= max_records:
                    return False
                self._lock(record, member_id, deadline)
                acquired.append(offset)
        return len(acquired) < max_records

    def _lock(self, record: InFlightRecord, member_id: str, deadline: int) -> None:
        record.state = RecordState.ACQUIRED
        record.delivery_count += 1
        record.member_id = member_id
        record.lock_deadline_ms = deadline

    def acknowledge(
        self,
        member_id: str,
        batches: Sequence[AcknowledgementBatch],
        now_ms: int,
        lock_duration_ms: int,
    ) -> None:
        """Apply a member's acknowledgements, all or none: every offset named must be
        acquired by `member_id` (else InvalidRecordStateError, nothing changed)."""
        # What lies wholly below the start offset is done already: nothing to apply.
        batches = [b for b in batches if b.last_offset >= self.start_offset]
        previous_last = -1
        for batch in batches:
            if batch.first_offset > batch.last_offset or batch.first_offset <= previous_last:
                raise InvalidAcknowledgementError(
                    f"acknowledgement batch {batch.first_offset}-{batch.last_offset}"
                    " overlaps another or runs backwards"
                )
            size = batch.last_offset - batch.first_offset + 1
            if len(batch.acknowledge_types) not in (1, size):
                raise InvalidAcknowledgementError(
                    f"{len(batch.acknowledge_types)} acknowledge types for the"
                    f" {size} offsets {batch.first_offset}-{batch.last_offset}"
                )
            for kind in set(batch.acknowledge_types):
                if kind not in AcknowledgeType._value2member_map_:
                    raise InvalidAcknowledgementError(f"unknown acknowledge type {kind}")
            previous_last = batch.last_offset
            if batch.last_offset >= self.end_offset:
                raise InvalidAcknowledgementError(
                    f"offsets {batch.first_offset}-{batch.last_offset} of {self.topic}-"
                    f"{self.partition} run past what share group {self.group_id} has in"
                    f" flight (up to {self.end_offset - 1})"
                )
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                record = self.records.get(offset)
                if (
                    record is None
                    or record.state is not RecordState.ACQUIRED
                    or record.member_id != member_id
                ):
                    raise InvalidRecordStateError(
                        f"offset {offset} of {self.topic}-{self.partition} is not acquired"
                        f" by member {member_id} of share group {self.group_id}"
                    )
        for batch in batches:
            for offset in range(max(batch.first_offset, self.start_offset), batch.last_offset + 1):
                self._apply(self.records[offset], batch.type_at(offset), now_ms, lock_duration_ms)
        self._advance_start()

    def _apply(self, record: InFlightRecord, kind: int, now_ms: int, lock_ms: int) -> None:
        if kind == AcknowledgeType.ACCEPT:
            self._finish(record, RecordState.ACKNOWLEDGED)
        elif kind in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
            self._finish(record, RecordState.ARCHIVED)
        elif kind == AcknowledgeType.RELEASE:
            self._release(record)
        else:  # RENEW
            record.lock_deadline_ms = now_ms + lock_ms

    def _finish(self, record: InFlightRecord, state: RecordState) -> None:
        record.state = state
        record.member_id = None
        record.lock_deadline_ms = 0

    def _release(self, record: InFlightRecord) -> None:
        """Back to AVAILABLE for another delivery, or ARCHIVED once delivered as often as
        group.share.delivery.count.limit allows."""
        if record.delivery_count >= self.delivery_count_limit:
            self._finish(record, RecordState.ARCHIVED)
        else:
            self._finish(record, RecordState.AVAILABLE)

    def release_member(self, member_id: str) -> int:
        """The member's share session ended or it left the group: what it holds goes back
        for others. Returns how many records it held."""
        released = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                # Fetched but never handed to the application (Kafka's KAFKA-17541): the
                # delivery does not count, and the record is not archived for it.
                record.delivery_count = max(record.delivery_count - 1, 0)
                self._finish(record, RecordState.AVAILABLE)
                released += 1
        self._advance_start()
        return released

    def expire_locks(self, now_ms: int) -> int:
        """Release the records whose acquisition lock ran out; returns how many."""
        expired = 0
        for record in self.records.values():
            if record.state is RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._release(record)
                expired += 1
        if expired:
            self._advance_start()
        return expired

    def next_lock_deadline(self) -> int | None:
        deadlines = [
            record.lock_deadline_ms
            for record in self.records.values()
            if record.state is RecordState.ACQUIRED
        ]
        return min(deadlines) if deadlines else None

    def _advance_start(self) -> None:
        offset = self.start_offset
        records = self.records
        while offset < self.end_offset:
            record = records.get(offset)
            if record is not None and record.state not in (
                RecordState.ACKNOWLEDGED,
                RecordState.ARCHIVED,
            ):
                break
            records.pop(offset, None)
            offset += 1
        self.start_offset = offset

    # --- what is persisted --------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        """The in-flight offsets as runs of one state and delivery count (an acquired
        record as AVAILABLE: a lock does not outlive the broker that holds it)."""
        batches: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records.get(offset)
            if record is None:
                state, count = RecordState.ARCHIVED, 0
            else:
                state = record.state
                if state is RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                count = record.delivery_count
            last = batches[-1] if batches else None
            if (
                last is not None
                and last.last_offset == offset - 1
                and last.delivery_state is state
                and last.delivery_count == count
            ):
                batches[-1] = StateBatch(last.first_offset, offset, state, count)
            else:
                batches.append(StateBatch(offset, offset, state, count))
        return batches

    def delivery_complete_count(self) -> int:
        """How many offsets in flight are done (acknowledged or archived): the start
        offset, the end of the log and this give the group's lag (KIP-1226)."""
        done = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
        return sum(1 for record in self.records.values() if record.state in done)

    def counts(self) -> dict[RecordState, int]:
        counts = dict.fromkeys(RecordState, 0)
        for record in self.records.values():
            counts[record.state] += 1
        return counts


def _ranges(offsets: list[int], records: dict[int, InFlightRecord]) -> list[AcquiredRange]:
    ranges: list[AcquiredRange] = []
    for offset in offsets:
        count = records[offset].delivery_count
        last = ranges[-1] if ranges else None
        if last is not None and last.last_offset == offset - 1 and last.delivery_count == count:
            ranges[-1] = AcquiredRange(last.first_offset, offset, count)
        else:
            ranges.append(AcquiredRange(offset, offset, count))
    return ranges


class _AbortTracker:
    """Which transactional batches belong to aborted transactions, walking batches in
    offset order: a producer's batches from its aborted transaction's first offset up to
    its ABORT marker."""

    def __init__(self, aborted: Sequence[AbortedTransaction] | None) -> None:
        self._pending = sorted(aborted or (), key=lambda txn: txn.first_offset)
        self._open: set[int] = set()

    def drops(self, batch: BatchHeader) -> bool:
        while self._pending and self._pending[0].first_offset <= batch.last_offset:
            self._open.add(self._pending.pop(0).producer_id)
        if not batch.is_transactional or batch.producer_id not in self._open:
            return False
        if batch.is_control:
            self._open.discard(batch.producer_id)  # the ABORT marker ends it
        return True
