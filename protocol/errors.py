"""Kafka's errors as a class hierarchy, named after Kafka's own exceptions.

Code anywhere below the broker raises these; the API handlers turn them into the
error code of the response. The numeric codes come from kio's `ErrorCode`, which is
generated from Kafka's own message definitions.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class KafkaError(Exception):
    """An error that a Kafka broker reports to a client with an error code."""

    error_code: ErrorCode = ErrorCode.unknown_server_error

    def __init__(self, message: str = "") -> None:
        super().__init__(message or self.error_code.name)
        self.message = message


class CorruptRecordError(KafkaError):
    """CORRUPT_MESSAGE: a batch failed its CRC or its framing is damaged."""

    error_code = ErrorCode.corrupt_message


class InvalidRecordError(KafkaError):
    """INVALID_RECORD: a batch is well framed but breaks the record format's rules."""

    error_code = ErrorCode.invalid_record


class RecordTooLargeError(KafkaError):
    """MESSAGE_TOO_LARGE: a batch exceeds max.message.bytes."""

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


class InvalidConfigError(KafkaError):
    error_code = ErrorCode.invalid_config


class TopicDeletionDisabledError(KafkaError):
    error_code = ErrorCode.topic_deletion_disabled


class NotEnoughReplicasError(KafkaError):
    """NOT_ENOUGH_REPLICAS: acks=all with fewer in-sync replicas than min.insync.replicas."""

    error_code = ErrorCode.not_enough_replicas


class InvalidTimestampError(KafkaError):
    error_code = ErrorCode.invalid_timestamp


class OffsetOutOfRangeError(KafkaError):
    error_code = ErrorCode.offset_out_of_range


class UnknownTopicOrPartitionError(KafkaError):
    error_code = ErrorCode.unknown_topic_or_partition


class PolicyViolationError(KafkaError):
    """POLICY_VIOLATION: a request the broker's limits refuse (e.g. too many partitions)."""

    error_code = ErrorCode.policy_violation
