"""The one request a tool needs that confluent-kafka does not expose: OffsetDelete.

librdkafka has DeleteConsumerGroupOffsets, but the Python binding does not offer it,
so `brook groups --delete-offsets` sends FindCoordinator v1 and OffsetDelete v0 itself,
encoded with kio (the same message types the broker uses) by broker/client.py. Only
PLAINTEXT listeners are reachable this way; the caller refuses other security protocols.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from brook.broker.client import BlockingClient, ConnectionClosedError, InvalidResponseError

from .common import ToolError, split_bootstrap

CLIENT_ID = "brook-groups"
# Errors after which asking for the coordinator again can succeed (Kafka retries these).
COORDINATOR_RETRIABLE = frozenset(
    {
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)
RETRY_BACKOFF_S = 0.2
# What an operator should read for the errors OffsetDelete answers with.
ERROR_TEXTS = {
    ErrorCode.group_id_not_found: "the group does not exist",
    ErrorCode.non_empty_group: "the group is not empty",
    ErrorCode.group_subscribed_to_topic: "the group's members are subscribed to the topic",
    ErrorCode.unknown_topic_or_partition: "unknown topic or partition",
    ErrorCode.invalid_group_id: "the group id is not valid",
    ErrorCode.group_authorization_failed: "not authorized to access the group",
    ErrorCode.topic_authorization_failed: "not authorized to access the topic",
    ErrorCode.coordinator_not_available: "the group coordinator is not available",
    ErrorCode.coordinator_load_in_progress: "the group coordinator is still loading",
    ErrorCode.not_coordinator: "the broker is not the group's coordinator",
}


def describe_code(code: ErrorCode) -> str:
    """`the group is not empty (NON_EMPTY_GROUP)`: a Kafka error code for one line."""
    name = code.name.upper()
    text = ERROR_TEXTS.get(code)
    return f"{text} ({name})" if text else name


class _Connection:
    """A BlockingClient whose failures read as one line for an operator."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        try:
            self.client = BlockingClient(host, port, CLIENT_ID, timeout)
        except OSError as exc:
            raise ToolError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None

    def close(self) -> None:
        self.client.close()

    def request(self, request: Any) -> Any:
        try:
            return self.client.request(request)
        except ConnectionClosedError:
            # Kafka closes the connection on a request it does not serve.
            raise ToolError(
                "the broker closed the connection (does it serve OffsetDelete?)"
            ) from None
        except TimeoutError:
            raise ToolError("no answer from the broker in time") from None
        except OSError as exc:
            raise ToolError(f"connection to the broker failed: {exc.strerror or exc}") from None
        except InvalidResponseError as exc:
            raise ToolError(f"cannot read the broker's answer: {exc}") from None


def _connect_any(bootstrap: str, timeout: float) -> _Connection:
    """A connection to the first bootstrap server that accepts one."""
    failure: ToolError | None = None
    for host, port in split_bootstrap(bootstrap):
        try:
            return _Connection(host, port, timeout)
        except ToolError as exc:
            failure = exc
    assert failure is not None
    raise failure


def _find_coordinator(bootstrap: str, group: str, timeout: float) -> tuple[str, int]:
    from kio.schema.find_coordinator.v1.request import FindCoordinatorRequest

    connection = _connect_any(bootstrap, timeout)
    try:
        response = connection.request(FindCoordinatorRequest(key=group))
    finally:
        connection.close()
    if response.error_code != ErrorCode.none:
        raise _CoordinatorError(response.error_code)
    return response.host, response.port


class _CoordinatorError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


def delete_offsets(
    bootstrap: str, group: str, partitions: list[tuple[str, int]], timeout: float
) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
    """OffsetDelete for `partitions` of `group`: the group-level error and one per partition."""
    from kio.schema.offset_delete.v0.request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )

    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = OffsetDeleteRequest(
        group_id=group,
        topics=tuple(
            OffsetDeleteRequestTopic(
                name=topic,
                partitions=tuple(
                    OffsetDeleteRequestPartition(partition_index=p) for p in sorted(indexes)
                ),
            )
            for topic, indexes in sorted(by_topic.items())
        ),
    )
    deadline = time.monotonic() + timeout
    while True:
        try:
            host, port = _find_coordinator(bootstrap, group, timeout)
            connection = _Connection(host, port, timeout)
            try:
                response = connection.request(request)
            finally:
                connection.close()
            code = response.error_code
        except _CoordinatorError as exc:
            code = exc.code
        if code not in COORDINATOR_RETRIABLE or time.monotonic() >= deadline:
            break
        time.sleep(RETRY_BACKOFF_S)  # the coordinator is loading or has moved
    if code != ErrorCode.none:
        return code, {}
    return code, {
        (topic.name, partition.partition_index): partition.error_code
        for topic in response.topics
        for partition in topic.partitions
    }
