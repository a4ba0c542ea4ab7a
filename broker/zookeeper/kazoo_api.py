"""The part of kazoo the broker uses, in one place, with its types.

kazoo ships no type information (no py.typed, no stubs package). Every module under
zookeeper/ (and the tools that start a ZooKeeper session) imports kazoo's names from
here; kazoo_api.pyi beside this file declares their types, and mypy reads it in place
of this file. Only names that kazoo_api.pyi declares are re-exported here.
"""

import selectors
import types
from typing import Any

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    ZookeeperError,
)
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.handlers.utils import selector_select
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

# selectors' names as kazoo's selector_select looks them up, with poll(2) for its selector.
_POLL = types.SimpleNamespace(
    DefaultSelector=selectors.PollSelector,
    EVENT_READ=selectors.EVENT_READ,
    EVENT_WRITE=selectors.EVENT_WRITE,
)


class PollingHandler(SequentialThreadingHandler):  # type: ignore[misc]  # kazoo is untyped
    """kazoo's threading handler, whose connection thread waits on its two sockets with a
    poll(2) object rather than a new epoll instance each time (three system calls and a
    descriptor a wait, thousands of waits when a broker reads thousands of znodes: 15%
    of the client's CPU over 9,000 reads). poll, not select(2): a broker's descriptors
    pass 1,024, which select cannot watch."""

    def select(self, *args: Any, **kwargs: Any) -> Any:
        return selector_select(*args, selectors_module=_POLL, **kwargs)


__all__ = [
    "BadVersionError",
    "ConnectionLoss",
    "EventType",
    "IAsyncResult",
    "KazooClient",
    "KazooException",
    "KazooRetry",
    "KazooState",
    "NoNodeError",
    "NodeExistsError",
    "PollingHandler",
    "RolledBackError",
    "RuntimeInconsistency",
    "SessionExpiredError",
    "TransactionRequest",
    "WatchedEvent",
    "ZnodeStat",
    "ZookeeperError",
]
