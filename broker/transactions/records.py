"""The records the transaction coordinator writes: a transactional id's state
(coordinator_state/transaction_log.py has its schema mapping), and the tombstone that
removes an id that expired."""

from __future__ import annotations

from brook.coordinator_state.transaction_log import value_of
from brook.coordinator_state.transaction_metadata import TransactionMetadata
from brook.protocol import coordinator_records as cr

from ..coordinator.records import CoordinatorRecord


def record_of(metadata: TransactionMetadata) -> CoordinatorRecord:
    return CoordinatorRecord(
        cr.encode_key(cr.TransactionLogKey(metadata.transactional_id)),
        cr.encode_value(value_of(metadata)),
    )


def tombstone_of(transactional_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(cr.encode_key(cr.TransactionLogKey(transactional_id)), None)
