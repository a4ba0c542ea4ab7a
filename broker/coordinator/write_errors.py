"""A coordinator write that failed, as the error Kafka's coordinators answer with.

The client must look for the coordinator again when this broker cannot write the
partition (it is offline, or no longer leads it), retry when the partition cannot take
the write just now, and learn when its write is too large. Kafka's group coordinator
maps the errors of its appends this way (GroupCoordinatorService, and
GroupMetadataManager before it); OffsetCommit answers INVALID_COMMIT_OFFSET_SIZE where
the other operations answer UNKNOWN_SERVER_ERROR.
"""

from __future__ import annotations

from brook.protocol.errors import ErrorCode, KafkaError
from brook.storage.errors import KafkaStorageError

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
