"""The broker's ZooKeeper client: kazoo, awaited on the broker's event loop.

kazoo runs its own threads (the connection, the callbacks). Nothing here blocks the
loop: every call is kazoo's *_async one, whose result is handed to an asyncio future
with call_soon_threadsafe, and every callback kazoo makes (a watch firing, a session
state change) is handed to the loop the same way (results and watches straight from
kazoo's connection thread: kazoo_transport), so that the code reacting to it
runs where all the broker's state lives. Calls that lose the connection (or the
session) are tried again once connected, as Kafka's retryRequestUntilConnected does.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from .connect_string import ConnectString
from .errors import ZooKeeperClientTimeoutError
from .kazoo_api import (
    BrookKazooClient,
    ConnectionLoss,
    EventType,
    IAsyncResult,
    KazooRetry,
    KazooState,
    LoopCallback,
    SessionExpiredError,
    TransactionRequest,
    WatchedEvent,
    ZnodeStat,
)

log = logging.getLogger("brook.zookeeper")


class _KazooLogger(logging.Logger):
    """kazoo's own log: its warnings and errors go out through brook.zookeeper's; below
    them (every connection attempt, every packet: a line or two each at DEBUG or BLATHER)
    nothing is made into a record, which cost the connection thread a tenth of its time
    under thousands of reads. The session timeout ZooKeeper granted is taken from the
    arguments of kazoo's line that tells it (BLATHER), since kazoo keeps it nowhere else."""

    def __init__(self, parent: logging.Logger) -> None:
        super().__init__(f"{parent.name}.kazoo", logging.WARNING)
        self.parent = parent
        self.negotiated_timeout_ms: int | None = None

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if level >= logging.WARNING:
            super().log(level, msg, *args, **kwargs)
        elif isinstance(msg, str) and msg.startswith("Session created") and len(args) >= 3:
            # "Session created, session_id: %r session_passwd: %s\n negotiated session
            # timeout: %s ...": the third argument.
            self.negotiated_timeout_ms = int(args[2])


T = TypeVar("T")
# How long kazoo waits between two attempts to reach ZooKeeper at most: its default
# backs off to an hour, which would keep a broker away for long after an outage.
RECONNECT_MAX_DELAY_S = 1.0


class SessionState(enum.Enum):
    CONNECTED = "CONNECTED"  # connected, in the session we had or a new one
    SUSPENDED = "SUSPENDED"  # disconnected; the session (and its ephemerals) may live on
    LOST = "LOST"  # the session expired or was closed: its ephemeral znodes are gone


SessionListener = Callable[[SessionState, bool], None]
WatchCallback = Callable[[WatchedEvent], None]


class ZooKeeperClient:
    def __init__(
        self,
        connect: ConnectString,
        session_timeout_ms: int,
        loop: asyncio.AbstractEventLoop,
        chroot: bool = True,
    ) -> None:
        self.connect = connect
        self._loop = loop
        hosts = str(connect) if chroot else connect.servers
        # A logger of this client's own (what it learns is this session's), not kept in
        # logging's registry.
        self._kazoo_log = _KazooLogger(log)
        self._requested_timeout_ms = session_timeout_ms
        self._kazoo = BrookKazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            connection_retry=KazooRetry(max_tries=-1, max_delay=RECONNECT_MAX_DELAY_S),
            logger=self._kazoo_log,
        )
        self._connected = asyncio.Event()
        self._closing = False
        self._session_id: int | None = None
        self._session_listeners: list[SessionListener] = []
        # One kazoo-side function per loop-side watch callback, so that setting the
        # same watch again is one watcher in kazoo, not one more each time.
        self._watches: dict[WatchCallback, LoopCallback] = {}
        # Callbacks with a NONE event on its way to the loop (_watch_fired).
        self._session_events_due: set[WatchCallback] = set()
        self._kazoo.add_listener(self._kazoo_state_changed)

    # --- the session --------------------------------------------------------------------

    async def start(self, connection_timeout_ms: int) -> None:
        """Connect within the timeout, or close and raise as Kafka does."""
        live = self._kazoo.start_async()
        await asyncio.to_thread(live.wait, connection_timeout_ms / 1000)
        client_id = self._kazoo.client_id
        if self._kazoo.connected and client_id is not None:
            # Known now, not when kazoo's own report of it reaches the loop.
            self._session_id = client_id[0]
            self._connected.set()
        else:
            state = self._kazoo.client_state
            await self.close()
            raise ZooKeeperClientTimeoutError(
                f"Timed out waiting for connection while in state: {state}"
                f" (zookeeper.connect={self.connect}, zookeeper.connection.timeout.ms="
                f"{connection_timeout_ms})"
            )

    async def close(self) -> None:
        """End the session: ZooKeeper removes its ephemeral znodes at once."""
        self._closing = True
        self._connected.clear()
        await asyncio.to_thread(self._stop_and_close)

    def _stop_and_close(self) -> None:
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def session_id(self) -> int | None:
        return self._session_id

    @property
    def negotiated_session_timeout_ms(self) -> int:
        """The session timeout ZooKeeper granted (it bounds the one asked for to 2-20
        of its ticks)."""
        return self._kazoo_log.negotiated_timeout_ms or self._requested_timeout_ms

    def add_session_listener(self, listener: SessionListener) -> None:
        """`listener(state, new_session)` on the loop at every change of the session."""
        self._session_listeners.append(listener)

    def _kazoo_state_changed(self, state: str) -> None:
        # kazoo's connection thread: read what belongs to this moment, then hop.
        client_id = self._kazoo.client_id if state == KazooState.CONNECTED else None
        self._hop(self._state_changed, SessionState(state), client_id[0] if client_id else None)

    def _state_changed(self, state: SessionState, session_id: int | None) -> None:
        if self._closing:
            return
        new_session = False
        if state is SessionState.CONNECTED:
            if self._connected.is_set() and session_id == self._session_id:
                return  # the connection start() saw already
            new_session = session_id != self._session_id
            self._session_id = session_id
            self._connected.set()
        else:
            self._connected.clear()
        if state is SessionState.LOST:
            log.warning("ZooKeeper session 0x%x expired", self._session_id or 0)
        elif state is SessionState.SUSPENDED:
            log.warning("Disconnected from ZooKeeper; reconnecting")
        elif not new_session:
            log.info("Reconnected to ZooKeeper in session 0x%x", session_id or 0)
        for listener in list(self._session_listeners):
            listener(state, new_session)

    def _hop(self, function: Callable[..., Any], *args: Any) -> None:
        # RuntimeError: the loop is closed, the broker has stopped.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(function, *args)

    # --- calls --------------------------------------------------------------------------

    def _kazoo_watch(self, callback: WatchCallback | None) -> LoopCallback | None:
        if callback is None:
            return None
        hop = self._watches.get(callback)
        if hop is None:
            # Runs on kazoo's connection thread (a LoopCallback only hops).
            hop = LoopCallback(functools.partial(self._watch_fired, callback))
            self._watches[callback] = hop
        return hop

    def _watch_fired(self, callback: WatchCallback, event: WatchedEvent) -> None:
        """On kazoo's connection thread. A lost connection ends every watch, and kazoo
        tells each watched path's watchers (a NONE event without a path): a broker
        watching 9,000 partition states would run the same callback 9,000 times, each
        marking everything to be read again. One such event a callback has not yet run
        stands for those that follow it."""
        if event.type != EventType.NONE:
            self._hop(callback, event)
        elif callback not in self._session_events_due:
            self._session_events_due.add(callback)
            self._hop(self._session_event, callback, event)

    def _session_event(self, callback: WatchCallback, event: WatchedEvent) -> None:
        self._session_events_due.discard(callback)  # before it runs: a later one is new
        callback(event)

    async def _call(self, start: Callable[[], IAsyncResult[T]]) -> T:
        """Await a kazoo async call; after a lost connection or session, again once
        connected (the callers' writes are conditional or checked, so a second try of
        one that had taken effect is told apart)."""
        while True:
            try:
                return await self._bridge(start())
            except (ConnectionLoss, SessionExpiredError):
                if self._closing:
                    raise
                await self._connected.wait()

    def _bridge(self, result: IAsyncResult[T]) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self._loop.create_future()

        def resolve(value: T) -> None:
            if not future.done():
                future.set_result(value)

        def fail(error: BaseException) -> None:
            if not future.done():
                future.set_exception(error)

        def completed(done: IAsyncResult[T]) -> None:  # on kazoo's connection thread
            try:
                value = done.get_nowait()
            except Exception as exc:
                self._hop(fail, exc)
            else:
                self._hop(resolve, value)

        result.rawlink(LoopCallback(completed))
        return future

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, ZnodeStat]:
        return await self._call(lambda: self._kazoo.get_async(path, self._kazoo_watch(watch)))

    async def get_children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        return await self._call(
            lambda: self._kazoo.get_children_async(path, self._kazoo_watch(watch))
        )

    async def exists(self, path: str, watch: WatchCallback | None = None) -> ZnodeStat | None:
        return await self._call(lambda: self._kazoo.exists_async(path, self._kazoo_watch(watch)))

    async def create(
        self,
        path: str,
        value: bytes = b"",
        ephemeral: bool = False,
        makepath: bool = False,
        sequence: bool = False,
    ) -> str:
        return await self._call(
            lambda: self._kazoo.create_async(
                path, value, ephemeral=ephemeral, sequence=sequence, makepath=makepath
            )
        )

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return await self._call(lambda: self._kazoo.set_async(path, value, version))

    async def multi(self, build: Callable[[TransactionRequest], None]) -> list[Any]:
        """One ZooKeeper transaction (multi): all its operations or none. The result
        has one entry per operation, an exception where one failed."""

        def start() -> IAsyncResult[list[Any]]:
            transaction = self._kazoo.transaction()
            build(transaction)
            return transaction.commit_async()

        return await self._call(start)
