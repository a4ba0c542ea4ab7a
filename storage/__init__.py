"""A partition's log on disk, byte-compatible with Apache Kafka's.

Synchronous and free of asyncio, so the broker, tools and Spark executors can all use
it. Depends only on brook.protocol, the standard library and what brook.protocol needs
(kio, crc32c, cramjam). brook.storage.reader reads a log dir without changing it, for
tools and Spark; the broker's classes below open, recover and write logs.
"""

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
    InconsistentTopicIdError,
    LogDirLockedError,
    RecordBatchTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from .leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochFileCache
from .log import AppendInfo, FetchDataInfo, Log
from .log_config import LogConfig
from .log_manager import LogManager
from .log_segment import LogSegment, TimestampAndOffset
from .offset_index import OffsetIndex
from .time_index import TimeIndex

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "AppendInfo",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "FetchDataInfo",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "InconsistentTopicIdError",
    "LeaderEpochFileCache",
    "Log",
    "LogConfig",
    "LogDirLockedError",
    "LogManager",
    "LogSegment",
    "MetaProperties",
    "OffsetCheckpointFile",
    "OffsetIndex",
    "RecordBatchTooLargeError",
    "StorageError",
    "TimeIndex",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
    "read_meta_properties",
    "read_partition_metadata",
    "write_meta_properties",
    "write_partition_metadata",
]
