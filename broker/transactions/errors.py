"""Kafka's errors of the transaction APIs."""

from __future__ import annotations

from brook.protocol.errors import ErrorCode, KafkaError

# The partitions' producer state raises the same Kafka error.
from brook.storage.producer_state import InvalidProducerEpochError as InvalidProducerEpochError


class ConcurrentTransactionsError(KafkaError):
    """The transaction is completing (or a fence is under way): retry shortly."""

    error_code = ErrorCode.concurrent_transactions


class InvalidTxnStateError(KafkaError):
    error_code = ErrorCode.invalid_txn_state


class ProducerFencedError(KafkaError):
    error_code = ErrorCode.producer_fenced


class InvalidProducerIdMappingError(KafkaError):
    error_code = ErrorCode.invalid_producer_id_mapping


class InvalidTransactionTimeoutError(KafkaError):
    error_code = ErrorCode.invalid_transaction_timeout


class TransactionalIdNotFoundError(KafkaError):
    error_code = ErrorCode.transactional_id_not_found
