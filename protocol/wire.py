"""Request and response framing: size prefix, headers, and bodies through kio.

No I/O happens here: the broker hands in a frame's bytes and gets back the bytes of
the response. Request header v1 (non-flexible APIs) and v2 (flexible), response
header v0 and v1, are chosen by the schema of the API version, as Kafka does
(ApiVersions keeps response header v0 at every version).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from functools import cache
from typing import Any, NamedTuple, Protocol

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.protocol import ResponsePayload

from .api_table import SERVED, ApiKey, VersionRange, request_type, response_type
from .compiled_writer import compiled_writer
from .errors import InvalidRequestError, UnsupportedVersionError
from .length_bounds import check_lengths

SIZE = struct.Struct(">i")
FIXED_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id


class RequestFrame(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # a kio request entity


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """The api key, version and correlation id, readable even for unknown APIs."""
    if len(frame) < FIXED_HEADER.size:
        raise InvalidRequestError(f"request of {len(frame)} bytes is shorter than a header")
    return FIXED_HEADER.unpack_from(frame, 0)


@cache
def reader_of(entity_type: type) -> Any:
    """kio's reader of a message type, built once (server and client side share it)."""
    return entity_reader(entity_type)


@cache
def writer_of(entity_type: type) -> Any:
    """kio's writer of a message type, built once (server and client side share it)."""
    return entity_writer(entity_type)


def decode_request(frame: bytes, table: Mapping[ApiKey, VersionRange] = SERVED) -> RequestFrame:
    """Parse the header and body of a request for a served API version.

    Raises UnsupportedVersionError for an API or version `table` does not serve (Brook's
    own, or its cut to an emulated Kafka release; the caller answers ApiVersions with the
    supported list and closes for others), and InvalidRequestError for bytes that do not
    parse.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    # The int finds its ApiKey entry (an IntEnum hashes and compares as its value) and an
    # unknown key gets None, where ApiKey(api_key) would raise: the ignore says only that.
    served = table.get(api_key)  # type: ignore[call-overload]
    if served is None or not served.serves(api_version):
        raise UnsupportedVersionError(f"API key {api_key} version {api_version} is not served")
    try:
        body_type = request_type(api_key, api_version)
    except OSError as exc:
        # kio imports a version's schema module on first use, which needs a file
        # descriptor; at the open-file limit that fails and the request cannot be read.
        raise InvalidRequestError(
            f"cannot load the schema of {ApiKey(api_key).name} v{api_version}: {exc}"
        ) from exc
    # As a plain type: mypy does not take a dataclass's class object as Hashable (for cache).
    header_type: type = body_type.__header_schema__
    try:
        header, header_size = reader_of(header_type)(frame, 0)
        # kio's reader sizes an array by its length before reading it: a lying length
        # would abort the process, so every length is checked against the bytes left.
        check_lengths(body_type, frame, header_size)
        body, _ = reader_of(body_type)(frame, header_size)
    except Exception as exc:  # kio's native reader raises several types on bad input
        raise InvalidRequestError(
            f"cannot parse {ApiKey(api_key).name} v{api_version} request: {exc}"
        ) from exc
    # Bytes after the body are ignored, as Kafka's parser does: librdkafka sends a
    # byte more than the schema in some versions (e.g. Metadata v12).
    return RequestFrame(api_key, api_version, correlation_id, header.client_id, body)


def read_client_id(frame: bytes) -> str | None:
    """The client id of any request (header v1 layout holds for every version)."""
    header: RequestHeaderV1
    try:
        header, _ = reader_of(RequestHeaderV1)(frame, 0)
    except Exception:
        return None
    return header.client_id


def encode_response(correlation_id: int, response: ResponsePayload) -> bytes:
    """A response as it goes on the wire: size, header, body (lazy record sets read)."""
    return b"".join(
        chunk if isinstance(chunk, bytes | memoryview) else bytes(chunk)
        for chunk in encode_response_chunks(correlation_id, response)
    )


class LazyBytes(Protocol):
    """Bytes read only when they are sent: a record set that stays in its segment file
    (storage.file_records.FileRegion) until the connection streams it."""

    def __len__(self) -> int: ...

    def __bytes__(self) -> bytes: ...

    def read(self, offset: int, size: int) -> bytes:
        """Exactly min(size, len - offset) bytes from `offset`; raises OSError when
        they can no longer be read (the file was truncated or removed meanwhile)."""
        ...


Chunk = bytes | memoryview | LazyBytes

# Byte fields at least this long (record sets) are passed through as chunks of their own.
_PASS_THROUGH_SIZE = 64 * 1024


class _Chunks:
    """The sink a response is compiled into (compiled_writer.Sink): small writes go into
    one buffer, and large byte fields (the record sets of a Fetch response) pass through
    untouched, so that a response costs no copy of its records before the socket. A lazy
    record set passes through as it is (read when sent), unless it is small: then it is
    read now, into the buffer."""

    __slots__ = ("chunks", "current")

    def __init__(self) -> None:
        self.chunks: list[Chunk] = []
        # Never replaced: the compiled writer keeps it in a local (emptied instead).
        self.current = bytearray()

    def blob(self, data: bytes | bytearray | memoryview | LazyBytes) -> None:
        if len(data) >= _PASS_THROUGH_SIZE and not isinstance(data, bytearray):
            if self.current:
                self.chunks.append(bytes(self.current))
                self.current.clear()
            self.chunks.append(data)
        elif isinstance(data, bytes | bytearray | memoryview):
            self.current += data
        else:
            self.current += bytes(data)

    def finish(self) -> list[Chunk]:
        if self.current:
            self.chunks.append(bytes(self.current))
        return self.chunks


def encode_response_chunks(correlation_id: int, response: ResponsePayload) -> list[Chunk]:
    """A response as it goes on the wire, as buffers to write one after the other: the
    size, header and fields, with each large record set a buffer of its own (not copied)
    or a LazyBytes to stream from its file."""
    body = _Chunks()
    body.current += SIZE.pack(correlation_id)
    if type(response).__header_schema__.__flexible__:
        body.current += b"\x00"  # no tagged fields in the response header
    compiled_writer(type(response))(body, response)
    chunks = body.finish()
    first = chunks[0]
    assert isinstance(first, bytes)  # the header, written before any record set
    chunks[0] = SIZE.pack(sum(len(chunk) for chunk in chunks)) + first
    return chunks


def response_class(api_key: int, api_version: int) -> type[ResponsePayload]:
    return response_type(api_key, api_version)
