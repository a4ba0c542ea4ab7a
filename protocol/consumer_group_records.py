"""The `__consumer_offsets` records of Kafka 4's consumer groups (KIP-848), as Kafka writes them.

kio carries the client protocol, not the coordinators' record schemas, so these
dataclasses declare Kafka's group-coordinator message JSONs (ConsumerGroup*Key/Value) in
kio's own form, and kio's generic reader and writer encode them: no codec by hand.
Framing as for every coordinator record (coordinator_records.py): a key is its int16
record type then a non-flexible struct; a value is its int16 version (0 for all of
these) then a struct that is flexible from v0. A null value is a tombstone.

Record types: 3 the group's epoch (and, from Kafka 4.1, the hash of its subscribed
topics' metadata, KIP-1101), 4 the subscribed topics' metadata (Kafka 4.0 only: read
and ignored, as Kafka 4.1 does), 5 a member's subscription, 6 the target assignment's
epoch, 7 a member's target assignment, 8 a member's current assignment and epoch, 16 a
regular expression's resolved topics.

Nothing here does I/O, so storage/ and the Spark jobs can import it. (No `from
__future__ import annotations`: kio reads the fields' types at run time.)
"""

import dataclasses
import io
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i64

from .coordinator_records import CoordinatorRecordError

VALUE_VERSION = 0
PARTITION_METADATA_TYPE = 4


class ConsumerGroupRecordError(CoordinatorRecordError):
    """A consumer group record's bytes do not parse as its schema."""


# --- keys (non-flexible) ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupPartitionMetadataKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(8)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    member_id: str = field(metadata={"kafka_type": "string"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupRegularExpressionKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(16)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    regular_expression: str = field(metadata={"kafka_type": "string"})


# --- values (flexible from v0) --------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    # Kafka 4.1+ (KIP-1101): a hash of the subscribed topics' metadata; a change of it
    # is what starts a new assignment when a topic gains partitions.
    metadata_hash: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(0))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicProtocol:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    metadata: bytes = field(metadata={"kafka_type": "bytes"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassicMemberMetadata:
    """A member that speaks the classic protocol inside a consumer group."""

    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    session_timeout_ms: i32 = field(metadata={"kafka_type": "int32"})
    supported_protocols: tuple[ClassicProtocol, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupMemberMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rack_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    client_id: str = field(metadata={"kafka_type": "string"})
    client_host: str = field(metadata={"kafka_type": "string"})
    subscribed_topic_names: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    subscribed_topic_regex: str | None = field(metadata={"kafka_type": "string"}, default=None)
    rebalance_timeout_ms: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    server_assignor: str | None = field(metadata={"kafka_type": "string"}, default=None)
    classic_member_metadata: ClassicMemberMetadata | None = field(metadata={"tag": 0}, default=None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    assignment_epoch: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupTargetAssignmentMemberValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    topic_partitions: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    state: i8 = field(metadata={"kafka_type": "int8"})
    assigned_partitions: tuple[TopicPartitions, ...] = ()
    partitions_pending_revocation: tuple[TopicPartitions, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupRegularExpressionValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(VALUE_VERSION)
    __flexible__: ClassVar[bool] = True
    topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    version: i64 = field(metadata={"kafka_type": "int64"})
    timestamp: i64 = field(metadata={"kafka_type": "int64"})


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

# Record type -> (key class, value class); type 4's value is not decoded (see above).
RECORD_TYPES: dict[int, tuple[type[Any], type[Any] | None]] = {
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, None),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    16: (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue),
}


def _write(entity: Any, version: int) -> bytes:
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def encode_key(key: ConsumerGroupKey) -> bytes:
    return _write(key, key.__version__)


def encode_value(value: ConsumerGroupValue) -> bytes:
    if isinstance(value, ConsumerGroupMemberMetadataValue) and value.classic_member_metadata:
        return _member_with_classic_metadata(value, value.classic_member_metadata)
    return _write(value, VALUE_VERSION)


def _member_with_classic_metadata(
    value: ConsumerGroupMemberMetadataValue, classic: ClassicMemberMetadata
) -> bytes:
    """kio writes a tagged nullable struct without the presence byte that Kafka writes
    before it (and that kio's reader expects), so this one tagged field is framed here:
    the value without it, whose tagged section (one 0 byte: no fields) is replaced by a
    section of one field, tag 0, holding the byte 1 and the struct."""
    bare = _write(dataclasses.replace(value, classic_member_metadata=None), VALUE_VERSION)
    assert bare[-1] == 0, "the value ends with an empty tagged-field section"
    body = io.BytesIO()
    body.write(b"\x01")
    entity_writer(ClassicMemberMetadata)(body, classic)
    return bare[:-1] + b"\x01\x00" + _uvarint(len(body.getvalue())) + body.getvalue()


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read(entity_type: type[Any], data: bytes | memoryview, what: str) -> Any:
    try:
        value, _ = entity_reader(entity_type)(bytes(data), 2)
    except (DecodeError, ValueError, IndexError, struct.error, UnicodeDecodeError) as exc:
        raise ConsumerGroupRecordError(f"{what} does not parse: {exc}") from None
    return value


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
    types = RECORD_TYPES.get(record_type)
    if types is None:
        return None
    key_type, value_type = types
    decoded_key = _read(key_type, key, f"consumer group record key of type {record_type}")
    if value is None or value_type is None:
        return decoded_key, None
    if value_version(value) != VALUE_VERSION:
        return None
    return decoded_key, _read(value_type, value, f"{value_type.__name__}")
