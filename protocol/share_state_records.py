"""The records of `__share_group_state` (KIP-932), as Kafka's share coordinator writes them.

Kafka's share-coordinator message JSONs: type 0 a ShareSnapshot (a share partition's whole
state), type 1 a ShareUpdate (the state batches one write changed, applied over the last
snapshot). A key is its int16 record type then a non-flexible struct (group id, topic id,
partition); a value is its int16 version (0) then a struct flexible from v0. A snapshot
key with a null value (a tombstone) deletes the state. Tag 0 of both values is the
delivery-complete count (Kafka 4.2, KIP-1226), -1 when unknown and then not written.

Nothing here does I/O, so storage/ and the Spark jobs can import it.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from kio.serial import readers as r
from kio.serial import writers as w

from .coordinator_records import CoordinatorRecordError, FieldReader, FieldWriter, parse_record

SNAPSHOT_TYPE = 0
UPDATE_TYPE = 1
VALUE_VERSION = 0
DELIVERY_COMPLETE_COUNT_TAG = 0
UNKNOWN_DELIVERY_COMPLETE_COUNT = -1


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    """The key of both record types: which share partition (`record_type` 0 or 1)."""

    record_type: int
    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        return coordinator_key(self.group_id, self.topic_id, self.partition)


@dataclass(frozen=True, slots=True)
class PersistedStateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT
    create_timestamp: int = 0
    write_timestamp: int = 0
    state_batches: tuple[PersistedStateBatch, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = UNKNOWN_DELIVERY_COMPLETE_COUNT
    state_batches: tuple[PersistedStateBatch, ...] = ()


ShareStateValue = ShareSnapshotValue | ShareUpdateValue


def coordinator_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """The share coordinator's key of a share partition, "group:topicId:partition", with
    the topic id in Kafka's form (URL-safe base64 without padding), whose hash places it
    in a `__share_group_state` partition."""
    import base64

    topic = base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")
    return f"{group_id}:{topic}:{partition}"


def encode_key(key: ShareStateKey) -> bytes:
    out = FieldWriter(key.record_type)
    out.string(key.group_id)
    out.uuid(key.topic_id)
    out.int32(key.partition)
    return out.getvalue()


def _write_batches(out: FieldWriter, batches: tuple[PersistedStateBatch, ...]) -> None:
    out.array_length(len(batches))
    for batch in batches:
        out.int64(batch.first_offset)
        out.int64(batch.last_offset)
        out.int8(batch.delivery_state)
        out.int16(batch.delivery_count)
        out.tagged_fields()


def _count_tag(count: int) -> list[tuple[int, object, int]]:
    if count == UNKNOWN_DELIVERY_COMPLETE_COUNT:
        return []
    return [(DELIVERY_COMPLETE_COUNT_TAG, w.write_int32, count)]


def encode_value(value: ShareStateValue) -> bytes:
    out = FieldWriter(VALUE_VERSION, flexible=True)
    out.int32(value.snapshot_epoch)
    if isinstance(value, ShareSnapshotValue):
        out.int32(value.state_epoch)
        out.int32(value.leader_epoch)
        out.int64(value.start_offset)
        out.int64(value.create_timestamp)
        out.int64(value.write_timestamp)
    else:
        out.int32(value.leader_epoch)
        out.int64(value.start_offset)
    _write_batches(out, value.state_batches)
    out.tagged_fields(_count_tag(value.delivery_complete_count))  # type: ignore[arg-type]
    return out.getvalue()


def decode_key(data: bytes | memoryview) -> ShareStateKey:
    def parse() -> ShareStateKey:
        record_type = struct.unpack_from(">h", data, 0)[0]
        if record_type not in (SNAPSHOT_TYPE, UPDATE_TYPE):
            raise CoordinatorRecordError(f"record type {record_type} is not a share state's")
        reader = FieldReader(data, 2, flexible=False)
        return ShareStateKey(record_type, reader.string(), reader.uuid(), reader.int32())

    return parse_record("a share state key", parse)


def _read_batches(reader: FieldReader) -> tuple[PersistedStateBatch, ...]:
    count = reader.array_length(nullable=False, name="StateBatches") or 0
    batches = []
    for _ in range(count):
        batch = PersistedStateBatch(reader.int64(), reader.int64(), reader.int8(), reader.int16())
        reader.tagged_fields()
        batches.append(batch)
    return tuple(batches)


def _delivery_complete_count(tags: dict[int, memoryview]) -> int:
    raw = tags.get(DELIVERY_COMPLETE_COUNT_TAG)
    if raw is None:
        return UNKNOWN_DELIVERY_COMPLETE_COUNT
    value, _ = r.read_int32(raw, 0)
    return int(value)


def decode_value(record_type: int, data: bytes | memoryview) -> ShareStateValue:
    def parse() -> ShareStateValue:
        version = struct.unpack_from(">h", data, 0)[0]
        if version != VALUE_VERSION:
            raise CoordinatorRecordError(f"share state value version {version} is unknown")
        reader = FieldReader(data, 2, flexible=True)
        snapshot_epoch = reader.int32()
        if record_type == SNAPSHOT_TYPE:
            state_epoch, leader_epoch = reader.int32(), reader.int32()
            start_offset = reader.int64()
            create_timestamp, write_timestamp = reader.int64(), reader.int64()
            batches = _read_batches(reader)
            count = _delivery_complete_count(reader.tagged_fields())
            return ShareSnapshotValue(
                snapshot_epoch=snapshot_epoch,
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start_offset,
                delivery_complete_count=count,
                create_timestamp=create_timestamp,
                write_timestamp=write_timestamp,
                state_batches=batches,
            )
        leader_epoch = reader.int32()
        start_offset = reader.int64()
        batches = _read_batches(reader)
        count = _delivery_complete_count(reader.tagged_fields())
        return ShareUpdateValue(
            snapshot_epoch=snapshot_epoch,
            leader_epoch=leader_epoch,
            start_offset=start_offset,
            delivery_complete_count=count,
            state_batches=batches,
        )

    return parse_record("a share state value", parse)
