"""A coordinator write that failed, as the error Kafka's coordinators answer with.

The client must look for the coordinator again when this broker cannot write the
partition (it is offline, or no longer leads it), retry when the partition cannot take
the write just now, and learn when its write is too large. Kafka's group coordinator
maps the errors of its appends this way (GroupCoordinatorService, and
GroupMetadataManager before it); OffsetCommit answers INVALID_COMMIT_OFFSET_SIZE where
the other operations answer UNKNOWN_SERVER_ERROR. Kafka's transaction coordinator maps
the failed appends of the transaction log the same way (TransactionStateManager), so that
a producer retries a write lost to a coordinator failover instead of failing for good.
"""

from __future__ import annotations

from brook.protocol.errors import ErrorCode, KafkaError, KafkaStorageError

_NOT_COORDINATOR = {ErrorCode.kafka_storage_error, ErrorCode.not_leader_or_follower}
_NOT_AVAILABLE = {
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append,
    ErrorCode.request_timed_out,
}
_TOO_LARGE = {
    ErrorCode.message_too_large,
    ErrorCode.record_list_too_large,
    ErrorCode.invalid_fetch_size,
}


def as_kafka_error(exc: BaseException) -> KafkaError:
    """A failed append's exception as Kafka's: a file error is a storage error."""
    if isinstance(exc, KafkaError):
        return exc
    if isinstance(exc, OSError):
        return KafkaStorageError(exc.strerror or str(exc))
    raise exc


class CoordinatorWriteError(KafkaError):
    """A coordinator's write that failed, as the error its client is answered with (the
    failure's own message kept for the log)."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def as_coordinator_write_error(
    error: KafkaError, too_large: ErrorCode = ErrorCode.unknown_server_error
) -> KafkaError:
    """`error` when it already is a coordinator's answer (a request that does not fit
    the state), else the coordinator error its write failure maps to."""
    code = coordinator_error(error, too_large)
    if code is error.error_code:
        return error
    return CoordinatorWriteError(code, f"{error.message or error.error_code.name}")


def coordinator_error(
    error: KafkaError, too_large: ErrorCode = ErrorCode.unknown_server_error
) -> ErrorCode:
    code = error.error_code
    if code in _NOT_COORDINATOR:
        return ErrorCode.not_coordinator
    if code in _NOT_AVAILABLE:
        return ErrorCode.coordinator_not_available
    if code in _TOO_LARGE:
        return too_large
    return code
