"""The records Kafka's coordinators write, byte for byte as Apache Kafka writes them.

Three families of records share one framing rule: every key and every value starts
with an int16 version, followed by the fields of that version of the schema.

- `__consumer_offsets` (group coordinator). The key's int16 is the record type:
  0 and 1 are an offset commit (group, topic, partition; 0 was written by Kafka 0.8.2,
  1 ever since), 2 is a classic group's metadata. Types 3 and up are KIP-848, share
  and streams groups; they decode to `UnknownRecord` so a reader can skip them. The
  value's int16 is the value schema's version: OffsetCommitValue v0-v4 and
  GroupMetadataValue v0-v4, where v4 is the first flexible version of both.
- `__transaction_state` (transaction coordinator). Key type 0 is a transactional id;
  TransactionLogValue v0 is fixed-layout, v1 is flexible and carries the producer id
  history and the client's transaction version as tagged fields.
- Control records (transaction markers) inside a data partition's control batches:
  the key is (version int16, type int16: ABORT=0, COMMIT=1), the value of a marker is
  (version int16, coordinator epoch int32). Both come from kio's generated schemas.

A flexible version writes strings, bytes and arrays with compact (unsigned varint
length + 1) prefixes and ends every struct with a tagged-field section; the others use
int16 string, int32 bytes and int32 array lengths with -1 for null. A null value is a
tombstone: compaction then deletes the key. Decoders skip tagged fields they do not
know and ignore bytes after the last field, as Kafka's generated readers do, so records
from a newer Kafka still load.

Nothing here does I/O, so storage/ and the Spark jobs can import it.
"""

from __future__ import annotations

import enum
import io
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar, cast, overload

from kio.schema.control_record_type_schema.v0 import ControlRecordTypeSchema
from kio.schema.end_txn_marker.v0 import EndTxnMarker as KioEndTxnMarker
from kio.serial import entity_reader, entity_writer
from kio.serial import readers as r
from kio.serial import writers as w
from kio.serial.errors import DecodeError
from kio.static.primitive import i8, i16, i32, i64, uvarint

from .errors import CorruptRecordError

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"

# Record types of `__consumer_offsets` keys (Kafka's CoordinatorRecordType ids).
LEGACY_OFFSET_COMMIT_KEY_VERSION = 0
OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
TRANSACTION_LOG_KEY_VERSION = 0
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0

OFFSET_COMMIT_VALUE_VERSIONS = range(5)
GROUP_METADATA_VALUE_VERSIONS = range(5)
TRANSACTION_LOG_VALUE_VERSIONS = range(2)

# What Kafka 4.x writes. Offset commits: v3, the newest non-flexible version, unless
# the commit carries an expire timestamp (OffsetCommit v1 requests), which only v1
# holds. Group metadata: v3. Transaction state: v1 once the cluster's
# transaction.version feature is 1 or more (every new Kafka 4 cluster), v0 before.
DEFAULT_OFFSET_COMMIT_VALUE_VERSION = 3
EXPIRING_OFFSET_COMMIT_VALUE_VERSION = 1
DEFAULT_GROUP_METADATA_VALUE_VERSION = 3
DEFAULT_TRANSACTION_LOG_VALUE_VERSION = 1

NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

_INT32_MIN = -(1 << 31)


class CoordinatorRecordError(CorruptRecordError):
    """A coordinator record's bytes do not parse as the schema its version names."""


class ControlRecordType(enum.IntEnum):
    """Types of control records; only ABORT and COMMIT are transaction markers."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


class TransactionStatus(enum.IntEnum):
    """TransactionLogValue's int8 status, Kafka's TransactionState ids."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


# --- keys -----------------------------------------------------------------------------
# Keys are frozen so they can index a coordinator's maps; the key version of an offset
# commit is kept for re-encoding but left out of equality, since both versions name the
# same (group, topic, partition).


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    key_version: int = field(default=OFFSET_COMMIT_KEY_VERSION, compare=False)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True)
class ControlRecordKey:
    """The key of a control record; `type` stays an int so unknown types survive."""

    type: int
    version: int = CONTROL_RECORD_KEY_VERSION


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A key whose type this module does not decode (KIP-848 records, newer Kafkas).

    `data` is the whole key, version included, so the record can be passed on intact.
    """

    version: int
    data: bytes


# --- values ---------------------------------------------------------------------------
# Fields a version lacks decode to the schema's default, so one class serves every
# version; encoding a version drops the fields it lacks (all of them are "ignorable"
# or tagged in Kafka's schemas).


@dataclass(slots=True, kw_only=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH  # v3+
    metadata: str = ""
    commit_timestamp: int = NO_TIMESTAMP
    expire_timestamp: int = NO_TIMESTAMP  # v1 only


@dataclass(slots=True, kw_only=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None = None  # v3+
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout: int = 0  # v1+
    session_timeout: int = 0
    subscription: bytes = b""
    assignment: bytes = b""


@dataclass(slots=True, kw_only=True)
class GroupMetadataValue:
    """A classic group; Kafka writes protocol_type "" and null protocol when empty."""

    protocol_type: str
    generation: int
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = NO_TIMESTAMP  # v2+
    members: list[MemberMetadata] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class TxnPartitions:
    topic: str
    partition_ids: list[int] = field(default_factory=list)


@dataclass(slots=True, kw_only=True)
class TransactionLogValue:
    """One transactional id's state.

    Kafka writes `transaction_partitions` as null in the Empty state and as a list
    (possibly empty) in every other; keep the distinction to stay byte-exact. The
    four tagged fields exist from v1 and are written only when not at their default.
    `next_producer_epoch` (tag 3) comes from KIP-939 (two-phase commit) in newer Kafka.
    """

    producer_id: int
    previous_producer_id: int = NO_PRODUCER_ID  # tag 0, v1+
    next_producer_id: int = NO_PRODUCER_ID  # tag 1, v1+
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: list[TxnPartitions] | None = None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int = NO_TIMESTAMP
    client_transaction_version: int = 0  # tag 2, v1+
    next_producer_epoch: int = NO_PRODUCER_EPOCH  # tag 3, v1+


@dataclass(slots=True, kw_only=True)
class EndTxnMarker:
    """The value of a COMMIT or ABORT control record."""

    coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class UnknownValue:
    """A value this module cannot decode: an unknown key type or value version."""

    version: int
    data: bytes


Key: TypeAlias = (
    OffsetCommitKey | GroupMetadataKey | TransactionLogKey | ControlRecordKey | UnknownRecord
)
Value: TypeAlias = (
    OffsetCommitValue | GroupMetadataValue | TransactionLogValue | EndTxnMarker | UnknownValue
)


# --- partition mapping ----------------------------------------------------------------


def java_string_hash_code(value: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as an int32.

    Characters outside the Basic Multilingual Plane count as two surrogate units, as
    they do in Java, so a group id maps to the partition Kafka would choose.
    """
    units = value.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_utils_abs(value: int) -> int:
    """Kafka's Utils.abs: like Math.abs, except Integer.MIN_VALUE maps to 0, not itself."""
    return 0 if value == _INT32_MIN else abs(value)


def group_partition(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of a group, hence its coordinator."""
    return _partition_for(group_id, num_partitions)


def transactional_id_partition(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state` partition of a transactional id, hence its coordinator."""
    return _partition_for(transactional_id, num_partitions)


def _partition_for(name: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError(f"partition count must be positive, not {num_partitions}")
    return java_utils_abs(java_string_hash_code(name)) % num_partitions


# --- primitive writing and reading over kio's serializers -----------------------------

T = TypeVar("T")


class FieldWriter:
    """Fields in Kafka's wire encoding, legacy or flexible, into one buffer."""

    __slots__ = ("buffer", "flexible")

    def __init__(self, version: int | None, *, flexible: bool = False) -> None:
        """`version` None: a struct with no version before it (a tagged field's)."""
        self.buffer = io.BytesIO()
        self.flexible = flexible
        if version is not None:
            w.write_int16(self.buffer, i16(version))

    # The field writers take plain ints: kio's phantom int types (i8, i16, ...) would check
    # the range a second time, per field, where struct already refuses an int that does
    # not fit. So the casts below only tell the type checker.
    def int8(self, value: int) -> None:
        w.write_int8(self.buffer, cast(i8, value))

    def int16(self, value: int) -> None:
        w.write_int16(self.buffer, cast(i16, value))

    def int32(self, value: int) -> None:
        w.write_int32(self.buffer, cast(i32, value))

    def int64(self, value: int) -> None:
        w.write_int64(self.buffer, cast(i64, value))

    def uuid(self, value: uuid.UUID) -> None:
        w.write_uuid(self.buffer, value)

    def raw(self, value: bytes) -> None:
        self.buffer.write(value)

    def string(self, value: str) -> None:
        if value is None:
            raise ValueError("a non-nullable string field is None")
        self.nullable_string(value)

    def nullable_string(self, value: str | None) -> None:
        if self.flexible:
            w.write_nullable_compact_string(self.buffer, value)
        else:
            w.write_nullable_legacy_string(self.buffer, value)

    def blob(self, value: bytes) -> None:
        if value is None:
            raise ValueError("a non-nullable bytes field is None")
        if self.flexible:
            w.write_compact_string(self.buffer, bytes(value))
        else:
            w.write_legacy_bytes(self.buffer, bytes(value))

    def array_length(self, length: int | None) -> None:
        if self.flexible:
            w.write_compact_array_length(self.buffer, length)
        else:
            w.write_legacy_array_length(self.buffer, i32(-1 if length is None else length))

    def strings(self, values: Sequence[str]) -> None:
        """An array of strings."""
        self.array_length(len(values))
        for value in values:
            self.string(value)

    def int32s(self, values: Sequence[int]) -> None:
        """An array of int32s."""
        self.array_length(len(values))
        for value in values:
            self.int32(value)

    def tagged_fields(
        self, fields: Sequence[tuple[int, Callable[[Any, Any], None], Any]] = ()
    ) -> None:
        """The tagged-field section that ends each struct of a flexible version.

        `fields` holds only the tagged fields whose value is not their default, which
        is all Kafka writes.
        """
        if not self.flexible:
            return
        w.write_unsigned_varint(self.buffer, cast(uvarint, len(fields)))
        for tag, writer, value in sorted(fields, key=lambda item: item[0]):
            w.write_tagged_field(self.buffer, cast(uvarint, tag), writer, value)

    def getvalue(self) -> bytes:
        return self.buffer.getvalue()


class FieldReader:
    """Fields in Kafka's wire encoding from a buffer, tracking the position."""

    __slots__ = ("data", "flexible", "position")

    def __init__(self, data: bytes | memoryview, position: int, *, flexible: bool) -> None:
        self.data = data
        self.position = position
        self.flexible = flexible

    def _read(self, reader: Callable[[Any, int], tuple[T, int]]) -> T:
        value, size = reader(self.data, self.position)
        self.position += size
        return value

    def int8(self) -> int:
        return self._read(r.read_int8)

    def int16(self) -> int:
        return self._read(r.read_int16)

    def int32(self) -> int:
        return self._read(r.read_int32)

    def int64(self) -> int:
        return self._read(r.read_int64)

    def uuid(self) -> uuid.UUID:
        value = self._read(r.read_uuid)
        return value if value is not None else uuid.UUID(int=0)

    def string(self) -> str:
        return self._read(r.read_compact_string if self.flexible else r.read_legacy_string)

    def nullable_string(self) -> str | None:
        if self.flexible:
            return self._read(r.read_compact_string_nullable)
        return self._read(r.read_nullable_legacy_string)

    def blob(self) -> bytes:
        if self.flexible:
            return self._read(r.read_compact_string_as_bytes)
        return self._read(r.read_legacy_bytes)

    def array_length(self, *, nullable: bool, name: str) -> int | None:
        if self.flexible:
            length = self._read(r.read_compact_array_length)
        else:
            length = self._read(r.read_legacy_array_length)
            if length == -1:
                length = None
            elif length < -1:
                raise CoordinatorRecordError(f"array {name} has length {length}")
        if length is None and not nullable:
            raise CoordinatorRecordError(f"non-nullable array {name} is null")
        return length

    def strings(self, name: str) -> tuple[str, ...]:
        """A non-nullable array of strings (`name` for the error of a bad length)."""
        count = self.array_length(nullable=False, name=name) or 0
        return tuple(self.string() for _ in range(count))

    def int32s(self, name: str, nullable: bool = False) -> tuple[int, ...] | None:
        """An array of int32s; None when `nullable` and null."""
        count = self.array_length(nullable=nullable, name=name)
        if count is None:
            return None
        return tuple(self.int32() for _ in range(count))

    def tagged_fields(self) -> dict[int, memoryview]:
        """The tagged-field section: each tag's raw bytes, by tag."""
        if not self.flexible:
            return {}
        found: dict[int, memoryview] = {}
        for _ in range(self._read(r.read_unsigned_varint)):
            tag = self._read(r.read_unsigned_varint)
            size = self._read(r.read_unsigned_varint)
            end = self.position + size
            if end > len(self.data):
                raise CoordinatorRecordError(f"tagged field {tag} runs past the end")
            found[tag] = memoryview(self.data)[self.position : end]
            self.position = end
        return found


def parse_record(what: str, parse: Callable[[], T]) -> T:
    """Run a decoder, turning kio's and struct's complaints into one error type."""
    try:
        return parse()
    except CoordinatorRecordError:
        raise
    except (DecodeError, struct.error, ValueError, IndexError) as exc:
        raise CoordinatorRecordError(f"cannot decode {what}: {exc}") from exc


def _version(data: bytes | memoryview, what: str) -> int:
    if len(data) < 2:
        raise CoordinatorRecordError(f"{what} of {len(data)} bytes has no version")
    version: int = struct.unpack_from(">h", data, 0)[0]
    return version


# --- encoding -------------------------------------------------------------------------


def encode_key(key: Key) -> bytes:
    """The record key bytes of a coordinator record or a control record."""
    if isinstance(key, OffsetCommitKey):
        if key.key_version not in (LEGACY_OFFSET_COMMIT_KEY_VERSION, OFFSET_COMMIT_KEY_VERSION):
            raise ValueError(f"offset commit key version {key.key_version} does not exist")
        out = FieldWriter(key.key_version)
        out.string(key.group)
        out.string(key.topic)
        out.int32(key.partition)
        return out.getvalue()
    if isinstance(key, GroupMetadataKey):
        out = FieldWriter(GROUP_METADATA_KEY_VERSION)
        out.string(key.group)
        return out.getvalue()
    if isinstance(key, TransactionLogKey):
        out = FieldWriter(TRANSACTION_LOG_KEY_VERSION)
        out.string(key.transactional_id)
        return out.getvalue()
    if isinstance(key, ControlRecordKey):
        out = FieldWriter(key.version)
        _write_control_type(out.buffer, ControlRecordTypeSchema(type_=i16(key.type)))
        return out.getvalue()
    if isinstance(key, UnknownRecord):
        return key.data
    raise TypeError(f"not a coordinator record key: {key!r}")


@overload
def encode_value(value: None, version: int | None = None) -> None: ...
@overload
def encode_value(value: Value, version: int | None = None) -> bytes: ...
def encode_value(value: Value | None, version: int | None = None) -> bytes | None:
    """The record value bytes; None (a tombstone) stays None.

    Without `version`, the version Kafka 4.x writes for this value (see the DEFAULT_
    constants). A version lacking a field that is set drops it, as Kafka does for its
    ignorable and tagged fields.
    """
    if value is None:
        return None
    if isinstance(value, OffsetCommitValue):
        return _encode_offset_commit_value(value, version)
    if isinstance(value, GroupMetadataValue):
        return _encode_group_metadata_value(value, version)
    if isinstance(value, TransactionLogValue):
        return _encode_transaction_log_value(value, version)
    if isinstance(value, EndTxnMarker):
        if version is None:
            version = END_TXN_MARKER_VERSION
        if version != END_TXN_MARKER_VERSION:
            raise ValueError(f"end transaction marker version {version} does not exist")
        out = FieldWriter(version)
        _write_end_txn_marker(
            out.buffer, KioEndTxnMarker(coordinator_epoch=i32(value.coordinator_epoch))
        )
        return out.getvalue()
    if isinstance(value, UnknownValue):
        return value.data
    raise TypeError(f"not a coordinator record value: {value!r}")


def _check_version(name: str, version: int, versions: range) -> None:
    if version not in versions:
        raise ValueError(
            f"{name} version {version} does not exist (versions {versions.start}"
            f"-{versions.stop - 1})"
        )


def _encode_offset_commit_value(value: OffsetCommitValue, version: int | None) -> bytes:
    if version is None:
        version = (
            EXPIRING_OFFSET_COMMIT_VALUE_VERSION
            if value.expire_timestamp != NO_TIMESTAMP
            else DEFAULT_OFFSET_COMMIT_VALUE_VERSION
        )
    _check_version("OffsetCommitValue", version, OFFSET_COMMIT_VALUE_VERSIONS)
    out = FieldWriter(version, flexible=version >= 4)
    out.int64(value.offset)
    if version >= 3:
        out.int32(value.leader_epoch)
    out.string(value.metadata)
    out.int64(value.commit_timestamp)
    if version == 1:
        out.int64(value.expire_timestamp)
    out.tagged_fields()
    return out.getvalue()


def _encode_group_metadata_value(value: GroupMetadataValue, version: int | None) -> bytes:
    if version is None:
        version = DEFAULT_GROUP_METADATA_VALUE_VERSION
    _check_version("GroupMetadataValue", version, GROUP_METADATA_VALUE_VERSIONS)
    out = FieldWriter(version, flexible=version >= 4)
    out.string(value.protocol_type)
    out.int32(value.generation)
    out.nullable_string(value.protocol)
    out.nullable_string(value.leader)
    if version >= 2:
        out.int64(value.current_state_timestamp)
    out.array_length(len(value.members))
    for member in value.members:
        out.string(member.member_id)
        if version >= 3:
            out.nullable_string(member.group_instance_id)
        out.string(member.client_id)
        out.string(member.client_host)
        if version >= 1:
            out.int32(member.rebalance_timeout)
        out.int32(member.session_timeout)
        out.blob(member.subscription)
        out.blob(member.assignment)
        out.tagged_fields()
    out.tagged_fields()
    return out.getvalue()


def _encode_transaction_log_value(value: TransactionLogValue, version: int | None) -> bytes:
    if version is None:
        version = DEFAULT_TRANSACTION_LOG_VALUE_VERSION
    _check_version("TransactionLogValue", version, TRANSACTION_LOG_VALUE_VERSIONS)
    out = FieldWriter(version, flexible=version >= 1)
    out.int64(value.producer_id)
    out.int16(value.producer_epoch)
    out.int32(value.transaction_timeout_ms)
    out.int8(value.transaction_status)
    partitions = value.transaction_partitions
    out.array_length(None if partitions is None else len(partitions))
    for entry in partitions or ():
        out.string(entry.topic)
        out.array_length(len(entry.partition_ids))
        for partition_id in entry.partition_ids:
            out.int32(partition_id)
        out.tagged_fields()
    out.int64(value.transaction_last_update_timestamp_ms)
    out.int64(value.transaction_start_timestamp_ms)
    tagged: list[tuple[int, Callable[[Any, Any], None], int]] = []
    if value.previous_producer_id != NO_PRODUCER_ID:
        tagged.append((0, w.write_int64, value.previous_producer_id))
    if value.next_producer_id != NO_PRODUCER_ID:
        tagged.append((1, w.write_int64, value.next_producer_id))
    if value.client_transaction_version != 0:
        tagged.append((2, w.write_int16, value.client_transaction_version))
    if value.next_producer_epoch != NO_PRODUCER_EPOCH:
        tagged.append((3, w.write_int16, value.next_producer_epoch))
    out.tagged_fields(tagged)
    return out.getvalue()


_write_control_type = entity_writer(ControlRecordTypeSchema)
_read_control_type = entity_reader(ControlRecordTypeSchema)
_write_end_txn_marker = entity_writer(KioEndTxnMarker)
_read_end_txn_marker = entity_reader(KioEndTxnMarker)


# --- decoding -------------------------------------------------------------------------


def decode_key(data: bytes | memoryview, topic: str = CONSUMER_OFFSETS_TOPIC) -> Key:
    """Decode the key of a record in `__consumer_offsets` or `__transaction_state`.

    The topic matters: type 0 is an offset commit in one and a transactional id in the
    other. A type this module does not know decodes to UnknownRecord.
    """
    version = _version(data, "record key")
    reader = FieldReader(data, 2, flexible=False)
    if topic == CONSUMER_OFFSETS_TOPIC:
        if version in (LEGACY_OFFSET_COMMIT_KEY_VERSION, OFFSET_COMMIT_KEY_VERSION):
            return parse_record(
                "offset commit key",
                lambda: OffsetCommitKey(
                    reader.string(), reader.string(), reader.int32(), key_version=version
                ),
            )
        if version == GROUP_METADATA_KEY_VERSION:
            return parse_record("group metadata key", lambda: GroupMetadataKey(reader.string()))
    elif topic == TRANSACTION_STATE_TOPIC:
        if version == TRANSACTION_LOG_KEY_VERSION:
            return parse_record("transaction log key", lambda: TransactionLogKey(reader.string()))
    else:
        raise ValueError(f"{topic} holds no coordinator records")
    return UnknownRecord(version, bytes(data))


def decode_control_key(data: bytes | memoryview) -> ControlRecordKey:
    """Decode a control record's key as Kafka does: a newer version parses as v0."""
    if len(data) < 4:
        raise CoordinatorRecordError(f"control record key of {len(data)} bytes is too short")
    version = _version(data, "control record key")
    if version < 0:
        raise CoordinatorRecordError(f"control record key has version {version}")
    schema, _ = parse_record("control record key", lambda: _read_control_type(data, 2))
    try:
        control_type: int = ControlRecordType(schema.type_)
    except ValueError:
        control_type = schema.type_
    return ControlRecordKey(type=control_type, version=version)


def decode_value(key: Key, data: bytes | memoryview | None) -> Value | None:
    """Decode a record value by its key's type; None (a tombstone) stays None.

    An unknown key type or value version gives UnknownValue rather than an error, so
    a reader can skip records written by a newer Kafka. Bytes that do not parse as the
    version they claim raise CoordinatorRecordError.
    """
    if data is None:
        return None
    version = _version(data, "record value")
    if isinstance(key, OffsetCommitKey):
        if version not in OFFSET_COMMIT_VALUE_VERSIONS:
            return UnknownValue(version, bytes(data))
        return parse_record(
            "offset commit value", lambda: _decode_offset_commit_value(data, version)
        )
    if isinstance(key, GroupMetadataKey):
        if version not in GROUP_METADATA_VALUE_VERSIONS:
            return UnknownValue(version, bytes(data))
        return parse_record(
            "group metadata value", lambda: _decode_group_metadata_value(data, version)
        )
    if isinstance(key, TransactionLogKey):
        if version not in TRANSACTION_LOG_VALUE_VERSIONS:
            return UnknownValue(version, bytes(data))
        return parse_record(
            "transaction log value", lambda: _decode_transaction_log_value(data, version)
        )
    if isinstance(key, ControlRecordKey):
        if key.type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return UnknownValue(version, bytes(data))
        if version < 0 or len(data) < 6:
            raise CoordinatorRecordError(
                f"end transaction marker of {len(data)} bytes with version {version}"
            )
        marker, _ = parse_record("end transaction marker", lambda: _read_end_txn_marker(data, 2))
        return EndTxnMarker(coordinator_epoch=marker.coordinator_epoch)
    if isinstance(key, UnknownRecord):
        return UnknownValue(version, bytes(data))
    raise TypeError(f"not a coordinator record key: {key!r}")


def _decode_offset_commit_value(data: bytes | memoryview, version: int) -> OffsetCommitValue:
    reader = FieldReader(data, 2, flexible=version >= 4)
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else NO_LEADER_EPOCH
    metadata = reader.string()
    commit_timestamp = reader.int64()
    expire_timestamp = reader.int64() if version == 1 else NO_TIMESTAMP
    reader.tagged_fields()
    return OffsetCommitValue(
        offset=offset,
        leader_epoch=leader_epoch,
        metadata=metadata,
        commit_timestamp=commit_timestamp,
        expire_timestamp=expire_timestamp,
    )


def _decode_group_metadata_value(data: bytes | memoryview, version: int) -> GroupMetadataValue:
    reader = FieldReader(data, 2, flexible=version >= 4)
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    current_state_timestamp = reader.int64() if version >= 2 else NO_TIMESTAMP
    count = reader.array_length(nullable=False, name="members") or 0
    members: list[MemberMetadata] = []
    for _ in range(count):
        member_id = reader.string()
        group_instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.int32() if version >= 1 else 0
        session_timeout = reader.int32()
        subscription = reader.blob()
        assignment = reader.blob()
        reader.tagged_fields()
        members.append(
            MemberMetadata(
                member_id=member_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                rebalance_timeout=rebalance_timeout,
                session_timeout=session_timeout,
                subscription=subscription,
                assignment=assignment,
            )
        )
    reader.tagged_fields()
    return GroupMetadataValue(
        protocol_type=protocol_type,
        generation=generation,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=current_state_timestamp,
        members=members,
    )


def _decode_transaction_log_value(data: bytes | memoryview, version: int) -> TransactionLogValue:
    reader = FieldReader(data, 2, flexible=version >= 1)
    producer_id = reader.int64()
    producer_epoch = reader.int16()
    transaction_timeout_ms = reader.int32()
    transaction_status = reader.int8()
    count = reader.array_length(nullable=True, name="transaction partitions")
    partitions: list[TxnPartitions] | None = None
    if count is not None:
        partitions = []
        for _ in range(count):
            topic = reader.string()
            ids_count = reader.array_length(nullable=False, name="partition ids") or 0
            partition_ids = [reader.int32() for _ in range(ids_count)]
            reader.tagged_fields()
            partitions.append(TxnPartitions(topic=topic, partition_ids=partition_ids))
    last_update = reader.int64()
    start = reader.int64()
    tagged = reader.tagged_fields()
    return TransactionLogValue(
        producer_id=producer_id,
        previous_producer_id=_tagged(tagged, 0, r.read_int64, NO_PRODUCER_ID),
        next_producer_id=_tagged(tagged, 1, r.read_int64, NO_PRODUCER_ID),
        producer_epoch=producer_epoch,
        transaction_timeout_ms=transaction_timeout_ms,
        transaction_status=_status(transaction_status),
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=last_update,
        transaction_start_timestamp_ms=start,
        client_transaction_version=_tagged(tagged, 2, r.read_int16, 0),
        next_producer_epoch=_tagged(tagged, 3, r.read_int16, NO_PRODUCER_EPOCH),
    )


def _status(value: int) -> int:
    """The status as a TransactionStatus where known, so it prints by name."""
    try:
        return TransactionStatus(value)
    except ValueError:
        return value


def _tagged(
    tagged: dict[int, memoryview],
    tag: int,
    reader: Callable[[Any, int], tuple[int, int]],
    default: int,
) -> int:
    raw = tagged.get(tag)
    if raw is None:
        return default
    value, _ = reader(raw, 0)
    return value
