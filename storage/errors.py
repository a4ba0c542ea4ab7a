"""Errors raised by the storage layer, named after Kafka's own exceptions.

Errors a client can see (an append too big for a segment, a follower append at the
wrong offset, a topic id that does not match) derive from KafkaError so the broker
turns them into the error code Kafka would send. The others are failures of the
broker's own files and stop a log or the broker from loading.
"""

from __future__ import annotations

from brook.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptSnapshotError",
    "InconsistentBrokerIdError",
    "InconsistentClusterIdError",
    "InconsistentTopicIdError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "KafkaStorageError",
    "LogDirLockedError",
    "RecordBatchTooLargeError",
    "StorageError",
    "UnexpectedAppendOffsetError",
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


class KafkaStorageError(KafkaError):
    """KAFKA_STORAGE_ERROR: an I/O failure on a log dir."""

    error_code = ErrorCode.kafka_storage_error


class RecordBatchTooLargeError(KafkaError):
    """RECORD_LIST_TOO_LARGE: an append larger than the segment size could never fit."""

    error_code = ErrorCode.record_list_too_large


class InconsistentTopicIdError(KafkaError):
    """INCONSISTENT_TOPIC_ID: partition.metadata holds another topic id than requested."""

    error_code = ErrorCode.inconsistent_topic_id


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end offset.

    Kafka reports this to the replica fetcher, which truncates and retries; it is
    never sent to a client, hence the generic code.
    """

    error_code = ErrorCode.unknown_server_error
