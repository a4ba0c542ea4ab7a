"""The `__consumer_offsets` records of share groups (KIP-932), as Kafka 4.2+ writes them.

Kafka's group-coordinator message JSONs (ShareGroup*Key/Value), read and written with the
field reader and writer of coordinator_records.py: a key is its int16 record type then a
non-flexible struct (group id, and member id where there is one); a value is its int16
version (0) then a struct flexible from v0. A null value is a tombstone.

Record types: 10 a member's metadata (rack, client, subscription), 11 the group's epoch
and the hash of its subscribed topics' metadata, 12 the target assignment's epoch (Kafka
4.3+ adds its timestamp as tag 0), 13 a member's target assignment, 14 a member's current
assignment and epoch, 15 which topic partitions' share state is initializing,
initialized, or being deleted.

Nothing here does I/O, so storage/ and the Spark jobs can import it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

from kio.serial import readers as r
from kio.serial import writers as w

from .coordinator_records import CoordinatorRecordError, FieldReader, FieldWriter, parse_record

VALUE_VERSION = 0


# --- keys (non-flexible) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShareGroupMemberMetadataKey:
    record_type: ClassVar[int] = 10
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupMetadataKey:
    record_type: ClassVar[int] = 11
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMetadataKey:
    record_type: ClassVar[int] = 12
    group_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupTargetAssignmentMemberKey:
    record_type: ClassVar[int] = 13
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupCurrentMemberAssignmentKey:
    record_type: ClassVar[int] = 14
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ShareGroupStatePartitionMetadataKey:
    record_type: ClassVar[int] = 15
    group_id: str


ShareGroupKey: TypeAlias = (
    ShareGroupMemberMetadataKey
    | ShareGroupMetadataKey
    | ShareGroupTargetAssignmentMetadataKey
    | ShareGroupTargetAssignmentMemberKey
    | ShareGroupCurrentMemberAssignmentKey
    | ShareGroupStatePartitionMetadataKey
)
_MEMBER_KEYS = (
    ShareGroupMemberMetadataKey,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupCurrentMemberAssignmentKey,
)
KEY_TYPES: dict[int, type[Any]] = {
    k.record_type: k
    for k in (
        ShareGroupMemberMetadataKey,
        ShareGroupMetadataKey,
        ShareGroupTargetAssignmentMetadataKey,
        ShareGroupTargetAssignmentMemberKey,
        ShareGroupCurrentMemberAssignmentKey,
        ShareGroupStatePartitionMetadataKey,
    )
}
RECORD_TYPES = frozenset(KEY_TYPES)


# --- values (flexible from v0) --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMemberMetadataValue:
    rack_id: str | None = None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    # Kafka 4.3+ (KIP-1263), tag 0: when the assignment was computed (0: not written).
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int = 0
    assigned_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionsInfo:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    topic_id: uuid.UUID
    topic_name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupStatePartitionMetadataValue:
    initializing_topics: tuple[TopicPartitionsInfo, ...] = ()
    initialized_topics: tuple[TopicPartitionsInfo, ...] = ()
    deleting_topics: tuple[TopicInfo, ...] = ()


ShareGroupValue: TypeAlias = (
    ShareGroupMemberMetadataValue
    | ShareGroupMetadataValue
    | ShareGroupTargetAssignmentMetadataValue
    | ShareGroupTargetAssignmentMemberValue
    | ShareGroupCurrentMemberAssignmentValue
    | ShareGroupStatePartitionMetadataValue
)


# --- writing ------------------------------------------------------------------------------


def encode_key(key: ShareGroupKey) -> bytes:
    writer = FieldWriter(key.record_type)
    writer.string(key.group_id)
    if isinstance(key, _MEMBER_KEYS):
        writer.string(key.member_id)
    return writer.getvalue()


def _topic_partitions(writer: FieldWriter, topics: Sequence[TopicPartitions]) -> None:
    writer.array_length(len(topics))
    for topic in topics:
        writer.uuid(topic.topic_id)
        writer.int32s(topic.partitions)
        writer.tagged_fields()


def _topic_partitions_info(writer: FieldWriter, topics: Sequence[TopicPartitionsInfo]) -> None:
    writer.array_length(len(topics))
    for topic in topics:
        writer.uuid(topic.topic_id)
        writer.string(topic.topic_name)
        writer.int32s(topic.partitions)
        writer.tagged_fields()


def encode_value(value: ShareGroupValue) -> bytes:
    writer = FieldWriter(VALUE_VERSION, flexible=True)
    tagged: list[tuple[int, Callable[[Any, Any], None], Any]] = []
    if isinstance(value, ShareGroupMemberMetadataValue):
        writer.nullable_string(value.rack_id)
        writer.string(value.client_id)
        writer.string(value.client_host)
        writer.strings(value.subscribed_topic_names)
    elif isinstance(value, ShareGroupMetadataValue):
        writer.int32(value.epoch)
        writer.int64(value.metadata_hash)
    elif isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        writer.int32(value.assignment_epoch)
        if value.assignment_timestamp != 0:
            tagged.append((0, w.write_int64, value.assignment_timestamp))
    elif isinstance(value, ShareGroupTargetAssignmentMemberValue):
        _topic_partitions(writer, value.topic_partitions)
    elif isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        writer.int32(value.member_epoch)
        writer.int32(value.previous_member_epoch)
        writer.int8(value.state)
        _topic_partitions(writer, value.assigned_partitions)
    else:
        _topic_partitions_info(writer, value.initializing_topics)
        _topic_partitions_info(writer, value.initialized_topics)
        writer.array_length(len(value.deleting_topics))
        for topic in value.deleting_topics:
            writer.uuid(topic.topic_id)
            writer.string(topic.topic_name)
            writer.tagged_fields()
    writer.tagged_fields(tagged)
    return writer.getvalue()


# --- reading ------------------------------------------------------------------------------


def _read_topic_partitions(reader: FieldReader, name: str) -> tuple[TopicPartitions, ...]:
    count = reader.array_length(nullable=False, name=name) or 0
    topics = []
    for _ in range(count):
        topic = TopicPartitions(topic_id=reader.uuid(), partitions=reader.int32s(name) or ())
        reader.tagged_fields()
        topics.append(topic)
    return tuple(topics)


def _read_topic_partitions_info(reader: FieldReader, name: str) -> tuple[TopicPartitionsInfo, ...]:
    count = reader.array_length(nullable=False, name=name) or 0
    topics = []
    for _ in range(count):
        topic = TopicPartitionsInfo(
            topic_id=reader.uuid(),
            topic_name=reader.string(),
            partitions=reader.int32s(name) or (),
        )
        reader.tagged_fields()
        topics.append(topic)
    return tuple(topics)


def decode_key(data: bytes | memoryview) -> ShareGroupKey:
    def parse() -> ShareGroupKey:
        record_type = struct.unpack_from(">h", data, 0)[0]
        key_type = KEY_TYPES.get(record_type)
        if key_type is None:
            raise CoordinatorRecordError(f"record type {record_type} is not a share group's")
        reader = FieldReader(data, 2, flexible=False)
        group_id = reader.string()
        if key_type in _MEMBER_KEYS:
            member: ShareGroupKey = key_type(group_id, reader.string())
            return member
        key: ShareGroupKey = key_type(group_id)
        return key

    return parse_record("a share group key", parse)


def decode_value(key: ShareGroupKey, data: bytes | memoryview) -> ShareGroupValue:
    def parse() -> ShareGroupValue:
        version = struct.unpack_from(">h", data, 0)[0]
        if version != VALUE_VERSION:
            raise CoordinatorRecordError(
                f"value version {version} of {type(key).__name__} is not one Kafka 4.4 writes"
            )
        reader = FieldReader(data, 2, flexible=True)
        value: ShareGroupValue
        if isinstance(key, ShareGroupMemberMetadataKey):
            value = ShareGroupMemberMetadataValue(
                rack_id=reader.nullable_string(),
                client_id=reader.string(),
                client_host=reader.string(),
                subscribed_topic_names=reader.strings("SubscribedTopicNames"),
            )
            reader.tagged_fields()
        elif isinstance(key, ShareGroupMetadataKey):
            value = ShareGroupMetadataValue(epoch=reader.int32(), metadata_hash=reader.int64())
            reader.tagged_fields()
        elif isinstance(key, ShareGroupTargetAssignmentMetadataKey):
            epoch = reader.int32()
            raw = reader.tagged_fields().get(0)
            timestamp = int(r.read_int64(raw, 0)[0]) if raw is not None else 0
            value = ShareGroupTargetAssignmentMetadataValue(
                assignment_epoch=epoch, assignment_timestamp=timestamp
            )
        elif isinstance(key, ShareGroupTargetAssignmentMemberKey):
            value = ShareGroupTargetAssignmentMemberValue(
                topic_partitions=_read_topic_partitions(reader, "TopicPartitions")
            )
            reader.tagged_fields()
        elif isinstance(key, ShareGroupCurrentMemberAssignmentKey):
            value = ShareGroupCurrentMemberAssignmentValue(
                member_epoch=reader.int32(),
                previous_member_epoch=reader.int32(),
                state=reader.int8(),
                assigned_partitions=_read_topic_partitions(reader, "AssignedPartitions"),
            )
            reader.tagged_fields()
        else:
            initializing = _read_topic_partitions_info(reader, "InitializingTopics")
            initialized = _read_topic_partitions_info(reader, "InitializedTopics")
            count = reader.array_length(nullable=False, name="DeletingTopics") or 0
            deleting = []
            for _ in range(count):
                deleting.append(TopicInfo(topic_id=reader.uuid(), topic_name=reader.string()))
                reader.tagged_fields()
            value = ShareGroupStatePartitionMetadataValue(
                initializing_topics=initializing,
                initialized_topics=initialized,
                deleting_topics=tuple(deleting),
            )
            reader.tagged_fields()
        return value

    return parse_record(f"a {type(key).__name__} value", parse)
