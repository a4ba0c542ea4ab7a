"""The errors a coordinator answers when it cannot serve a key, as Kafka's exceptions."""

from __future__ import annotations

from brook.protocol.errors import ErrorCode, KafkaError


class NotCoordinatorError(KafkaError):
    """NOT_COORDINATOR: this broker does not (or no longer) hold the key's partition."""

    error_code = ErrorCode.not_coordinator


class CoordinatorNotAvailableError(KafkaError):
    """COORDINATOR_NOT_AVAILABLE: the coordinator cannot serve now; the client retries."""

    error_code = ErrorCode.coordinator_not_available


class CoordinatorLoadInProgressError(KafkaError):
    """COORDINATOR_LOAD_IN_PROGRESS: the key's partition is still being replayed."""

    error_code = ErrorCode.coordinator_load_in_progress
