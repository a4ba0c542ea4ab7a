"""A transactional id's state as its record in `__transaction_state` (Kafka's
TransactionLogKey / TransactionLogValue, protocol/coordinator_records.py), and the
replay of a partition of that topic: the last record of an id is its state, a tombstone
(null value) removes an id that expired."""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

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


class TransactionLogState(Protocol):
    """What a replay changes: its owner's view of the transactional ids."""

    def transaction_changed(
        self, transactional_id: str, metadata: TransactionMetadata | None, offset: int
    ) -> None:
        """The id's state from the record at log `offset` (None: the id expired)."""
        ...

    def skipped(self, offset: int, key: Key, value_version: int | None) -> None:
        """The record at `offset` was not applied: its key type (value_version None) or
        its value version is not one this broker knows."""
        ...


class TransactionLogReplay:
    """One `__transaction_state` partition replayed in log order into `state` (it is
    never written inside a transaction, so markers mean nothing here)."""

    def __init__(self, state: TransactionLogState) -> None:
        self._state = state

    def replay(self, offset: int, key: bytes, value: bytes | None) -> None:
        decoded = decode_key(key, TRANSACTION_STATE_TOPIC)
        if not isinstance(decoded, TransactionLogKey):
            self._state.skipped(offset, decoded, None)
            return
        transactional_id = decoded.transactional_id
        stored = decode_value(decoded, value)
        if stored is None:
            self._state.transaction_changed(transactional_id, None, offset)
        elif isinstance(stored, UnknownValue):
            self._state.skipped(offset, decoded, stored.version)
        else:
            assert isinstance(stored, TransactionLogValue)
            self._state.transaction_changed(
                transactional_id, metadata_of(transactional_id, stored), offset
            )
