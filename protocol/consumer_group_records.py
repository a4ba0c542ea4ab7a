"""The `__consumer_offsets` records of Kafka 4's consumer groups (KIP-848), as Kafka writes them.

Kafka's group-coordinator message JSONs (ConsumerGroup*Key/Value), read and written with
the field reader and writer of coordinator_records.py. Framing as for every coordinator
record: a key is its int16 record type then a non-flexible struct; a value is its int16
version (0 for all of these) then a struct that is flexible from v0. A null value is a
tombstone.

Record types: 3 the group's epoch (and, from Kafka 4.1, the hash of its subscribed
topics' metadata, KIP-1101), 4 the subscribed topics' metadata (Kafka 4.0 only: read
and ignored, as Kafka 4.1 does), 5 a member's subscription, 6 the target assignment's
epoch, 7 a member's target assignment, 8 a member's current assignment and epoch, 16 a
regular expression's resolved topics.

Tagged fields: those Kafka 4.4 defines are read and written (a member's classic-protocol
metadata, the target's timestamp, each topic's assignment epochs); any other tag, of a
newer Kafka, is skipped, as Kafka's readers skip what they do not know. A nullable
struct in a tagged field starts with a byte that says whether it is there (0: null),
as Kafka writes it. Checked byte for byte against Kafka 4.4's own classes and log dirs
(tests/protocol/test_consumer_group_records.py, tests/apache_kafka/).

Nothing here does I/O, so storage/ and the Spark jobs can import it.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias, TypeVar

from kio.serial import readers as r
from kio.serial import writers as w

from .coordinator_records import CoordinatorRecordError, FieldReader, FieldWriter, parse_record

VALUE_VERSION = 0
PARTITION_METADATA_TYPE = 4

T = TypeVar("T")


class ConsumerGroupRecordError(CoordinatorRecordError):
    """A consumer group record's bytes do not parse as its schema."""


# --- keys (non-flexible) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    record_type: ClassVar[int] = 3
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    record_type: ClassVar[int] = 4
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    record_type: ClassVar[int] = 5
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    record_type: ClassVar[int] = 6
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    record_type: ClassVar[int] = 7
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    record_type: ClassVar[int] = 8
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    record_type: ClassVar[int] = 16
    group_id: str
    regular_expression: str


# --- values (flexible from v0) --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataValue:
    epoch: int
    # Kafka 4.1+ (KIP-1101), tag 0: a hash of the subscribed topics' metadata.
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol inside a consumer group."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None  # tag 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    # Kafka 4.3+ (KIP-1263), tag 0: when the assignment was computed.
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...] = ()
    # Kafka 4.4, tag 0: the epoch at which each partition was assigned (current
    # assignments only); None when not written.
    assignment_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...] = ()
    version: int
    timestamp: int


ConsumerGroupKey: TypeAlias = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerGroupValue: TypeAlias = (
    ConsumerGroupMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)

KEY_TYPES: dict[int, type[Any]] = {
    k.record_type: k
    for k in (
        ConsumerGroupMetadataKey,
        ConsumerGroupPartitionMetadataKey,
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupRegularExpressionKey,
    )
}
RECORD_TYPES = frozenset(KEY_TYPES)


# --- keys --------------------------------------------------------------------------------


def encode_key(key: ConsumerGroupKey) -> bytes:
    writer = FieldWriter(key.record_type)
    writer.string(key.group_id)
    if isinstance(
        key,
        ConsumerGroupMemberMetadataKey
        | ConsumerGroupTargetAssignmentMemberKey
        | ConsumerGroupCurrentMemberAssignmentKey,
    ):
        writer.string(key.member_id)
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        writer.string(key.regular_expression)
    return writer.getvalue()


def _decode_key(record_type: int, data: bytes | memoryview) -> ConsumerGroupKey:
    reader = FieldReader(data, 2, flexible=False)
    key_type = KEY_TYPES[record_type]
    group_id = reader.string()
    if key_type is ConsumerGroupRegularExpressionKey:
        return ConsumerGroupRegularExpressionKey(group_id, reader.string())
    if key_type in (
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupCurrentMemberAssignmentKey,
    ):
        key: ConsumerGroupKey = key_type(group_id, reader.string())
        return key
    key = key_type(group_id)
    return key


# --- values: writing -----------------------------------------------------------------------


def _write_topic_partitions(writer: FieldWriter, topics: Sequence[TopicPartitions]) -> None:
    writer.array_length(len(topics))
    for topic in topics:
        writer.uuid(topic.topic_id)
        writer.int32s(topic.partitions)
        tagged: list[tuple[int, Callable[[Any, Any], None], Any]] = []
        epochs = topic.assignment_epochs
        if epochs is not None:
            sub = FieldWriter(None, flexible=True)  # a tagged field: no version before it
            sub.int32s(epochs)
            tagged.append((0, _raw_writer, sub.getvalue()))
        writer.tagged_fields(tagged)


def _encoded(write: Callable[[FieldWriter], None]) -> bytes:
    """A tagged field's content: fields with no version before them."""
    sub = FieldWriter(None, flexible=True)
    write(sub)
    return sub.getvalue()


def _raw_writer(buffer: Any, value: bytes) -> None:
    buffer.write(value)


def encode_value(value: ConsumerGroupValue) -> bytes:
    writer = FieldWriter(VALUE_VERSION, flexible=True)
    tagged: list[tuple[int, Callable[[Any, Any], None], Any]] = []
    if isinstance(value, ConsumerGroupMetadataValue):
        writer.int32(value.epoch)
        if value.metadata_hash != 0:
            tagged.append((0, w.write_int64, value.metadata_hash))
    elif isinstance(value, ConsumerGroupMemberMetadataValue):
        writer.nullable_string(value.instance_id)
        writer.nullable_string(value.rack_id)
        writer.string(value.client_id)
        writer.string(value.client_host)
        writer.strings(value.subscribed_topic_names)
        writer.nullable_string(value.subscribed_topic_regex)
        writer.int32(value.rebalance_timeout_ms)
        writer.nullable_string(value.server_assignor)
        classic = value.classic_member_metadata
        if classic is not None:
            tagged.append((0, _raw_writer, _encoded(lambda f: _write_classic(f, classic))))
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        writer.int32(value.assignment_epoch)
        if value.assignment_timestamp != 0:
            tagged.append((0, w.write_int64, value.assignment_timestamp))
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        _write_topic_partitions(writer, value.topic_partitions)
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        writer.int32(value.member_epoch)
        writer.int32(value.previous_member_epoch)
        writer.int8(value.state)
        _write_topic_partitions(writer, value.assigned_partitions)
        _write_topic_partitions(writer, value.partitions_pending_revocation)
    else:
        writer.strings(value.topics)
        writer.int64(value.version)
        writer.int64(value.timestamp)
    writer.tagged_fields(tagged)
    return writer.getvalue()


def _write_classic(writer: FieldWriter, classic: ClassicMemberMetadata) -> None:
    writer.int8(1)  # present
    writer.int32(classic.session_timeout_ms)
    writer.array_length(len(classic.supported_protocols))
    for protocol in classic.supported_protocols:
        writer.string(protocol.name)
        writer.blob(protocol.metadata)
        writer.tagged_fields()
    writer.tagged_fields()


# --- values: reading -----------------------------------------------------------------------


def _read_topic_partitions(reader: FieldReader, name: str) -> tuple[TopicPartitions, ...]:
    length = reader.array_length(nullable=False, name=name) or 0
    topics = []
    for _ in range(length):
        topic_id = reader.uuid()
        partitions = reader.int32s(f"{name}.partitions") or ()
        epochs = None
        raw = reader.tagged_fields().get(0)
        if raw is not None:
            epochs = FieldReader(raw, 0, flexible=True).int32s("assignment_epochs", nullable=True)
        topics.append(
            TopicPartitions(topic_id=topic_id, partitions=partitions, assignment_epochs=epochs)
        )
    return tuple(topics)


def _int64_tag(tagged: dict[int, memoryview], tag: int, default: int) -> int:
    raw = tagged.get(tag)
    if raw is None:
        return default
    value: int = r.read_int64(raw, 0)[0]
    return value


def _read_classic(raw: memoryview) -> ClassicMemberMetadata | None:
    reader = FieldReader(raw, 0, flexible=True)
    if reader.int8() <= 0:
        return None  # Kafka writes 0 for a null struct here
    session_timeout_ms = reader.int32()
    length = reader.array_length(nullable=False, name="supported_protocols") or 0
    protocols = []
    for _ in range(length):
        name = reader.string()
        metadata = reader.blob()
        reader.tagged_fields()
        protocols.append(ClassicProtocol(name=name, metadata=metadata))
    reader.tagged_fields()
    return ClassicMemberMetadata(
        session_timeout_ms=session_timeout_ms, supported_protocols=tuple(protocols)
    )


def _decode_value(record_type: int, data: bytes | memoryview) -> ConsumerGroupValue:
    reader = FieldReader(data, 2, flexible=True)
    if record_type == 3:
        epoch = reader.int32()
        tagged = reader.tagged_fields()
        return ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=_int64_tag(tagged, 0, 0))
    if record_type == 5:
        instance_id = reader.nullable_string()
        rack_id = reader.nullable_string()
        client_id = reader.string()
        client_host = reader.string()
        topics = reader.strings("subscribed_topic_names")
        regex = reader.nullable_string()
        rebalance_timeout_ms = reader.int32()
        server_assignor = reader.nullable_string()
        tagged = reader.tagged_fields()
        classic = _read_classic(tagged[0]) if 0 in tagged else None
        return ConsumerGroupMemberMetadataValue(
            instance_id=instance_id,
            rack_id=rack_id,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=topics,
            subscribed_topic_regex=regex,
            rebalance_timeout_ms=rebalance_timeout_ms,
            server_assignor=server_assignor,
            classic_member_metadata=classic,
        )
    if record_type == 6:
        epoch = reader.int32()
        tagged = reader.tagged_fields()
        return ConsumerGroupTargetAssignmentMetadataValue(
            assignment_epoch=epoch, assignment_timestamp=_int64_tag(tagged, 0, 0)
        )
    if record_type == 7:
        topics_partitions = _read_topic_partitions(reader, "topic_partitions")
        reader.tagged_fields()
        return ConsumerGroupTargetAssignmentMemberValue(topic_partitions=topics_partitions)
    if record_type == 8:
        member_epoch = reader.int32()
        previous = reader.int32()
        state = reader.int8()
        assigned = _read_topic_partitions(reader, "assigned_partitions")
        revoking = _read_topic_partitions(reader, "partitions_pending_revocation")
        reader.tagged_fields()
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member_epoch,
            previous_member_epoch=previous,
            state=state,
            assigned_partitions=assigned,
            partitions_pending_revocation=revoking,
        )
    topics = reader.strings("topics")
    version = reader.int64()
    timestamp = reader.int64()
    reader.tagged_fields()
    return ConsumerGroupRegularExpressionValue(topics=topics, version=version, timestamp=timestamp)


def value_version(value: bytes | memoryview) -> int:
    if len(value) < 2:
        raise ConsumerGroupRecordError(f"a value of {len(value)} bytes has no version")
    version: int = struct.unpack_from(">h", value, 0)[0]
    return version


def decode(
    record_type: int, key: bytes | memoryview, value: bytes | memoryview | None
) -> tuple[ConsumerGroupKey, ConsumerGroupValue | None] | None:
    """A consumer group record of `record_type` (the key's int16), or None if the type
    is not one of them or its value's version is newer than v0 (a newer Kafka's, which a
    reader skips). A value of type 4 decodes to None: Kafka 4.1+ ignores it too."""
    if record_type not in KEY_TYPES:
        return None
    decoded_key = _parse(
        f"consumer group key of type {record_type}", lambda: _decode_key(record_type, key)
    )
    if value is None or record_type == PARTITION_METADATA_TYPE:
        return decoded_key, None
    if value_version(value) != VALUE_VERSION:
        return None
    decoded = _parse(
        f"consumer group value of type {record_type}", lambda: _decode_value(record_type, value)
    )
    return decoded_key, decoded


def _parse(what: str, parse: Callable[[], T]) -> T:
    try:
        return parse_record(what, parse)
    except CoordinatorRecordError as exc:
        raise ConsumerGroupRecordError(str(exc)) from None
