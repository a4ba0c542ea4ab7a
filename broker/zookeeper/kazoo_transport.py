"""kazoo's connection thread, made to cost little per request when requests come by the
thousand (a broker reading the states of a topic of 9,000 partitions, a controller
moving the leaders of a stopping broker).

kazoo (2.x) sends one request per turn of its connection thread and reads one reply per
turn, with a wait on the socket before every read and every write: some ten system calls
per request and reply, each of which lets go of the interpreter's lock and must take it
back from a busy event loop, and every reply handed on through a queue to a second
thread before it reaches the loop. Here, with kazoo's protocol and its objects kept:

- the connection reads what the socket holds at once (up to READ_SIZE) and takes the
  replies from that buffer; the wait of the thread's loop returns at once while a whole
  reply is buffered, so a burst of replies costs a system call per READ_SIZE, not five
  a reply;
- the connection sends every request queued when it wakes, in one write (up to
  MAX_BATCH_BYTES), and a request wakes it only when no wake-up is pending already
  (kazoo writes a byte to its wake-up socket for every request: a system call on the
  event loop's thread each);
- the wait is one poll(2) of the descriptors asked for, without the selectors module's
  objects (and poll, not select(2): a broker's descriptors pass 1,024);
- a completion or a watch whose callback is a LoopCallback (the broker's: they only hand
  the result to the event loop, which takes no lock kazoo holds and never waits) runs on
  the connection thread itself, not through the handler's queue and callback thread.

A lost connection fails the requests sent or queued when it went, not those asked again
meanwhile (they go out on the next connection). Everything else (the session,
reconnection, pings, authentication, every other callback) is kazoo's own.
"""

from __future__ import annotations

import contextlib
import functools
import select
import socket
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient  # type: ignore[import-untyped]
from kazoo.exceptions import (  # type: ignore[import-untyped]
    ConnectionClosedError,
    ConnectionDropped,
    ConnectionLoss,
    SessionExpiredError,
)
from kazoo.handlers.threading import AsyncResult, SequentialThreadingHandler  # type: ignore[import-untyped]
from kazoo.protocol import connection as kazoo_connection  # type: ignore[import-untyped]
from kazoo.protocol.serialization import Auth, int_struct  # type: ignore[import-untyped]
from kazoo.protocol.states import KeeperState  # type: ignore[import-untyped]

# Bytes asked of the socket per read: many replies (a partition state's is some 200 bytes).
READ_SIZE = 256 * 1024
# Bytes of requests sent per write at most (ZooKeeper reads them one by one anyway).
MAX_BATCH_BYTES = 1024 * 1024

_SESSION_EXPIRED = kazoo_connection._SESSION_EXPIRED
_CONNECTION_DROP = kazoo_connection._CONNECTION_DROP
# The states in which kazoo refuses a request at once.
_REFUSING = (KeeperState.AUTH_FAILED, KeeperState.CLOSED, KeeperState.EXPIRED_SESSION)
_READABLE = select.POLLIN | select.POLLPRI
_WRITABLE = select.POLLOUT


class LoopCallback:
    """A callback that only hands its argument to the event loop (call_soon_threadsafe),
    safe to run on kazoo's connection thread."""

    __slots__ = ("function",)

    def __init__(self, function: Callable[[Any], None]) -> None:
        self.function = function

    def __call__(self, argument: Any) -> None:
        self.function(argument)


def poll_wait(
    rlist: list[Any], wlist: list[Any], timeout: float | None
) -> tuple[list[Any], list[Any]]:
    """select(2)'s answer for these objects (sockets or descriptors), by one poll(2)."""
    poller = select.poll()
    by_fd: dict[int, Any] = {}
    for obj in rlist:
        fd = obj if isinstance(obj, int) else obj.fileno()
        poller.register(fd, _READABLE)
        by_fd[fd] = obj
    for obj in wlist:
        fd = obj if isinstance(obj, int) else obj.fileno()
        poller.register(fd, _WRITABLE | (_READABLE if fd in by_fd else 0))
        by_fd[fd] = obj
    milliseconds = None if timeout is None else max(0, int(timeout * 1000 + 0.999))
    readable = []
    writable = []
    for fd, events in poller.poll(milliseconds):
        obj = by_fd[fd]
        # An error or a hang-up wakes both sides, as select(2) and the selectors do:
        # the read or the write that follows meets it.
        if events & ~_WRITABLE and obj in rlist:
            readable.append(obj)
        if events & ~_READABLE and obj in wlist:
            writable.append(obj)
    return readable, writable


class _AsyncResult(AsyncResult):  # type: ignore[misc]  # kazoo is untyped
    def _do_callbacks(self) -> None:
        for callback in self._callbacks:
            if isinstance(callback, LoopCallback) or not self._handler.running:
                callback(self)
            else:
                self._handler.completion_queue.put(functools.partial(callback, self))


class BrookHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo is untyped
    def __init__(self) -> None:
        super().__init__()
        self.connection: BufferedConnection | None = None

    def async_result(self) -> _AsyncResult:
        return _AsyncResult(self)

    def dispatch_callback(self, callback: Any) -> None:
        if isinstance(callback.func, LoopCallback):
            callback.func(*callback.args)
        else:
            super().dispatch_callback(callback)

    def select(
        self, rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
    ) -> tuple[list[Any], list[Any], list[Any]]:
        connection = self.connection
        if connection is not None and connection.reply_buffered() and connection._socket in rlist:
            # A whole reply is read already: no wait. Requests waiting to go out are
            # said ready too, so that a long burst of replies does not hold them back.
            ready = [connection._socket]
            if connection._read_sock in rlist and connection.client._queue:
                ready.append(connection._read_sock)
            return ready, [], []
        readable, writable = poll_wait(rlist, wlist, timeout)
        return readable, writable, []


class BufferedConnection(kazoo_connection.ConnectionHandler):  # type: ignore[misc]
    _xid: int  # kazoo's: the last request's number on this connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Bytes read from the socket and not yet taken as (part of) a reply.
        self._inbound = bytearray()
        # A wake-up byte is on its way to this thread, which has not yet looked at the
        # queue since (BrookKazooClient._call sends one only when this is False).
        self.wake_pending = False

    def start(self) -> None:
        # A client started again (after stop and close) has a new wake-up socket, which
        # holds no byte yet.
        self.wake_pending = False
        super().start()

    def wake(self) -> None:
        """Make the connection thread look at the queue (from any thread)."""
        self.wake_pending = True
        write_sock = self._write_sock
        if write_sock is not None:
            with contextlib.suppress(OSError):
                write_sock.send(b"\0")

    def reply_buffered(self) -> bool:
        inbound = self._inbound
        if len(inbound) < 4:
            return False
        length: int = int_struct.unpack_from(inbound)[0]
        return len(inbound) >= 4 + length

    def _connect(self, host: str, hostip: str, port: int) -> Any:
        # What an earlier connection left unread belongs to none of this one's replies.
        self._inbound.clear()
        return super()._connect(host, hostip, port)

    def _read(self, length: int, timeout: float) -> bytes:
        inbound = self._inbound
        if len(inbound) < length:
            with self._socket_error_handling():
                while len(inbound) < length:
                    if not poll_wait([self._socket], [], timeout)[0]:
                        raise self.handler.timeout_exception("socket time-out during read")
                    try:
                        chunk = self._socket.recv(max(READ_SIZE, length - len(inbound)))
                    except BlockingIOError:
                        continue
                    if not chunk:
                        raise ConnectionDropped("socket connection broken")
                    inbound += chunk
        data = bytes(inbound[:length])
        del inbound[:length]
        return data

    def _send_request(self, read_timeout: float, connect_timeout: float) -> None:
        client = self.client
        # The wake-up bytes first, then the flag, then the queue: a request appended
        # after the queue is read saw the flag down and sent a byte, which wakes the
        # next turn (BrookKazooClient._call appends before it looks at the flag).
        with contextlib.suppress(BlockingIOError, InterruptedError):
            self._read_sock.recv(READ_SIZE, socket.MSG_DONTWAIT)
        self.wake_pending = False
        queued = list(client._queue)  # one step under the interpreter's lock
        if not queued:
            return
        # kazoo's own tests' requests to end the session or the connection.
        request = queued[0][0]
        if request is _SESSION_EXPIRED:
            raise SessionExpiredError("Session expired: Testing")
        if request is _CONNECTION_DROP:
            raise ConnectionDropped("Connection dropped: Testing")
        frames = bytearray()
        sent: list[tuple[Any, Any, int]] = []
        for request, async_object in queued:
            if request is _SESSION_EXPIRED or request is _CONNECTION_DROP:
                break  # at the head of the next batch
            if request.type == Auth.type:
                xid = kazoo_connection.AUTH_XID
            else:
                # kazoo's numbering: 1 to 2**31 - 1, round again.
                last: int = self._xid
                xid = self._xid = last % 2147483647 + 1
            body = request.serialize()
            frames += int_struct.pack(len(body) + (8 if request.type else 4))
            frames += int_struct.pack(xid)
            if request.type:
                frames += int_struct.pack(request.type)
            frames += body
            sent.append((request, async_object, xid))
            if len(frames) >= MAX_BATCH_BYTES:
                break
        # Taken off the queue once written. A write that fails drops the connection, and
        # kazoo then fails every request queued or pending with ConnectionLoss (the
        # broker's client asks again once connected).
        self._write(frames, connect_timeout)
        for entry in sent:
            client._queue.popleft()
            client._pending.append(entry)
        if len(sent) < len(queued):
            self.wake()  # more to send, in the next turn


class BrookKazooClient(KazooClient):  # type: ignore[misc]  # kazoo is untyped
    """KazooClient over a BufferedConnection and a BrookHandler."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        handler = BrookHandler()
        super().__init__(*args, handler=handler, **kwargs)
        self._connection = BufferedConnection(self, self._conn_retry.copy(), logger=self.logger)
        handler.connection = self._connection

    def _notify_pending(self, state: Any) -> None:
        if state in _REFUSING:
            super()._notify_pending(state)  # new requests are refused meanwhile
            return
        # The connection is lost: what was sent or queued when it went fails with
        # ConnectionLoss, and only that. A caller told of it may ask again at once (it
        # has not heard yet that the connection is down); its request waits for the next
        # connection. kazoo fails whatever the queue holds until it is empty, and with the
        # results handed to the loop from this thread, the loop's requests asked again
        # kept this loop failing them for many seconds.
        error = ConnectionLoss()
        for _ in range(len(self._pending)):
            _, async_object, _ = self._pending.popleft()
            if async_object:
                async_object.set_exception(error)
        for _ in range(len(self._queue)):
            _, async_object = self._queue.popleft()
            if async_object:
                async_object.set_exception(error)

    def _call(self, request: Any, async_object: Any) -> Any:
        if self._state in _REFUSING:
            return super()._call(request, async_object)  # kazoo fails it
        # Appended before the flag is read (see BufferedConnection._send_request).
        self._queue.append((request, async_object))
        connection = self._connection
        if not connection.wake_pending:
            if connection._write_sock is None:
                async_object.set_exception(ConnectionClosedError("Connection has been closed"))
                return None
            connection.wake()
        return None
