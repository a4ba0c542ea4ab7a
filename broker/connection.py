"""One client connection: framing, dispatch in arrival order, responses in request order.

Requests are parsed and handed to their handler as soon as their bytes arrive, so that
pipelined requests change state in the order they were sent. A handler that must wait
(a long-polling Fetch, a Produce waiting for acks) returns an awaitable; its response
slot waits in the queue, and responses behind it are held until it is written, since
Kafka clients match responses to requests by order as well as correlation id.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from brook.protocol.api_table import ApiKey
from brook.protocol.wire import (
    InvalidRequestError,
    UnsupportedVersionError,
    decode_request,
    encode_response,
    peek_header,
    read_client_id,
)

from .apis import HANDLERS, NO_RESPONSE
from .apis.api_versions import unsupported_version_response
from .request_context import RequestContext

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger("brook.connection")

# Stop reading from a client that has this many responses outstanding; resume when the
# queue drains, so a client that pipelines without reading cannot grow our memory.
MAX_PENDING_RESPONSES = 512


class _Slot:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: bytes | None = None


class KafkaConnection(asyncio.Protocol):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.max_request_size: int = broker.config["socket.request.max.bytes"]
        self.buffer = bytearray()
        self.pending: deque[_Slot] = deque()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.reading_paused = False
        self.writing_paused = False
        self.tasks: set[asyncio.Task[Any]] = set()

    # --- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.broker.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        for task in list(self.tasks):
            task.cancel()

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while not self.closed:
            if len(buffer) < 4:
                return
            size = int.from_bytes(buffer[:4], "big", signed=True)
            if size < 0 or size > self.max_request_size:
                log.warning(
                    "Closing connection from %s: request of %d bytes is larger than"
                    " socket.request.max.bytes=%d",
                    self.peer,
                    size,
                    self.max_request_size,
                )
                self.close()
                return
            if len(buffer) < 4 + size:
                return
            with memoryview(buffer) as view:
                frame = bytes(view[4 : 4 + size])
            del buffer[: 4 + size]
            self._handle_frame(frame)

    # --- dispatch -----------------------------------------------------------------------

    def _handle_frame(self, frame: bytes) -> None:
        try:
            request = decode_request(frame)
        except UnsupportedVersionError as exc:
            self._answer_unsupported(frame, exc)
            return
        except InvalidRequestError as exc:
            log.warning("Closing connection from %s: %s", self.peer, exc.message)
            self.close()
            return
        ctx = RequestContext(
            broker=self.broker,
            api_key=request.api_key,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            peer=self.peer,
            connection=self,
        )
        try:
            result = HANDLERS[request.api_key](ctx, request.body)
        except Exception:
            log.exception(
                "Closing connection from %s: %s v%d handler failed",
                self.peer,
                ApiKey(request.api_key).name,
                request.api_version,
            )
            self.close()
            return
        if result is NO_RESPONSE:
            return
        slot = _Slot()
        self.pending.append(slot)
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self.tasks.add(task)
            task.add_done_callback(lambda done: self._complete(done, slot, ctx))
            self._update_reading()
        else:
            slot.data = encode_response(request.correlation_id, result)
            self._flush()

    def _complete(self, task: asyncio.Task[Any], slot: _Slot, ctx: RequestContext) -> None:
        self.tasks.discard(task)
        if task.cancelled() or self.closed:
            return
        if task.exception() is not None:
            log.error(
                "Closing connection from %s: %s v%d handler failed",
                self.peer,
                ApiKey(ctx.api_key).name,
                ctx.api_version,
                exc_info=task.exception(),
            )
            self.close()
            return
        response = task.result()
        if response is NO_RESPONSE:
            slot.data = b""
        else:
            slot.data = encode_response(ctx.correlation_id, response)
        self._flush()

    def _answer_unsupported(self, frame: bytes, exc: UnsupportedVersionError) -> None:
        api_key, _version, correlation_id = peek_header(frame)
        if api_key == ApiKey.API_VERSIONS:
            # Kafka answers an ApiVersions it cannot parse with a v0 body listing what
            # it serves, so the client can pick a version both sides know.
            slot = _Slot()
            slot.data = encode_response(correlation_id, unsupported_version_response())
            self.pending.append(slot)
            self._flush()
            return
        log.warning(
            "Closing connection from %s (client %r): %s",
            self.peer,
            read_client_id(frame),
            exc.message,
        )
        self.close()

    def _flush(self) -> None:
        pending = self.pending
        transport = self.transport
        if transport is None or self.closed:
            return
        ready = []
        while pending and pending[0].data is not None:
            data = pending.popleft().data
            if data:
                ready.append(data)
        if ready:
            transport.writelines(ready)
        self._update_reading()

    def _update_reading(self) -> None:
        transport = self.transport
        if transport is None or self.closed:
            return
        should_pause = self.writing_paused or len(self.pending) >= MAX_PENDING_RESPONSES
        if should_pause and not self.reading_paused:
            transport.pause_reading()
            self.reading_paused = True
        elif not should_pause and self.reading_paused:
            self.reading_paused = False
            transport.resume_reading()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.transport is not None:
            self.transport.close()
