"""Kafka's errors as a class hierarchy, named after Kafka's own exceptions.

Every error a client can be answered with is a class here, whichever layer raises it
(the storage, the replicas, the coordinators); the API handlers turn them into the error
code of the response. Errors that never reach a client stay with their layer
(storage/errors.py, the ZooKeeper client's, the tools'). The numeric codes come from
kio's `ErrorCode`, which is generated from Kafka's own message definitions.
"""

from __future__ import annotations

from typing import NamedTuple

# Re-exported: the layers above take ErrorCode from here, next to the errors that carry it.
from kio.schema.errors import ErrorCode as ErrorCode


class KafkaError(Exception):
    """An error that a Kafka broker reports to a client with an error code."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.error_code.name)
        self.message = message

    @classmethod
    def with_code(cls, error_code: ErrorCode, message: str = "") -> KafkaError:
        """An error whose code is known only at run time (another broker's answer)."""
        error = cls(message or error_code.name)
        error.error_code = error_code
        return error


class RecordError(NamedTuple):
    """One refused record of a produced batch: its index in the batch and why."""

    batch_index: int
    message: str

    def __str__(self) -> str:
        # Kafka's RecordError.toString, which the INVALID_RECORD message embeds.
        return f"RecordError(batchIndex={self.batch_index}, message='{self.message}')"


class RecordValidationError(KafkaError):
    """Kafka's RecordValidationException: records of a batch broke a per-record rule.

    The produce response carries the per-record errors and, unlike other produce
    errors, the message as its error_message.
    """

    def __init__(self, error_code: ErrorCode, message: str, record_errors: list[RecordError]):
        super().__init__(message)
        self.error_code = error_code
        self.record_errors = record_errors

    @classmethod
    def of(cls, errors: list[tuple[ErrorCode, RecordError]]) -> RecordValidationError:
        """The exception Kafka's processRecordErrors throws for a batch's record errors."""
        record_errors = [error for _, error in errors]
        if any(code == ErrorCode.invalid_timestamp for code, _ in errors):
            return cls(
                ErrorCode.invalid_timestamp,
                "One or more records have been rejected due to invalid timestamp",
                record_errors,
            )
        shown = ", ".join(str(error) for error in record_errors[:3])
        return cls(
            ErrorCode.invalid_record,
            f"One or more records have been rejected due to {len(record_errors)} record"
            f" errors in total, and only showing the first three errors at most: [{shown}]",
            record_errors,
        )


class CorruptRecordError(KafkaError):
    """CORRUPT_MESSAGE: a batch failed its CRC or its framing is damaged."""

    error_code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    """INVALID_RECORD: a batch is well framed but breaks the record format's rules."""

    error_code = ErrorCode.invalid_record


class RecordTooLargeError(KafkaError):
    """MESSAGE_TOO_LARGE: a batch exceeds max.message.bytes (or inflates past the bound)."""

    error_code = ErrorCode.message_too_large


class InvalidRequestError(KafkaError):
    """INVALID_REQUEST: a request that cannot be parsed or breaks the protocol's rules."""

    error_code = ErrorCode.invalid_request


class UnsupportedVersionError(KafkaError):
    error_code = ErrorCode.unsupported_version


class InvalidTopicError(KafkaError):
    error_code = ErrorCode.invalid_topic_exception


class TopicExistsError(KafkaError):
    error_code = ErrorCode.topic_already_exists


class InvalidPartitionsError(KafkaError):
    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(KafkaError):
    error_code = ErrorCode.invalid_replication_factor


class InvalidReplicaAssignmentError(KafkaError):
    error_code = ErrorCode.invalid_replica_assignment


class ReassignmentInProgressError(KafkaError):
    error_code = ErrorCode.reassignment_in_progress


class InvalidConfigError(KafkaError):
    error_code = ErrorCode.invalid_config


class TopicDeletionDisabledError(KafkaError):
    error_code = ErrorCode.topic_deletion_disabled


class NotEnoughReplicasError(KafkaError):
    """NOT_ENOUGH_REPLICAS: acks=all with fewer in-sync replicas than min.insync.replicas."""

    error_code = ErrorCode.not_enough_replicas


class NotEnoughReplicasAfterAppendError(KafkaError):
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND: an acks=all write reached every in-sync replica,
    but the ISR had shrunk below min.insync.replicas by then."""

    error_code = ErrorCode.not_enough_replicas_after_append


class InvalidTimestampError(KafkaError):
    error_code = ErrorCode.invalid_timestamp


class OffsetOutOfRangeError(KafkaError):
    error_code = ErrorCode.offset_out_of_range


class UnknownTopicOrPartitionError(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class PolicyViolationError(KafkaError):
    """POLICY_VIOLATION: a request the broker's limits refuse (e.g. too many partitions)."""

    error_code = ErrorCode.policy_violation


class LeaderNotAvailableError(KafkaError):
    """The partition has no leader yet (a topic just created, an election under way)."""

    error_code = ErrorCode.leader_not_available


class RequestTimedOutError(KafkaError):
    error_code = ErrorCode.request_timed_out


class TopicAuthorizationFailedError(KafkaError):
    error_code = ErrorCode.topic_authorization_failed


class ThrottlingQuotaExceededError(KafkaError):
    """KIP-599: a topic change over the sender's controller_mutation_rate (the request
    versions that take it as an error; older ones are throttled instead)."""

    error_code = ErrorCode.throttling_quota_exceeded


class NotCoordinatorError(KafkaError):
    """NOT_COORDINATOR: this broker does not (or no longer) hold the key's partition."""

    error_code = ErrorCode.not_coordinator


class CoordinatorNotAvailableError(KafkaError):
    """COORDINATOR_NOT_AVAILABLE: the coordinator cannot serve now; the client retries."""

    error_code = ErrorCode.coordinator_not_available


class CoordinatorLoadInProgressError(KafkaError):
    """COORDINATOR_LOAD_IN_PROGRESS: the key's partition is still being replayed."""

    error_code = ErrorCode.coordinator_load_in_progress


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


class FencedLeaderEpochError(KafkaError):
    error_code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpochError(KafkaError):
    error_code = ErrorCode.unknown_leader_epoch


class NotLeaderOrFollowerError(KafkaError):
    error_code = ErrorCode.not_leader_or_follower


class FetchSessionIdNotFoundError(KafkaError):
    error_code = ErrorCode.fetch_session_id_not_found


class InvalidFetchSessionEpochError(KafkaError):
    error_code = ErrorCode.invalid_fetch_session_epoch


class KafkaStorageError(KafkaError):
    """KAFKA_STORAGE_ERROR: an I/O failure on a log dir."""

    error_code = ErrorCode.kafka_storage_error


class RecordBatchTooLargeError(KafkaError):
    """RECORD_LIST_TOO_LARGE: an append larger than the segment size could never fit."""

    error_code = ErrorCode.record_list_too_large


class InconsistentTopicIdError(KafkaError):
    """INCONSISTENT_TOPIC_ID: partition.metadata holds another topic id than requested."""

    error_code = ErrorCode.inconsistent_topic_id


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end offset.

    Kafka reports this to the replica fetcher, which truncates and retries; it is
    never sent to a client, hence the generic code.
    """

    error_code = ErrorCode.unknown_server_error


class OutOfOrderSequenceError(KafkaError):
    error_code = ErrorCode.out_of_order_sequence_number


class InvalidProducerEpochError(KafkaError):
    error_code = ErrorCode.invalid_producer_epoch


class InvalidTxnStateError(KafkaError):
    error_code = ErrorCode.invalid_txn_state


class TransactionCoordinatorFencedError(KafkaError):
    error_code = ErrorCode.transaction_coordinator_fenced


class UnsupportedCompressionTypeError(KafkaError):
    error_code = ErrorCode.unsupported_compression_type
