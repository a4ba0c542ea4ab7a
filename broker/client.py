"""A Kafka protocol client: kio requests out, kio responses back, over one connection.

The framing is protocol/client_wire.py's; this module only moves its frames. The
asyncio `Client` is for code that runs inside the broker's loop (the replica fetcher,
the controller): several requests may be in flight, each answer is matched to its
request by correlation id. `BlockingClient` is the same over a plain blocking socket,
for the CLI tools and tests, which send one request and wait for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING, Any

from brook.protocol.client_wire import (
    SIZE,
    InvalidResponseError,
    decode_response,
    encode_request,
    frame_size,
    peek_correlation_id,
    response_type_of,
)

if TYPE_CHECKING:
    from .security.client_security import ClientSecurity

__all__ = ["BlockingClient", "Client", "ConnectionClosedError", "InvalidResponseError"]


class ConnectionClosedError(ConnectionError):
    """The broker closed the connection before answering every request sent."""


class Client:
    """One asyncio connection to a broker, with any number of requests in flight."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str | None
    ) -> None:
        self.client_id = client_id
        self._reader = reader
        self._writer = writer
        self._correlation_id = 0
        # Correlation id -> the response type expected and the future awaiting it.
        self._pending: dict[int, tuple[type, asyncio.Future[Any]]] = {}
        self._failure: BaseException | None = None
        self._receiver = asyncio.get_running_loop().create_task(self._receive_loop())

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        client_id: str | None = "brook",
        security: ClientSecurity | None = None,
    ) -> Client:
        """A connection to a broker; with `security` (the inter-broker listener's), over
        TLS and/or authenticated by SASL before it is handed out."""
        if security is None:
            reader, writer = await asyncio.open_connection(host, port)
            return cls(reader, writer, client_id)
        reader, writer = await asyncio.open_connection(
            host,
            port,
            ssl=security.ssl_context,
            server_hostname=host if security.ssl_context is not None else None,
        )
        client = cls(reader, writer, client_id)
        if security.sasl is not None:
            from .security.sasl_client import authenticate

            try:
                await authenticate(client, security.sasl)
            except BaseException:
                await client.close()
                raise
        return client

    async def request(self, request: Any) -> Any:
        """Send `request` and return the body of its response."""
        future = self.send(request)
        return await future

    def send(self, request: Any) -> asyncio.Future[Any]:
        """Send `request` now; the future resolves to the body of its response."""
        if self._failure is not None:
            raise ConnectionClosedError(str(self._failure)) from self._failure
        self._correlation_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[self._correlation_id] = (response_type_of(request), future)
        self._writer.write(encode_request(request, self._correlation_id, self.client_id))
        return future

    async def close(self) -> None:
        self._receiver.cancel()
        self._writer.close()
        with contextlib.suppress(OSError):  # the peer had gone; nothing is left to flush
            await self._writer.wait_closed()
        self._fail(ConnectionClosedError("the client was closed"))

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _receive_loop(self) -> None:
        try:
            while True:
                size = frame_size(await self._reader.readexactly(SIZE.size))
                frame = await self._reader.readexactly(size)
                correlation_id = peek_correlation_id(frame)
                pending = self._pending.pop(correlation_id, None)
                if pending is None:
                    # Kafka answers in order and only what was asked: an unknown id means
                    # the stream cannot be trusted any more.
                    raise InvalidResponseError(
                        f"response to unknown correlation id {correlation_id}"
                    )
                response_type, future = pending
                if not future.done():
                    future.set_result(decode_response(frame, response_type).body)
        except asyncio.IncompleteReadError:
            self._fail(ConnectionClosedError("the broker closed the connection"))
        except OSError as exc:
            # A reset is the broker closing too (Kafka's broker, like Brook, closes a
            # connection whose request it will not serve, and data still unread then makes
            # the close a reset): the waiting requests learn it as such, whichever came first.
            closed = ConnectionClosedError(f"the connection to the broker was lost: {exc}")
            closed.__cause__ = exc
            self._fail(closed)
            self._writer.close()
        except InvalidResponseError as exc:
            self._fail(exc)
            self._writer.close()

    def _fail(self, exc: BaseException) -> None:
        self._failure = self._failure or exc
        pending, self._pending = self._pending, {}
        for _, future in pending.values():
            if not future.done():
                future.set_exception(exc)


class BlockingClient:
    """One blocking socket connection to a broker, one request at a time (or several
    sent with `send` and read back in order with `receive`)."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str | None = "brook",
        timeout: float | None = 15,
        security: ClientSecurity | None = None,
    ) -> None:
        """A connection; with `security`, over TLS and/or logged in by SASL before use
        (SaslAuthenticationError, ssl.SSLError or OSError when that fails)."""
        sock = socket.create_connection((host, port), timeout=timeout)
        if security is not None and security.ssl_context is not None:
            try:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        self.sock = sock
        self.client_id = client_id
        self.correlation_id = 0
        if security is not None and security.sasl is not None:
            from .security.sasl_client import authenticate_blocking

            try:
                authenticate_blocking(self, security.sasl)
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any) -> int:
        """Send `request`; return its correlation id."""
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, self.correlation_id, self.client_id))
        return self.correlation_id

    def receive_frame(self) -> bytes:
        """The next response frame on the connection (the bytes after its size)."""
        return self._exactly(frame_size(self._exactly(SIZE.size)))

    def receive_with_id(self, response_type: type) -> tuple[int, Any]:
        """The correlation id and body of the next response on the connection."""
        response = decode_response(self.receive_frame(), response_type)
        return response.correlation_id, response.body

    def receive(self, response_type: type) -> Any:
        return self.receive_with_id(response_type)[1]

    def request(self, request: Any) -> Any:
        """Send `request` and return the body of its response."""
        correlation_id = self.send(request)
        answered, body = self.receive_with_id(response_type_of(request))
        if answered != correlation_id:
            raise InvalidResponseError(
                f"response to correlation id {answered}, expected {correlation_id}"
            )
        return body

    def _exactly(self, count: int) -> bytes:
        # Into one buffer of the final size: a Fetch answer can be many megabytes.
        buffer = bytearray(count)
        view = memoryview(buffer)
        received = 0
        while received < count:
            got = self.sock.recv_into(view[received:])
            if not got:
                raise ConnectionClosedError("the broker closed the connection")
            received += got
        return bytes(buffer)
