"""Kafka's errors of the transaction APIs."""

from __future__ import annotations

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

# The partitions' producer state raises the same Kafka errors: one class each.
from brook.storage.producer_state import InvalidProducerEpochError as InvalidProducerEpochError
from brook.storage.producer_state import InvalidTxnStateError as InvalidTxnStateError


class ConcurrentTransactionsError(KafkaError):
    """The transaction is completing (or a fence is under way): retry shortly."""

    error_code = ErrorCode.concurrent_transactions


class ProducerFencedError(KafkaError):
    error_code = ErrorCode.producer_fenced


class InvalidProducerIdMappingError(KafkaError):
    error_code = ErrorCode.invalid_producer_id_mapping


class InvalidTransactionTimeoutError(KafkaError):
    error_code = ErrorCode.invalid_transaction_timeout


class TransactionalIdNotFoundError(KafkaError):
    error_code = ErrorCode.transactional_id_not_found


class TransactionAbortableError(KafkaError):
    """KIP-890: the transaction cannot go on, but aborting it lets the producer carry on."""

    error_code = ErrorCode.transaction_abortable


# KIP-588 (Kafka 2.7): the versions from which each API answers PRODUCER_FENCED; older
# clients know only INVALID_PRODUCER_EPOCH for a fenced producer.
_PRODUCER_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}


def error_for_version(api_key: int, api_version: int, error: ErrorCode) -> ErrorCode:
    """The error as the request's version can say it."""
    if error is ErrorCode.producer_fenced and api_version < _PRODUCER_FENCED_SINCE.get(
        ApiKey(api_key), 0
    ):
        return ErrorCode.invalid_producer_epoch
    return error
