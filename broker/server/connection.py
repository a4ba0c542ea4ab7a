"""One client connection: framing, one request at a time, responses in request order.

As in Kafka, a connection handles one request at a time: a handler that must wait (a
long-polling Fetch, a JoinGroup waiting for the rebalance) holds back the requests
queued behind it until its response is written, so responses go out in request order
and pipelined requests change state in the order they were sent. Requests whose
handler answers at once are handled back to back, as many as have arrived.

Memory is bounded per connection: requests are only handled while the response bytes
waiting in the transport's buffer stay under MAX_UNSENT_BYTES, and a Fetch response's
record sets are not read into memory with it: they stay in their segment files
(storage.file_records.FileRegion) and are streamed, STREAM_PIECE_BYTES at a time, as the
socket takes them, the connection handling nothing else meanwhile (Kafka mutes a channel
while its response is in flight and sends records from the file). A client that
pipelines Fetches without reading the responses therefore holds about MAX_UNSENT_BYTES +
STREAM_PIECE_BYTES of the broker's memory, whatever fetch.max.bytes it asks for; while it
is over the bound the connection stops reading its socket, leaving the rest of its
requests in the kernel's buffers and the client's. The event loop goes back to the other
connections after each piece that crosses the bound, so none of them waits behind a
client that asks for much and reads nothing.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from kio.serial.errors import SerialError

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import InvalidRequestError, UnsupportedVersionError
from brook.protocol.wire import (
    Chunk,
    decode_request,
    encode_response,
    encode_response_chunks,
    peek_header,
    read_client_id,
)

from ..apis import NO_RESPONSE, handler_for
from ..faults.model import FaultKind
from ..faults.registry import request_label
from ..observability.log_format import current_request
from ..security.principal import ANONYMOUS, KafkaPrincipal
from .request_context import RequestContext

if TYPE_CHECKING:
    from ..security.listener_security import ListenerSecurity
    from ..security.sasl_authenticator import SaslAuthenticator
    from .services import BrokerServices

log = logging.getLogger("brook.connection")

# Handle no further request of a connection while more response bytes than this wait in
# its transport's buffer; resume once they drain to RESUME_UNSENT_BYTES. A consumer that
# reads its responses never comes near: it sends its next Fetch after reading the last.
MAX_UNSENT_BYTES = 128 * 1024
RESUME_UNSENT_BYTES = 32 * 1024
# A streamed record set is read from its segment this much at a time.
STREAM_PIECE_BYTES = 64 * 1024

SIZE_PREFIX = 4


class KafkaConnection(asyncio.Protocol):
    def __init__(
        self,
        services: BrokerServices,
        connections: set[KafkaConnection],
        listener_name: str = "PLAINTEXT",
    ) -> None:
        self.services = services
        # The listener this connection came in on (Metadata answers its endpoints).
        self.listener_name = listener_name
        # The broker's open connections, which it answers and closes at shutdown.
        self.connections = connections
        self.max_request_size: int = services.config["socket.request.max.bytes"]
        # The versions served: Brook's, or those of the Kafka release it emulates.
        self.api_versions = services.api_versions
        # Bytes received and not yet handled: at most one read past a whole request,
        # since reading stops while a whole request waits its turn.
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.reading_paused = False
        self.writing_paused = False
        self.spoke = False  # whether a request came yet
        # The request whose handler is waiting; nothing behind it is handled meanwhile.
        self.in_flight: asyncio.Future[Any] | None = None
        # Who the client is (TLS client certificate or SASL), and on a SASL listener the
        # exchange that must complete before any other request is handled.
        self.principal: KafkaPrincipal = ANONYMOUS
        self.security: ListenerSecurity | None = None
        self.sasl: SaslAuthenticator | None = None
        # Authentication failed: the answer is written, the close waits for Kafka's delay.
        self.failing = False
        # When bytes last arrived: a request's queue time starts there (/metrics).
        self.received_at = 0.0
        # The client address counted against max.connections.per.ip while this is open.
        self.counted_address: str | None = None
        # A response being streamed (its record sets read from their segments a piece at
        # a time as the socket takes them); nothing behind it is handled meanwhile, as
        # Kafka mutes a channel while its response is in flight.
        self.streaming: deque[Chunk] | None = None
        self.streamed = 0  # bytes of the first chunk already written

    # --- asyncio.Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio declares a BaseTransport for every protocol; a stream server's is a
        # Transport. A cast, not isinstance: uvloop's TCPTransport is no subclass of it.
        stream = cast(asyncio.Transport, transport)
        self.transport = stream
        peer = stream.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        if self.services.faults.refuse_connection(self.peer):
            # The broker is "down": the connection is dropped before a byte is read.
            self.closed = True
            stream.abort()
            return
        if self.services.quotas.connections.enabled and self._over_connection_rate(stream, peer):
            return
        if peer is not None and not self._admitted(stream, peer[0]):
            return
        self.connections.add(self)
        self.security = self.services.config.listener_security.get(self.listener_name)
        self._ready(stream)

    def _admitted(self, transport: asyncio.Transport, address: str) -> bool:
        """Kafka's max.connections.per.ip: a connection over its address's limit is closed
        at once; one admitted is counted until it closes."""
        limits = self.services.listeners.connection_limits
        limit = limits.admit(address, self.services.config)
        if limit is not None:
            log.info(
                "Rejected connection from %s, address already has the configured maximum of"
                " %d connections.",
                address,
                limit,
            )
            self.closed = True
            transport.close()
            return False
        self.counted_address = address
        return True

    def _over_connection_rate(
        self, transport: asyncio.Transport, peer: tuple[str, int] | None
    ) -> bool:
        """KIP-612: a connection over its address's connection_creation_rate is held,
        unread, for the throttle time and then closed, as Kafka's acceptor does. (The
        inter-broker listener is exempt when there are others.)"""
        config = self.services.config
        if peer is None or (
            self.listener_name == config.inter_broker_listener_name and len(config["listeners"]) > 1
        ):
            return False
        throttle_ms = self.services.quotas.connections.record(peer[0], time.monotonic() * 1000)
        if not throttle_ms:
            return False
        log.debug(
            "Connection from %s over its connection_creation_rate: closed in %d ms",
            self.peer,
            throttle_ms,
        )
        self.closed = True
        transport.pause_reading()
        asyncio.get_running_loop().call_later(throttle_ms / 1000, transport.close)
        return True

    def _ready(self, transport: asyncio.Transport) -> None:
        """The connection is ready for requests (after the TLS handshake, if any)."""
        self.transport = transport
        # pause_writing/resume_writing then tell when the unsent bytes cross the bounds.
        self.transport.set_write_buffer_limits(high=MAX_UNSENT_BYTES, low=RESUME_UNSENT_BYTES)
        security = self.security
        if security is not None and security.protocol == "SSL":
            # The TLS handshake is done (security/tls_server.py): the client certificate
            # names the principal.
            from ..security.tls_server import certificate_principal

            principal = certificate_principal(transport, security, self.peer)
            counts = self.services.listeners.authentications
            if principal is None:
                counts.failed[self.listener_name] += 1
                self.close()
                return
            counts.succeeded[self.listener_name] += 1
            self.principal = principal
        if security is not None and security.sasl is not None:
            from ..security.sasl_authenticator import SaslAuthenticator

            self.sasl = SaslAuthenticator(
                security.sasl,
                self.services.scram_credentials,
                self.services.scram_decoy_key,
                self.peer,
                self.listener_name,
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.connections.discard(self)
        if self.counted_address is not None:
            self.services.listeners.connection_limits.release(self.counted_address)
            self.counted_address = None
        if self.in_flight is not None:
            self.in_flight.cancel()
        # As Kafka's ShareSessionCache: a share session ends with its connection, and
        # what its member acquired goes back to the group.
        self.services.share_partitions.connection_closed(self.peer)

    def pause_writing(self) -> None:
        self.writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._pump()
        self._dispatch()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.received_at = time.perf_counter()
        self._dispatch()

    # --- dispatch -----------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether the next request must wait: one is in flight or too much is unsent
        (or the connection closes after a failed authentication)."""
        return (
            self.in_flight is not None
            or self.writing_paused
            or self.failing
            or self.streaming is not None
        )

    def _dispatch(self) -> None:
        """Handle the buffered requests, one after another, while the connection may."""
        while not self.closed and not self.busy:
            frame = self._next_frame()
            if frame is None:
                break
            self._handle_frame(frame)
        self._update_reading()

    def _frame_size(self) -> int | None:
        """The size of the next request, once its size prefix has arrived."""
        if len(self.buffer) < SIZE_PREFIX:
            return None
        return int.from_bytes(self.buffer[:SIZE_PREFIX], "big", signed=True)

    def _next_frame(self) -> bytes | None:
        size = self._frame_size()
        if size is None:
            return None
        if size < 0 or size > self.max_request_size:
            log.warning(
                "Closing connection from %s: request of %d bytes is larger than"
                " socket.request.max.bytes=%d",
                self.peer,
                size,
                self.max_request_size,
            )
            self.close()
            return None
        sasl = self.sasl
        if sasl is not None and not sasl.authenticated and size > sasl.settings.max_receive_size:
            log.warning(
                "Closing connection from %s: %d bytes before SASL authentication, more than"
                " sasl.server.max.receive.size=%d",
                self.peer,
                size,
                sasl.settings.max_receive_size,
            )
            self.close()
            return None
        buffer = self.buffer
        if len(buffer) < SIZE_PREFIX + size:
            return None
        with memoryview(buffer) as view:
            frame = bytes(view[SIZE_PREFIX : SIZE_PREFIX + size])
        del buffer[: SIZE_PREFIX + size]
        return frame

    def _handle_frame(self, frame: bytes) -> None:
        if not self.spoke:
            # Checked at the first request, not at connect: a bare TCP probe (a health
            # check) is no client that will be sent elsewhere.
            self.spoke = True
            local = self.transport.get_extra_info("sockname") if self.transport else None
            if local:
                self.services.listeners.check_dialled_address(
                    self.listener_name, local[0], local[1], self.peer
                )
        sasl = self.sasl
        if sasl is not None and not self._sasl_admits(sasl, frame):
            return
        try:
            request = decode_request(frame, self.api_versions.table)
        except UnsupportedVersionError as exc:
            self._answer_unsupported(frame, exc)
            return
        except InvalidRequestError as exc:
            log.warning(
                "Closing connection from %s (client %r): %s",
                self.peer,
                read_client_id(frame),
                exc.message,
            )
            self.close()
            return
        ctx = RequestContext(
            services=self.services,
            api_key=request.api_key,
            api_version=request.api_version,
            correlation_id=request.correlation_id,
            client_id=request.client_id,
            peer=self.peer,
            connection=self,
            listener_name=self.listener_name,
            principal=self.principal,
        )
        metrics = self.services.request_metrics
        if metrics is not None:
            ctx.timing = metrics.start(
                request.api_key, request.api_version, request.body, self.received_at
            )
        quotas = self.services.quotas
        if quotas.enabled:
            ctx.quota = quotas.request_started(ctx, request.body, SIZE_PREFIX + len(frame))
        faults = self.services.faults
        if not faults.empty:
            ctx.faults = faults.for_request(
                request.api_key, request_label(request.api_key, self.peer, ctx.client_id)
            )
        # Lines the handler logs are about this request (the JSON log names its client).
        current_request.request = ctx
        try:
            if ctx.faults is None:
                result = handler_for(request.api_key)(ctx, request.body)
            else:
                result = _with_faults(ctx, request.body)
        except Exception as exc:
            self._handler_failed(ctx, exc)
            return
        finally:
            current_request.request = None
        if ctx.quota is not None:
            quotas.handled(ctx.quota)
        if ctx.timing is not None:
            ctx.timing.handled = time.perf_counter()
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self.in_flight = task
            task.add_done_callback(lambda done: self._complete(done, ctx))
        else:
            self._respond(ctx, result)

    # --- SASL ---------------------------------------------------------------------------

    def _sasl_admits(self, sasl: SaslAuthenticator, frame: bytes) -> bool:
        """Whether `frame` goes on to the handlers. Before authentication only the
        requests of the exchange do (a v0 exchange's raw tokens are handled here); after
        it, a SaslHandshake starts a re-authentication, and any request on an expired
        session closes the connection, as Kafka does."""
        from ..security.sasl_authenticator import SaslState

        if sasl.state is SaslState.RAW_TOKENS:
            self._raw_token(sasl, frame)
            return False
        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if sasl.authenticated:
            self.principal = sasl.principal or ANONYMOUS
            if api_key == ApiKey.SASL_HANDSHAKE and sasl.client_supports_reauthentication:
                sasl.begin_reauthentication()
                return True
            if sasl.session_expired():
                log.info(
                    "Closing connection from %s (%s): its SASL session expired"
                    " (connections.max.reauth.ms) and it did not re-authenticate",
                    self.peer,
                    sasl.principal,
                )
                self.close()
                return False
            return True
        if sasl.accepts(api_key):
            return True
        name = ApiKey(api_key).name if api_key in ApiKey._value2member_map_ else str(api_key)
        log.warning(
            "Closing connection from %s (listener %s): unexpected request %s during SASL"
            " %s; potential reasons: a client configured with the wrong security protocol,"
            " or not a Kafka client",
            self.peer,
            self.listener_name,
            name,
            "handshake" if sasl.state is SaslState.HANDSHAKE else "authentication",
        )
        self.close()
        return False

    def _raw_token(self, sasl: SaslAuthenticator, token: bytes) -> None:
        """A token after a v0 SaslHandshake: answered with a size-prefixed token."""
        from ..security.sasl_authenticator import AuthenticationError

        async def evaluate() -> bytes | None:
            try:
                answer, _ = await sasl.authenticate(token, None)
            except AuthenticationError:
                self.services.listeners.authentications.failed[self.listener_name] += 1
                return None  # v0 has no way to say why: the connection just closes
            if sasl.authenticated:
                self.services.listeners.authentications.succeeded[self.listener_name] += 1
            return answer

        def done(task: asyncio.Future[bytes | None]) -> None:
            self.in_flight = None
            if task.cancelled() or self.closed or self.transport is None:
                return
            answer = task.exception() or task.result()
            if isinstance(answer, BaseException):
                log.error("Closing connection from %s: SASL failed", self.peer, exc_info=answer)
                self.close()
                return
            if answer is None:
                self._close_after_failed_authentication()
                return
            self.transport.write(len(answer).to_bytes(4, "big") + answer)
            self._dispatch()

        task = asyncio.ensure_future(evaluate())
        self.in_flight = task
        task.add_done_callback(done)

    def _close_after_failed_authentication(self, answer: Callable[[], None] | None = None) -> None:
        """Kafka holds a connection that failed authentication for
        connection.failed.authentication.delay.ms, then sends the failure's answer (if
        the exchange has one) and closes it (KIP-306), so that a client retrying at once
        does not hammer the broker nor try passwords quickly."""
        if self.failing:
            return
        self.failing = True
        assert self.sasl is not None
        delay_ms = self.sasl.settings.failed_authentication_delay_ms

        def answer_and_close() -> None:
            if answer is not None:
                answer()
            self.close()

        asyncio.get_running_loop().call_later(delay_ms / 1000, answer_and_close)

    def _complete(self, task: asyncio.Future[Any], ctx: RequestContext) -> None:
        self.in_flight = None
        if task.cancelled() or self.closed:
            return
        exc = task.exception()
        if exc is not None:
            self._handler_failed(ctx, exc)
            return
        self._respond(ctx, task.result())
        self._dispatch()

    def _respond(self, ctx: RequestContext, response: Any) -> None:
        if ctx.quota is not None:
            response, throttle_ms = self.services.quotas.throttle(ctx, ctx.quota, response)
            if throttle_ms > 0:
                self._respond_throttled(ctx, response, throttle_ms)
                return
        self._finish(ctx, response)

    def _respond_throttled(self, ctx: RequestContext, response: Any, throttle_ms: int) -> None:
        """A client over its quota: the response goes out at once with throttle_time_ms and
        the connection reads nothing more for that long (KIP-219), or, to a version whose
        client does not wait by itself, the response goes out when the time is up."""
        from ..quotas.manager import client_throttles

        if client_throttles(ctx.api_key, ctx.api_version):
            self._finish(ctx, response)
            self._mute(throttle_ms, None)
        else:
            self._mute(throttle_ms, lambda: self._finish(ctx, response))

    def _mute(self, throttle_ms: int, then: Any) -> None:
        """Handle no request of this connection for `throttle_ms` (as if one were in
        flight), then run `then` and go on."""
        task = asyncio.ensure_future(asyncio.sleep(throttle_ms / 1000))
        self.in_flight = task

        def unmute(done: asyncio.Future[Any]) -> None:
            self.in_flight = None
            if done.cancelled() or self.closed:
                return
            if then is not None:
                then()
            self._dispatch()

        task.add_done_callback(unmute)

    def _finish(self, ctx: RequestContext, response: Any) -> None:
        ready = time.perf_counter()
        self._send(ctx, response)
        if ctx.timing is not None and self.services.request_metrics is not None:
            answered = None if response is NO_RESPONSE else response
            self.services.request_metrics.record(ctx.timing, answered, ready)

    def _send(self, ctx: RequestContext, response: Any) -> None:
        if ctx.faults is not None and ctx.faults.close is not None:
            self._respond_and_close(ctx, response, ctx.faults.close)
            return
        if response is NO_RESPONSE or self.closed or self.transport is None:
            return
        if self.sasl is not None and self.sasl.failed:
            # KIP-306: the failure's answer itself waits, so that a client cannot try
            # passwords faster than one per delay on a connection.
            self._close_after_failed_authentication(lambda: self._write(ctx, response))
            return
        self._write(ctx, response)

    def _write(self, ctx: RequestContext, response: Any) -> None:
        if self.closed or self.transport is None:
            return
        try:
            chunks = encode_response_chunks(ctx.correlation_id, response)
        except SerialError as exc:
            # A value this version cannot carry (a string longer than an int16 length,
            # given by a client of a newer version): the request gets no answer.
            log.warning(
                "Closing connection from %s (client %r): cannot encode the %s v%d response: %s",
                self.peer,
                ctx.client_id,
                ApiKey(ctx.api_key).name,
                ctx.api_version,
                exc,
            )
            self.close()
            return
        except Exception as exc:
            self._handler_failed(ctx, exc)
            return
        if all(isinstance(chunk, bytes | memoryview) for chunk in chunks):
            self.transport.writelines(cast(list[bytes | memoryview], chunks))
            return
        self.streaming = deque(chunks)
        self.streamed = 0
        self._pump()

    def _pump(self) -> None:
        """Write what the socket takes of the response being streamed: bytes as they are,
        a record set a piece at a time, read from its segment just before, until the
        transport's buffer is full (pause_writing; resume_writing comes back here)."""
        stream = self.streaming
        transport = self.transport
        while stream and transport is not None and not self.writing_paused and not self.closed:
            chunk = stream[0]
            if isinstance(chunk, bytes | memoryview):
                transport.write(chunk)
                stream.popleft()
                continue
            try:
                piece = chunk.read(self.streamed, STREAM_PIECE_BYTES)
            except OSError as exc:
                # The length is on the wire already: the client must fetch again.
                log.warning(
                    "Closing connection from %s: cannot send the records of a fetch: %s",
                    self.peer,
                    exc,
                )
                self.close()
                return
            transport.write(piece)
            self.streamed += len(piece)
            if self.streamed >= len(chunk):
                stream.popleft()
                self.streamed = 0
        if stream is not None and not stream:
            self.streaming = None

    def _respond_and_close(self, ctx: RequestContext, response: Any, mode: FaultKind) -> None:
        """An injected close: after the whole response, or half-way through it."""
        if response is not NO_RESPONSE and not self.closed and self.transport is not None:
            data = encode_response(ctx.correlation_id, response)
            if mode is FaultKind.CLOSE_MID_RESPONSE:
                data = data[: len(data) // 2]
            self.transport.write(data)
        self.close()

    def _handler_failed(self, ctx: RequestContext, exc: BaseException) -> None:
        """Close this connection and go on serving the others.

        A handler raises InvalidRequestError for input that Kafka refuses by closing the
        connection: one line says why. Anything else is a bug in Brook, not the client's,
        and is logged with its traceback.
        """
        if isinstance(exc, InvalidRequestError):
            log.warning(
                "Closing connection from %s (client %r): invalid %s v%d request: %s",
                self.peer,
                ctx.client_id,
                ApiKey(ctx.api_key).name,
                ctx.api_version,
                exc.message,
            )
        else:
            log.error(
                "Closing connection from %s (client %r): %s v%d failed",
                self.peer,
                ctx.client_id,
                ApiKey(ctx.api_key).name,
                ctx.api_version,
                exc_info=exc,
            )
        self.close()

    def _answer_unsupported(self, frame: bytes, exc: UnsupportedVersionError) -> None:
        api_key, _version, correlation_id = peek_header(frame)
        if api_key == ApiKey.API_VERSIONS and self.transport is not None:
            # Kafka answers an ApiVersions it cannot parse with a v0 body listing what
            # it serves, so the client can pick a version both sides know.
            from ..apis.api_versions import unsupported_version_response  # rare: load then

            response = unsupported_version_response(self.api_versions.table)
            self.transport.write(encode_response(correlation_id, response))
            return
        release = self.api_versions.release
        log.warning(
            "Closing connection from %s (client %r): %s%s",
            self.peer,
            read_client_id(frame),
            exc.message,
            f" (emulating Apache Kafka {release})" if release else "",
        )
        self.close()

    def _update_reading(self) -> None:
        """Read while a request may be handled or none is complete in the buffer.

        A connection waiting on a parked request keeps reading until the next whole
        request has arrived, so a client that disconnects meanwhile is noticed at once.
        """
        transport = self.transport
        if transport is None or self.closed:
            return
        should_pause = self.busy and self._has_whole_frame()
        if should_pause and not self.reading_paused:
            transport.pause_reading()
            self.reading_paused = True
        elif not should_pause and self.reading_paused:
            self.reading_paused = False
            transport.resume_reading()

    def _has_whole_frame(self) -> bool:
        size = self._frame_size()
        if size is None:
            return False
        # An invalid size counts as whole: nothing more need be read to refuse it.
        return size < 0 or size > self.max_request_size or len(self.buffer) >= SIZE_PREFIX + size

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.transport is not None:
            self.transport.close()


def _with_faults(ctx: RequestContext, body: Any) -> Any:
    """Run a request under its armed faults: an error answers it without running it (the
    per-partition ones are the handler's to ask), a delay holds it back."""
    faults = ctx.faults
    assert faults is not None

    def run() -> Any:
        if faults.error is not None:
            from ..faults.error_responses import error_response  # only once a fault fires

            return error_response(ctx.api_key, ctx.api_version, body, faults.error)
        return handler_for(ctx.api_key)(ctx, body)

    if not faults.delay_ms:
        return run()

    async def later() -> Any:
        await asyncio.sleep(faults.delay_ms / 1000)
        result = run()
        return await result if inspect.isawaitable(result) else result

    return later()
