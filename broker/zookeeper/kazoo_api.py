"""The part of kazoo the broker uses, in one place, with its types.

kazoo ships no type information (no py.typed, no stubs package). Every module under
zookeeper/ (and the tools that start a ZooKeeper session) imports kazoo's names from
here; kazoo_api.pyi beside this file declares their types, and mypy reads it in place
of this file. Only names that kazoo_api.pyi declares are re-exported here.
"""

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
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from .kazoo_transport import BrookKazooClient, LoopCallback

__all__ = [
    "BadVersionError",
    "BrookKazooClient",
    "ConnectionLoss",
    "EventType",
    "IAsyncResult",
    "KazooClient",
    "KazooException",
    "KazooRetry",
    "KazooState",
    "LoopCallback",
    "NoNodeError",
    "NodeExistsError",
    "RolledBackError",
    "RuntimeInconsistency",
    "SessionExpiredError",
    "TransactionRequest",
    "WatchedEvent",
    "ZnodeStat",
    "ZookeeperError",
]
