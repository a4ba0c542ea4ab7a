"""A minimal Kafka protocol client over a plain socket, for requests no client library
lets a test shape by hand (fetch session epochs, forgotten topics, exact versions).

It encodes and decodes with kio, the same message types as the broker, but over a
real socket to a real broker process or thread.
"""

from __future__ import annotations

import io
import socket
import struct
import sys
from typing import Any

from kio.serial import entity_reader, entity_writer

from brook.protocol.api_table import SERVED, ApiKey


class RawClient:
    def __init__(self, port: int, client_id: str = "raw-test-client") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=15)
        self.client_id = client_id
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any) -> int:
        """Send a kio request entity with the header its version needs."""
        self.correlation_id += 1
        header_type = request.__header_schema__
        fields = {
            "request_api_key": request.__api_key__,
            "request_api_version": request.__version__,
            "correlation_id": self.correlation_id,
            "client_id": self.client_id,
        }
        buffer = io.BytesIO()
        entity_writer(header_type)(buffer, header_type(**fields))
        entity_writer(type(request))(buffer, request)
        payload = buffer.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)
        return self.correlation_id

    def receive(self, response_type: type) -> Any:
        return self.receive_with_id(response_type)[1]

    def receive_with_id(self, response_type: type) -> tuple[int, Any]:
        """The correlation id and body of the next response on the connection."""
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        data = self._recv_exactly(size)
        (correlation_id,) = struct.unpack_from(">i", data, 0)
        offset = 4
        if response_type.__header_schema__.__flexible__:
            offset += 1  # empty tagged fields of response header v1
        response, _ = entity_reader(response_type)(data, offset)
        return correlation_id, response

    def request(self, request: Any) -> Any:
        from kio.index import load_response_from_request

        self.send(request)
        return self.receive(load_response_from_request(request))

    def _recv_exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data


def make(entity_type: type, **fields: Any) -> Any:
    """An entity of one version from a superset of fields (those it lacks are dropped)."""
    known = entity_type.__dataclass_fields__
    return entity_type(**{name: value for name, value in fields.items() if name in known})


def nested(request_type: type, name: str) -> type:
    """A nested entity type of the same API version as `request_type`."""
    return getattr(sys.modules[request_type.__module__], name)


def versions(api: ApiKey) -> list[int]:
    """Every version of an API that Brook serves."""
    served = SERVED[api]
    return list(range(served.min_version, served.max_version + 1))


def produce_request(
    topic: str, partition: int, records: bytes, version: int = 9, acks: int = -1
) -> Any:
    """A Produce request of one version carrying `records` to one partition."""
    import datetime

    from kio.index import load_request_schema

    request_type = load_request_schema(ApiKey.PRODUCE, version)
    partition_data = make(
        nested(request_type, "PartitionProduceData"), index=partition, records=records
    )
    return make(
        request_type,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            make(
                nested(request_type, "TopicProduceData"),
                name=topic,
                partition_data=(partition_data,),
            ),
        ),
    )
