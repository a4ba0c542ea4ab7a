"""Idempotent producers' state per partition, as Kafka's ProducerStateManager keeps it.

For each producer id: its epoch and the metadata of its last five batches (first and
last sequence, first and last offset). A batch is checked against it before it is
written: a retried batch that matches one of the five gets its original offsets back
instead of being written twice; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an
older epoch INVALID_PRODUCER_EPOCH. The state is rebuilt from the log's batch headers
when the log opens, so it survives a restart.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.record_batch import BatchHeader

# Kafka remembers this many batches per producer and partition (max.in.flight is 5).
BATCHES_TO_REMEMBER = 5
INT32_MAX = 2**31 - 1


class OutOfOrderSequenceError(KafkaError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(KafkaError):
    error_code = ErrorCode.invalid_producer_epoch


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_REMEMBER))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else -1

    def duplicate_of(self, header: BatchHeader) -> BatchMetadata | None:
        for batch in self.batches:
            if (batch.first_sequence, batch.last_sequence) == (
                header.base_sequence,
                header.last_sequence,
            ):
                return batch
        return None


def _next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


class ProducerAppendInfo:
    """What one append changes in one producer's state (Kafka's ProducerAppendInfo).

    The append's batches are checked and collected here; the manager takes them only
    once the append is written (ProducerStateManager.update), so an append that is
    refused or fails to write leaves the state as it was.
    """

    def __init__(
        self, partition_name: str, producer_id: int, current: ProducerStateEntry | None
    ) -> None:
        self.partition_name = partition_name
        self.producer_id = producer_id
        self._current = current
        self.updated: ProducerStateEntry | None = None

    def append(self, header: BatchHeader) -> None:
        """Check a batch (whose offsets are assigned) against the state so far, and add it."""
        entry = self.updated if self.updated is not None else self._current
        if header.is_control:
            self._append_end_txn_marker(entry, header)
            return
        _check(self.partition_name, entry, header)
        if entry is None or header.producer_epoch > entry.producer_epoch:
            self.updated = ProducerStateEntry(header.producer_id, header.producer_epoch)
        elif self.updated is None:
            self.updated = ProducerStateEntry(
                entry.producer_id,
                entry.producer_epoch,
                deque(entry.batches, maxlen=BATCHES_TO_REMEMBER),
            )
        self.updated.batches.append(_metadata(header))

    def _append_end_txn_marker(self, entry: ProducerStateEntry | None, header: BatchHeader) -> None:
        """A transaction marker (written by a coordinator) carries no sequence: only
        its epoch is checked, and it fences older epochs from then on."""
        if entry is not None and header.producer_epoch < entry.producer_epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {header.producer_id} at partition {self.partition_name}"
                f" is {header.producer_epoch}, which is smaller than the last seen epoch"
                f" {entry.producer_epoch}"
            )
        if entry is None or header.producer_epoch > entry.producer_epoch:
            self.updated = ProducerStateEntry(header.producer_id, header.producer_epoch)


def _metadata(header: BatchHeader) -> BatchMetadata:
    return BatchMetadata(
        header.base_sequence,
        header.last_sequence,
        header.base_offset,
        header.last_offset,
        header.max_timestamp,
    )


def _check(partition_name: str, entry: ProducerStateEntry | None, header: BatchHeader) -> None:
    """Raise Kafka's error if the batch does not follow the producer's last one."""
    if entry is None:
        # A producer we hold no state for must start at sequence 0 (its state may
        # also have gone with deleted segments; then the client resets itself).
        if header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {header.producer_id} at"
                f" partition {partition_name}: {header.base_sequence} (incoming seq."
                " number), no state for this producer (expected 0)"
            )
        return
    if header.producer_epoch < entry.producer_epoch:
        raise InvalidProducerEpochError(
            f"Epoch of producer {header.producer_id} at partition {partition_name}"
            f" is {header.producer_epoch}, which is smaller than the last seen epoch"
            f" {entry.producer_epoch}"
        )
    if header.producer_epoch > entry.producer_epoch:
        if header.base_sequence != 0:
            raise OutOfOrderSequenceError(
                f"Invalid sequence number for new epoch of producer {header.producer_id}"
                f" at partition {partition_name}: {header.producer_epoch} (request"
                f" epoch), {header.base_sequence} (seq. number), {entry.producer_epoch}"
                " (current producer epoch)"
            )
        return
    expected = _next_sequence(entry.last_sequence)
    if header.base_sequence != expected:
        raise OutOfOrderSequenceError(
            f"Out of order sequence number for producer {header.producer_id} at partition"
            f" {partition_name}: {header.base_sequence} (incoming seq. number),"
            f" {entry.last_sequence} (current end sequence number)"
        )


class ProducerStateManager:
    def __init__(self, partition_name: str) -> None:
        self.partition_name = partition_name
        self.producers: dict[int, ProducerStateEntry] = {}

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The earlier append of this very batch, if the producer is retrying it."""
        entry = self.producers.get(header.producer_id)
        if entry is None or entry.producer_epoch != header.producer_epoch or header.is_control:
            return None
        return entry.duplicate_of(header)

    def prepare_update(self, producer_id: int) -> ProducerAppendInfo:
        """Start collecting one append's batches of a producer (Kafka's prepareUpdate)."""
        return ProducerAppendInfo(self.partition_name, producer_id, self.producers.get(producer_id))

    def update(self, append_info: ProducerAppendInfo) -> None:
        """Take an append's changes, once it is written."""
        if append_info.updated is not None:
            self.producers[append_info.producer_id] = append_info.updated

    def rebuild(self, headers: Iterable[BatchHeader]) -> None:
        """Replay the batch headers of the log, oldest first (they were checked when
        they were appended)."""
        self.producers.clear()
        for header in headers:
            if header.producer_id < 0:
                continue
            entry = self.producers.get(header.producer_id)
            if entry is None or header.producer_epoch > entry.producer_epoch:
                entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
                self.producers[header.producer_id] = entry
            if not header.is_control:  # a marker moves the epoch only
                entry.batches.append(_metadata(header))

    def truncate_to(self, headers: Iterable[BatchHeader]) -> None:
        """After a truncation, the state is what the remaining log says."""
        self.rebuild(headers)
