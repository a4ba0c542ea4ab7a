"""The storage layer's own errors: failures of the broker's files, which stop a log or the
broker from loading and are not reported to clients as such.

The errors a client can see (KAFKA_STORAGE_ERROR, an append too big for a segment, a
topic id that does not match) are Kafka's, in protocol/errors.py with all the others.
"""

from __future__ import annotations

__all__ = [
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptSnapshotError",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "LogDirLockedError",
    "StorageError",
]


class StorageError(Exception):
    """A broker's files are not what they should be; not reported to clients as such."""


class CorruptIndexError(StorageError):
    """An .index or .timeindex file failed its sanity check; the segment rebuilds it."""


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot (`.snapshot`) has an unknown version or a bad CRC."""


class IndexFullError(StorageError):
    """An append to an index with no free slot (the segment should have rolled first)."""


class InvalidOffsetError(StorageError):
    """An index append that would break the index's ordering (a bug, not bad input)."""


class IndexOffsetOverflowError(StorageError):
    """An offset too far from its segment's base offset to be stored as an int32 delta."""


class CorruptCheckpointError(StorageError):
    """A checkpoint file (offsets, leader epochs, partition metadata) cannot be parsed."""


class InconsistentBrokerIdError(StorageError):
    """meta.properties in a log dir names another broker id than this broker's."""


class InconsistentClusterIdError(StorageError):
    """meta.properties in a log dir names another cluster than this broker's."""


class LogDirError(StorageError):
    """A configured log dir that is not a usable directory."""


class LogDirLockedError(StorageError):
    """Another process holds the `.lock` file of a log dir."""
