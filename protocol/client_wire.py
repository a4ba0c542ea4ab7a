"""Request and response framing from the client's side: the mirror of wire.py.

No I/O happens here. Whatever sends requests to a broker (the replica fetcher, the
controller, the CLI tools, the tests) encodes them with `encode_request` and reads the
answers with `decode_response`, so the framing exists once. A broker's answer is
untrusted input as much as a client's request is: every length in it is checked by
length_bounds before kio's native reader sees it (a lying array length would abort the
process), and anything that does not parse raises InvalidResponseError.

Request header v1 (non-flexible versions) or v2 (flexible) is the one the request's
schema names; response header v0 or v1 likewise by the response's schema (ApiVersions
keeps v0 at every version, as Kafka does).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_from_request
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.static.primitive import i16, i32

from .api_table import ApiKey, response_type
from .compiled_writer import BufferSink, compiled_writer
from .length_bounds import check_lengths
from .wire import reader_of, writer_of

SIZE = struct.Struct(">i")
CORRELATION_ID = struct.Struct(">i")


class InvalidResponseError(Exception):
    """A response frame that is too short, lies about a length, or does not parse."""


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    correlation_id: int
    body: Any  # a kio response entity


def response_type_of(request: Any) -> type:
    """The kio response type that answers `request` (same API key and version)."""
    if request.__api_key__ == ApiKey.CONTROLLED_SHUTDOWN:  # not one of kio's own
        return response_type(request.__api_key__, request.__version__)
    return load_response_from_request(request)


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """A kio request entity as it goes on the wire: size, header, body."""
    header_type = request.__header_schema__
    header = io.BytesIO()
    writer_of(header_type)(
        header,
        header_type(
            request_api_key=request.__api_key__,
            request_api_version=request.__version__,
            correlation_id=correlation_id,
            client_id=client_id,
        ),
    )
    sink = BufferSink()
    frame = sink.current
    frame += b"\x00\x00\x00\x00"  # the size, filled in below
    frame += header.getvalue()
    # The body by the compiled writer: a follower's full fetch names thousands of
    # partitions (the header's client id is a legacy string kio writes).
    compiled_writer(type(request))(sink, request)
    SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
    return bytes(frame)


def encode_raw_request(
    api_key: int,
    api_version: int,
    body: bytes,
    correlation_id: int,
    client_id: str | None,
    flexible: bool = False,
) -> bytes:
    """A frame of request header v1 (v2 if `flexible`) followed by `body` as given, for
    any API key and version, served or not: tests build unknown or deliberately broken
    requests on it. v1 is the layout Kafka reads every request's header by before it
    knows the API; v2 adds the tagged fields of flexible versions."""
    header_type = RequestHeaderV2 if flexible else RequestHeaderV1
    buffer = io.BytesIO()
    writer_of(header_type)(
        buffer,
        header_type(
            request_api_key=i16(api_key),
            request_api_version=i16(api_version),
            correlation_id=i32(correlation_id),
            client_id=client_id,
        ),
    )
    payload = buffer.getvalue() + body
    return SIZE.pack(len(payload)) + payload


def frame_size(prefix: bytes) -> int:
    """The size a 4-byte prefix announces for the frame that follows it."""
    size: int = SIZE.unpack(prefix)[0]
    if size < CORRELATION_ID.size:
        raise InvalidResponseError(f"response size {size} is shorter than a response header")
    return size


def peek_correlation_id(frame: bytes | memoryview) -> int:
    """The correlation id of a response frame (after its size), before its type is known."""
    if len(frame) < CORRELATION_ID.size:
        raise InvalidResponseError(f"response of {len(frame)} bytes is shorter than a header")
    correlation_id: int = CORRELATION_ID.unpack_from(frame, 0)[0]
    return correlation_id


def decode_response(frame: bytes, response_type: Any) -> ResponseFrame:
    """The correlation id and body of one response frame (the bytes after its size)."""
    correlation_id = peek_correlation_id(frame)
    offset = CORRELATION_ID.size
    if response_type.__header_schema__.__flexible__:
        # Response header v1 ends with its tagged fields: walk them like any others.
        try:
            offset = check_lengths(response_type.__header_schema__, frame, 0)
        except Exception as exc:
            raise InvalidResponseError(f"cannot parse the response header: {exc}") from exc
    try:
        check_lengths(response_type, frame, offset)
        body, _ = reader_of(response_type)(frame, offset)
    except Exception as exc:  # kio's native reader raises several types on bad input
        raise InvalidResponseError(
            f"cannot parse {response_type.__name__} v{response_type.__version__}: {exc}"
        ) from exc
    return ResponseFrame(correlation_id, body)
