"""The records a coordinator writes and the batches it replays.

A shard speaks in key/value bytes in its topic's schemas (protocol/coordinator_records.py);
the runtime frames them as one v2 batch per write, and hands stored batches back with
what replay needs beyond the records: the producer id and epoch of a transactional
write, and whether the batch is a control batch (a transaction marker).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from brook.protocol import coordinator_records as cr
from brook.protocol.coordinator_records import NO_PRODUCER_EPOCH, ControlRecordType
from brook.protocol.record_batch import (
    NO_PRODUCER_ID,
    Record,
    build_batch,
    decode_records,
    split_batches,
)


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One record a shard writes: a key and a value (None is a tombstone)."""

    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TransactionalProducer:
    """A producer in whose transaction a coordinator writes (TxnOffsetCommit): the
    records take effect only once the transaction's COMMIT marker follows them."""

    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class StoredRecord:
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(slots=True)
class StoredBatch:
    """A batch read back from the partition, as replay sees it."""

    base_offset: int
    next_offset: int
    producer_id: int
    producer_epoch: int
    is_transactional: bool
    is_control: bool
    records: list[StoredRecord] = field(default_factory=list)


def encode_batch(
    records: Sequence[CoordinatorRecord],
    now_ms: int,
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    transactional: bool = False,
    control: bool = False,
) -> bytearray:
    """One batch of the records, stamped with the coordinator's clock; the log assigns
    the offsets when it appends. A transactional batch gets base sequence 0, as Kafka's
    group coordinator writes a transactional offset commit (coordinator appends are not
    sequence-checked)."""
    return bytearray(
        build_batch(
            [Record(i, now_ms, r.key, r.value) for i, r in enumerate(records)],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if transactional and not control else -1,
            transactional=transactional,
            control=control,
        )
    )


def encode_write(
    records: Sequence[CoordinatorRecord], now_ms: int, producer: TransactionalProducer | None
) -> bytearray:
    """The batch of one coordinator write, inside `producer`'s transaction if given."""
    if producer is None:
        return encode_batch(records, now_ms)
    return encode_batch(
        records,
        now_ms,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        transactional=True,
    )


def encode_end_transaction_marker(
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    result: ControlRecordType,
    now_ms: int,
) -> bytearray:
    """A COMMIT or ABORT marker: a transactional control batch of one record, as Kafka's
    EndTransactionMarker writes it (no sequence: markers are not sequenced)."""
    return bytearray(
        build_batch(
            [
                Record(
                    0,
                    now_ms,
                    cr.encode_key(cr.ControlRecordKey(int(result))),
                    cr.encode_value(cr.EndTxnMarker(coordinator_epoch=coordinator_epoch)),
                )
            ],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=True,
            control=True,
        )
    )


def stored_batches(buffer: bytes | bytearray | memoryview) -> Iterator[StoredBatch]:
    """The whole batches of a read, in order; a partial batch at the end is left for the
    next read."""
    for header in split_batches(buffer, allow_partial_tail=True):
        yield StoredBatch(
            base_offset=header.base_offset,
            next_offset=header.next_offset,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            is_transactional=header.is_transactional,
            is_control=header.is_control,
            records=[
                StoredRecord(record.offset, record.key, record.value)
                for record in decode_records(buffer, header)
            ],
        )
