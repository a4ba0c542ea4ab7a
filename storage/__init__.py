"""A partition's log on disk, byte-compatible with Apache Kafka's.

Synchronous and free of asyncio, so the broker, tools and Spark executors can all use
it. Depends only on brook.protocol, the standard library and what brook.protocol needs
(kio, crc32c, cramjam). brook.storage.reader reads a log dir without changing it, for
tools and Spark; the broker's classes below open, recover and write logs.

The names below load with their module on first use (PEP 562), so that importing one
module (brook.storage.errors, say) does not load the whole package: `brook serve`
imports the log's classes only once it has a log to open.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checkpoints import (
        MetaProperties,
        OffsetCheckpointFile,
        read_meta_properties,
        read_partition_metadata,
        write_meta_properties,
        write_partition_metadata,
    )
    from .errors import (
        CorruptCheckpointError,
        CorruptIndexError,
        InconsistentBrokerIdError,
        InconsistentClusterIdError,
        LogDirLockedError,
        StorageError,
    )
    from .leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache
    from .log import AppendInfo, FetchDataInfo, Log
    from .log_config import LogConfig
    from .log_manager import LogManager
    from .log_segment import LogSegment, TimestampAndOffset
    from .offset_index import OffsetIndex
    from .time_index import TimeIndex

_MODULE_OF = {
    "MetaProperties": "checkpoints",
    "OffsetCheckpointFile": "checkpoints",
    "read_meta_properties": "checkpoints",
    "read_partition_metadata": "checkpoints",
    "write_meta_properties": "checkpoints",
    "write_partition_metadata": "checkpoints",
    "CorruptCheckpointError": "errors",
    "CorruptIndexError": "errors",
    "InconsistentBrokerIdError": "errors",
    "InconsistentClusterIdError": "errors",
    "LogDirLockedError": "errors",
    "StorageError": "errors",
    "UNDEFINED_EPOCH": "leader_epoch_cache",
    "UNDEFINED_EPOCH_OFFSET": "leader_epoch_cache",
    "LeaderEpochFileCache": "leader_epoch_cache",
    "AppendInfo": "log",
    "FetchDataInfo": "log",
    "Log": "log",
    "LogConfig": "log_config",
    "LogManager": "log_manager",
    "LogSegment": "log_segment",
    "TimestampAndOffset": "log_segment",
    "OffsetIndex": "offset_index",
    "TimeIndex": "time_index",
}

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "FetchDataInfo",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "LeaderEpochFileCache",
    "Log",
    "LogConfig",
    "LogDirLockedError",
    "LogManager",
    "LogSegment",
    "MetaProperties",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "StorageError",
    "TimeIndex",
    "TimestampAndOffset",
    "read_meta_properties",
    "read_partition_metadata",
    "write_meta_properties",
    "write_partition_metadata",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value
