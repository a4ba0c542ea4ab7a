"""A transactional id's state as its record in `__transaction_state`, in Kafka's schema
(TransactionLogKey / TransactionLogValue, protocol/coordinator_records.py); a null value
(tombstone) removes an id that expired."""

from __future__ import annotations

from collections import defaultdict

from brook.protocol import coordinator_records as cr

from ..coordinator.records import CoordinatorRecord
from .metadata import TransactionMetadata, TransactionState


def record_of(metadata: TransactionMetadata) -> CoordinatorRecord:
    return CoordinatorRecord(
        cr.encode_key(cr.TransactionLogKey(metadata.transactional_id)),
        cr.encode_value(value_of(metadata)),
    )


def tombstone_of(transactional_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(cr.encode_key(cr.TransactionLogKey(transactional_id)), None)


def value_of(metadata: TransactionMetadata) -> cr.TransactionLogValue:
    by_topic: dict[str, list[int]] = defaultdict(list)
    for topic, partition in sorted(metadata.partitions):
        by_topic[topic].append(partition)
    partitions = (
        None
        if metadata.state is TransactionState.EMPTY
        else [cr.TxnPartitions(topic=t, partition_ids=ids) for t, ids in by_topic.items()]
    )
    return cr.TransactionLogValue(
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


def metadata_of(transactional_id: str, value: cr.TransactionLogValue) -> TransactionMetadata:
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
        state=TransactionState(value.transaction_status),
        partitions=partitions,
        txn_start_timestamp=value.transaction_start_timestamp_ms,
        txn_last_update_timestamp=value.transaction_last_update_timestamp_ms,
        previous_producer_id=value.previous_producer_id,
        next_producer_id=value.next_producer_id,
        client_transaction_version=value.client_transaction_version,
    )
