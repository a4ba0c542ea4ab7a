"""A loopback TCP proxy that network-partition tests put between two parties.

It listens on 127.0.0.1 (a free port unless one is given) and forwards every connection to
one target host:port. A test cuts, stalls and heals the link:

- cut(): every current connection is reset (both sides), and new ones are accepted and reset
  at once (counted as refused) until heal(): a link that is down;
- stall(direction): connections stay open but bytes stop flowing in one direction or both;
  the proxy reads at most one chunk more, holds it (counted as pending) and then stops
  reading, so the sender's socket buffers fill as on a link that silently drops packets;
- heal(): new connections are forwarded again and held bytes flow on.

The proxy runs its own asyncio loop in a daemon thread, so sync tests (and brokers or clients
in other threads or processes) can use it. Every control method returns once the loop has
applied it: after cut() returns, the old connections are gone. It counts connections
accepted, refused and failed upstream, and bytes forwarded and pending per direction, and
wait_until() blocks until a condition over those counts holds, so a test waits on what the
proxy saw instead of sleeping. stop() closes exactly the sockets and the thread it opened.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger("brook.tests.netproxy")

CHUNK = 64 * 1024
START_TIMEOUT_S = 10.0
WAIT_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0


class Direction(enum.Enum):
    """Which way bytes go through the proxy."""

    TO_TARGET = "to_target"  # from the connecting side to the target
    TO_CLIENT = "to_client"  # from the target back to the connecting side


BOTH = (Direction.TO_TARGET, Direction.TO_CLIENT)


@dataclass(eq=False)  # identity: a set of links holds each connection once
class _Link:
    """One proxied connection: both sides' writers and the two pumps between them."""

    client: asyncio.StreamWriter
    target: asyncio.StreamWriter | None = None
    pumps: list[asyncio.Task[None]] = field(default_factory=list)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close a socket with a TCP reset rather than a FIN (SO_LINGER 0), as a link that
    breaks does: the peer sees ECONNRESET, not an orderly end of stream."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class NetProxy:
    """A TCP proxy from 127.0.0.1:<port> to target_host:target_port (see the module doc)."""

    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._stopped: asyncio.Event | None = None
        self._start_error: BaseException | None = None
        self._ready = threading.Event()
        self._links: set[_Link] = set()
        self._flowing: dict[Direction, asyncio.Event] = {}
        self._is_cut = False
        # Counters: written on the proxy's loop, read by tests under the same condition.
        self._changed = threading.Condition()
        self._accepted = 0
        self._refused = 0
        self._upstream_failures = 0
        self._resets = 0
        # The tasks serving accepted connections, awaited on stop so none is left to be
        # cancelled by the loop's shutdown.
        self._serving: set[asyncio.Task[None]] = set()
        self._forwarded = dict.fromkeys(Direction, 0)
        self._pending = dict.fromkeys(Direction, 0)

    # -- the counts -----------------------------------------------------------------------

    @property
    def address(self) -> str:
        """host:port to connect to (a bootstrap server, an advertised listener)."""
        return f"127.0.0.1:{self.port}"

    @property
    def accepted(self) -> int:
        """Connections accepted and forwarded to the target."""
        with self._changed:
            return self._accepted

    @property
    def refused(self) -> int:
        """Connections accepted while cut, and reset at once."""
        with self._changed:
            return self._refused

    @property
    def upstream_failures(self) -> int:
        """Connections reset because the target could not be reached."""
        with self._changed:
            return self._upstream_failures

    @property
    def resets(self) -> int:
        """Connections the proxy reset of its own accord, by cut() or stop(). A connection
        either end closes, or resets (the proxy then resets its other side, as a broken
        link would), is not one."""
        with self._changed:
            return self._resets

    @property
    def open_connections(self) -> int:
        with self._changed:
            return len(self._links)

    def forwarded(self, direction: Direction) -> int:
        """Bytes delivered in that direction since the proxy started."""
        with self._changed:
            return self._forwarded[direction]

    def pending(self, direction: Direction) -> int:
        """Bytes read in that direction and held back by a stall."""
        with self._changed:
            return self._pending[direction]

    def stalled(self, direction: Direction) -> bool:
        flowing = self._flowing.get(direction)
        return flowing is not None and not flowing.is_set()

    @property
    def is_cut(self) -> bool:
        return self._is_cut

    def wait_until(
        self, condition: Callable[[NetProxy], bool], timeout: float = WAIT_TIMEOUT_S
    ) -> None:
        """Block until condition(self) holds; it is checked whenever a count changes.
        Raises TimeoutError (with the counts) if it does not hold within `timeout`."""
        with self._changed:
            if not self._changed.wait_for(lambda: condition(self), timeout):
                raise TimeoutError(f"{self!r}: condition not met within {timeout} s")

    def __repr__(self) -> str:
        with self._changed:
            return (
                f"NetProxy({self.address} -> {self.target[0]}:{self.target[1]},"
                f" cut={self._is_cut}, accepted={self._accepted}, refused={self._refused},"
                f" upstream_failures={self._upstream_failures}, resets={self._resets},"
                f" open={len(self._links)},"
                f" forwarded={ {d.value: n for d, n in self._forwarded.items()} },"
                f" pending={ {d.value: n for d, n in self._pending.items()} })"
            )

    # -- control --------------------------------------------------------------------------

    def start(self) -> NetProxy:
        self._thread = threading.Thread(target=self._run, name="netproxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise TimeoutError("netproxy thread did not start")
        if self._start_error is not None:
            raise RuntimeError(f"netproxy could not listen on port {self.port}") from (
                self._start_error
            )
        return self

    def cut(self) -> None:
        """Reset every current connection and every new one until heal()."""
        self._call(self._cut)

    def stall(self, direction: Direction | None = None) -> None:
        """Stop forwarding bytes in one direction (both when None); connections stay open."""
        self._call(self._stall, (direction,) if direction else BOTH)

    def heal(self) -> None:
        """Forward new connections again and let held bytes flow on."""
        self._call(self._heal)

    def stop(self) -> None:
        """Close the listener and every connection, and end the thread."""
        if self._loop is not None and self._stopped is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(30)
        self._loop = None

    def __enter__(self) -> NetProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _call(self, function: Callable[..., None], *args: object) -> None:
        """Run a control function on the proxy's loop and wait until it has run."""
        if self._loop is None:
            raise RuntimeError("netproxy is not running")

        async def invoke() -> None:
            function(*args)

        asyncio.run_coroutine_threadsafe(invoke(), self._loop).result(WAIT_TIMEOUT_S)

    # -- on the proxy's loop --------------------------------------------------------------

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._flowing = {direction: asyncio.Event() for direction in Direction}
        for event in self._flowing.values():
            event.set()
        try:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        except OSError as exc:
            self._start_error = exc
            self._ready.set()
            return
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("netproxy %s -> %s:%d started", self.address, *self.target)
        self._ready.set()
        await self._stopped.wait()
        self._server.close()
        self._reset_every_link()
        await asyncio.gather(*self._serving, return_exceptions=True)
        await self._server.wait_closed()
        log.info("netproxy %s stopped: %r", self.address, self)

    def _notify(self, change: Callable[[], None]) -> None:
        with self._changed:
            change()
            self._changed.notify_all()

    def _cut(self) -> None:
        self._is_cut = True
        reset = self._reset_every_link()
        log.info("netproxy %s cut: %d connections reset", self.address, reset)

    def _reset_every_link(self) -> int:
        links = list(self._links)
        for link in links:
            self._drop(link)

        def count() -> None:
            self._resets += len(links)

        self._notify(count)
        return len(links)

    def _stall(self, directions: tuple[Direction, ...]) -> None:
        for direction in directions:
            self._flowing[direction].clear()
        log.info("netproxy %s stalled %s", self.address, [d.value for d in directions])

    def _heal(self) -> None:
        self._is_cut = False
        for event in self._flowing.values():
            event.set()
        log.info("netproxy %s healed", self.address)

    def _drop(self, link: _Link) -> None:
        """Reset both sides of a link and stop its pumps."""
        for pump in link.pumps:
            pump.cancel()
        _reset(link.client)
        if link.target is not None:
            _reset(link.target)

        def forget() -> None:
            self._links.discard(link)

        self._notify(forget)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        try:
            await self._serve(reader, writer)
        finally:
            self._serving.discard(task)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._is_cut:
            _reset(writer)
            self._notify(self._count_refused)
            log.info("netproxy %s refused a connection (cut)", self.address)
            return
        link = _Link(client=writer)
        self._notify(lambda: self._links.add(link))
        try:
            target_reader, target_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.target), CONNECT_TIMEOUT_S
            )
        except (OSError, TimeoutError) as exc:
            log.info("netproxy %s cannot reach %s:%d: %s", self.address, *self.target, exc)
            self._notify(self._count_upstream_failure)
            self._drop(link)
            return
        if link not in self._links:  # cut while connecting
            _reset(target_writer)
            return
        link.target = target_writer
        self._notify(self._count_accepted)
        link.pumps = [
            asyncio.create_task(self._pump(reader, target_writer, Direction.TO_TARGET)),
            asyncio.create_task(self._pump(target_reader, writer, Direction.TO_CLIENT)),
        ]
        # Until both sides have ended, or one side fails (a reset): then the other side is
        # reset too, as when a connection breaks midway.
        await asyncio.wait(link.pumps, return_when=asyncio.FIRST_EXCEPTION)
        failed = [
            pump
            for pump in link.pumps
            if pump.done() and not pump.cancelled() and pump.exception() is not None
        ]
        if link not in self._links:
            return  # cut or stopped meanwhile
        if failed or not all(pump.done() for pump in link.pumps):
            self._drop(link)
        else:
            writer.close()
            target_writer.close()
            self._notify(lambda: self._links.discard(link))

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: Direction
    ) -> None:
        flowing = self._flowing[direction]
        held = 0
        try:
            while True:
                data = await reader.read(CHUNK)
                if not data:
                    break
                held = len(data)
                self._count_pending(direction, held)
                # A stall holds this chunk and stops reading: the sender's buffers fill up.
                await flowing.wait()
                writer.write(data)
                await writer.drain()
                self._count_forwarded(direction, held)
                held = 0
            if writer.can_write_eof():
                writer.write_eof()  # a half-close travels on
        finally:
            if held:
                self._count_pending(direction, -held)

    def _count_refused(self) -> None:
        self._refused += 1

    def _count_upstream_failure(self) -> None:
        self._upstream_failures += 1

    def _count_accepted(self) -> None:
        self._accepted += 1

    def _count_pending(self, direction: Direction, count: int) -> None:
        def change() -> None:
            self._pending[direction] += count

        self._notify(change)

    def _count_forwarded(self, direction: Direction, count: int) -> None:
        def change() -> None:
            self._pending[direction] -= count
            self._forwarded[direction] += count

        self._notify(change)
