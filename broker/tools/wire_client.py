"""The one request a tool needs that confluent-kafka does not expose: OffsetDelete.

librdkafka has DeleteConsumerGroupOffsets, but the Python binding does not offer it,
so `brook groups --delete-offsets` sends FindCoordinator v1 and OffsetDelete v0 itself,
encoded with kio (the same message types the broker uses), over a plain socket. Only
PLAINTEXT listeners are reachable this way; the caller refuses other security protocols.
"""

from __future__ import annotations

import io
import socket
import struct
import time
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from brook.protocol.length_bounds import check_lengths

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
    def __init__(self, host: str, port: int, timeout: float) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ToolError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def request(self, request: Any) -> Any:
        from kio.index import load_response_from_request

        self.correlation_id += 1
        header_type = request.__header_schema__
        buffer = io.BytesIO()
        entity_writer(header_type)(
            buffer,
            header_type(
                request_api_key=request.__api_key__,
                request_api_version=request.__version__,
                correlation_id=self.correlation_id,
                client_id=CLIENT_ID,
            ),
        )
        entity_writer(type(request))(buffer, request)
        payload = buffer.getvalue()
        response_type = load_response_from_request(request)
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            size = struct.unpack(">i", self._exactly(4))[0]
            data = self._exactly(size)
        except TimeoutError:
            raise ToolError("no answer from the broker in time") from None
        except OSError as exc:
            raise ToolError(f"connection to the broker failed: {exc.strerror or exc}") from None
        # Response header v0 is the correlation id alone (flexible versions add tags).
        offset = 4 + (1 if response_type.__header_schema__.__flexible__ else 0)
        try:
            # No array length may lie to kio's reader (it would abort this process).
            check_lengths(response_type, data, offset)
            response, _ = entity_reader(response_type)(data, offset)
        except Exception as exc:  # kio raises several types on bad input
            raise ToolError(f"cannot read the broker's answer: {exc}") from None
        return response

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                # Kafka closes the connection on a request it does not serve.
                raise ToolError("the broker closed the connection (does it serve OffsetDelete?)")
            data += chunk
        return data


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
