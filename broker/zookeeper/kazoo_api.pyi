# The types of the part of kazoo (2.x) that kazoo_api.py re-exports, as kazoo's code and
# documentation give them; mypy reads this file in place of kazoo_api.py. Declare here
# only what the broker uses, and re-export each name in kazoo_api.py.
#
# IAsyncResult is generic here only: write IAsyncResult[T] in annotations, which are not
# evaluated at run time (kazoo's class takes no parameter).

import logging
import threading
from collections.abc import Callable
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

_T = TypeVar("_T")

# --- kazoo.exceptions ----------------------------------------------------------------------

class KazooException(Exception): ...
class ZookeeperError(KazooException): ...
class RolledBackError(ZookeeperError): ...
class RuntimeInconsistency(ZookeeperError): ...
class ConnectionLoss(ZookeeperError): ...
class NoNodeError(ZookeeperError): ...
class BadVersionError(ZookeeperError): ...
class NodeExistsError(ZookeeperError): ...
class SessionExpiredError(ZookeeperError): ...

# --- kazoo.protocol.states -----------------------------------------------------------------

class KazooState:
    SUSPENDED: ClassVar[str]
    CONNECTED: ClassVar[str]
    LOST: ClassVar[str]

class EventType:
    CREATED: ClassVar[str]
    DELETED: ClassVar[str]
    CHANGED: ClassVar[str]
    CHILD: ClassVar[str]
    NONE: ClassVar[str]

class WatchedEvent(NamedTuple):
    type: str  # an EventType
    state: str  # a KeeperState
    path: str | None  # None for a change of the session

class ZnodeStat(NamedTuple):
    czxid: int
    mzxid: int
    ctime: int  # ms since the epoch
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeralOwner: int  # the session that owns an ephemeral znode; 0 for another
    dataLength: int
    numChildren: int
    pzxid: int

# --- kazoo.interfaces ----------------------------------------------------------------------

class IAsyncResult(Generic[_T]):
    def get(self, block: bool = True, timeout: float | None = None) -> _T: ...
    def get_nowait(self) -> _T: ...
    def rawlink(self, callback: Callable[[IAsyncResult[_T]], object]) -> None: ...

# --- kazoo.retry ---------------------------------------------------------------------------

class KazooRetry:
    def __init__(
        self,
        max_tries: int = 1,
        delay: float = 0.1,
        backoff: int = 2,
        max_jitter: float = 0.4,
        max_delay: float = 60.0,
        ignore_expire: bool = True,
    ) -> None: ...

# --- kazoo.client --------------------------------------------------------------------------

_Watch = Callable[[WatchedEvent], object]

class TransactionRequest:
    operations: list[object]  # the operations added so far, in order
    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: object = None,
        ephemeral: bool = False,
        sequence: bool = False,
    ) -> None: ...
    def delete(self, path: str, version: int = -1) -> None: ...
    def set_data(self, path: str, value: bytes, version: int = -1) -> None: ...
    def check(self, path: str, version: int) -> None: ...
    # One result per operation: its value (a path, a ZnodeStat, True) or its exception.
    def commit_async(self) -> IAsyncResult[list[Any]]: ...
    def commit(self) -> list[Any]: ...

class _Handler:
    timeout_exception: type[Exception]

# --- kazoo_transport (kazoo's connection thread, made cheap per request) -------------------

class LoopCallback:
    # A callback that only hands its argument to the event loop: kazoo's connection
    # thread runs it itself.
    def __init__(self, function: Callable[[Any], None]) -> None: ...
    def __call__(self, argument: Any) -> None: ...

class KazooClient:
    handler: _Handler
    def __init__(
        self,
        hosts: str = "127.0.0.1:2181",
        timeout: float = 10.0,
        *,
        connection_retry: KazooRetry | None = None,
        logger: logging.Logger | None = None,
        handler: _Handler | None = None,
    ) -> None: ...
    @property
    def client_state(self) -> str: ...
    @property
    def client_id(self) -> tuple[int, bytes] | None: ...
    @property
    def connected(self) -> bool: ...
    def add_listener(self, listener: Callable[[str], object]) -> None: ...
    def start(self, timeout: float = 15) -> None: ...
    def start_async(self) -> threading.Event: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...
    def transaction(self) -> TransactionRequest: ...
    def exists(self, path: str, watch: _Watch | None = None) -> ZnodeStat | None: ...
    def exists_async(
        self, path: str, watch: _Watch | None = None
    ) -> IAsyncResult[ZnodeStat | None]: ...
    def get_async(
        self, path: str, watch: _Watch | None = None
    ) -> IAsyncResult[tuple[bytes, ZnodeStat]]: ...
    def get_children_async(
        self, path: str, watch: _Watch | None = None
    ) -> IAsyncResult[list[str]]: ...
    def create_async(
        self,
        path: str,
        value: bytes = b"",
        acl: object = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> IAsyncResult[str]: ...
    def set_async(self, path: str, value: bytes, version: int = -1) -> IAsyncResult[ZnodeStat]: ...

# KazooClient over kazoo_transport's connection and handler (pass it no handler).
class BrookKazooClient(KazooClient): ...
