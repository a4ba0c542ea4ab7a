"""A transactional id's state as its record in `__transaction_state` (Kafka's
TransactionLogKey / TransactionLogValue, protocol/coordinator_records.py), and the
replay of a partition of that topic: the last record of an id is its state, a tombstone
(null value) removes an id that expired."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from brook.protocol.coordinator_records import (
    TRANSACTION_STATE_TOPIC,
    CoordinatorRecordError,
    Key,
    TransactionLogKey,
    TransactionLogValue,
    TxnPartitions,
    UnknownValue,
    decode_key,
    decode_value,
)

from .transaction_metadata import TransactionMetadata, TransactionState


def value_of(metadata: TransactionMetadata) -> TransactionLogValue:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(metadata.partitions):
        by_topic[topic].append(partition)
    partitions = (
        None
        if metadata.state is TransactionState.EMPTY
        else [TxnPartitions(topic=t, partition_ids=ids) for t, ids in by_topic.items()]
    )
    return TransactionLogValue(
        producer_id=metadata.producer_id,
        previous_producer_id=metadata.previous_producer_id,
        next_producer_id=metadata.next_producer_id,
        producer_epoch=metadata.producer_epoch,
        transaction_timeout_ms=metadata.txn_timeout_ms,
        transaction_status=int(metadata.state),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=metadata.txn_last_update_timestamp,
        transaction_start_timestamp_ms=metadata.txn_start_timestamp,
        client_transaction_version=metadata.client_transaction_version,
    )


def metadata_of(transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
    """The id's state; CoordinatorRecordError for a status Kafka does not have."""
    try:
        state = TransactionState(value.transaction_status)
    except ValueError:
        raise CoordinatorRecordError(
            f"transactional id {transactional_id}: {value.transaction_status} is not a"
            " transaction status"
        ) from None
    partitions = frozenset(
        (entry.topic, partition)
        for entry in value.transaction_partitions or ()
        for partition in entry.partition_ids
    )
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        txn_timeout_ms=value.transaction_timeout_ms,
        state=state,
        partitions=partitions,
        txn_start_timestamp=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        client_transaction_version=value.client_transaction_version,
    )


# Told of a record not applied: its log offset, its key, and its value version (None when
# the key's type is not one this broker knows).
Skipped = Callable[[int, Key, int | None], None]


def _ignore(offset: int, key: Key, value_version: int | None) -> None:
    pass


class TransactionLogReplay:
    """One `__transaction_state` partition replayed in log order: the state of each
    transactional id (it is never written inside a transaction, so markers mean nothing
    here). Only replay changes `transactions`: the coordinator's operations write
    records, and their effect is the replay of what was written."""

    def __init__(self, on_skipped: Skipped = _ignore) -> None:
        self._on_skipped = on_skipped
        self.transactions: dict[str, TransactionMetadata] = {}
        # The log offset of the record each id's state comes from.
        self.record_offsets: dict[str, int] = {}

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        decoded = decode_key(key, TRANSACTION_STATE_TOPIC)
        if not isinstance(decoded, TransactionLogKey):
            self._on_skipped(offset, decoded, None)
            return
        transactional_id = decoded.transactional_id
        stored = decode_value(decoded, value)
        if stored is None:
            self.transactions.pop(transactional_id, None)
            self.record_offsets.pop(transactional_id, None)
        elif isinstance(stored, UnknownValue):
            self._on_skipped(offset, decoded, stored.version)
        else:
            assert isinstance(stored, TransactionLogValue)
            self.transactions[transactional_id] = metadata_of(transactional_id, stored)
            self.record_offsets[transactional_id] = offset

    def clear(self) -> None:
        self.transactions.clear()
        self.record_offsets.clear()
