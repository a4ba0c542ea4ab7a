"""A `__consumer_offsets` partition's records, decoded and handed to their owner.

Offset commits go through OffsetCommitReplay (offsets.py: the pending transactional
ones wait for their marker); a classic group's metadata record is handed over as it is
(a tombstone as None): the broker rebuilds the group's members from it, the audit shows
it. Kafka 4's consumer group records (protocol/consumer_group_records.py) are handed over
decoded, and so are share groups' (protocol/share_group_records.py). Records this
broker cannot read the meaning of (a key type of a newer group
protocol, a value version newer than the schemas it knows) are skipped, and the owner is
told so it can count or log them; bytes that do not parse as what they claim raise
CoordinatorRecordError.
"""

from __future__ import annotations

from typing import Protocol

from brook.protocol import consumer_group_records as cgr
from brook.protocol import share_group_records as sgr
from brook.protocol.coordinator_records import (
    CONSUMER_OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    Key,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownRecord,
    UnknownValue,
    decode_key,
    decode_value,
)

from .offsets import CommittedOffset, OffsetCommitReplay


class ConsumerOffsetsState(Protocol):
    """What a replay changes: its owner's view of groups and offsets."""

    def offset_changed(
        self, key: OffsetCommitKey, committed: CommittedOffset | None, offset: int
    ) -> None:
        """A committed offset applies (None: deleted), by the record at log `offset`."""
        ...

    def group_changed(self, group: str, value: GroupMetadataValue | None, offset: int) -> None:
        """A classic group's metadata record (None: the group was deleted)."""
        ...

    def consumer_group_changed(
        self, key: cgr.ConsumerGroupKey, value: cgr.ConsumerGroupValue | None, offset: int
    ) -> None:
        """A record of a consumer group of Kafka 4's protocol (None: a tombstone)."""
        ...

    def share_group_changed(
        self, key: sgr.ShareGroupKey, value: sgr.ShareGroupValue | None, offset: int
    ) -> None:
        """A record of a share group (KIP-932) (None: a tombstone)."""
        ...

    def skipped(self, offset: int, key: Key, value_version: int | None) -> None:
        """The record at `offset` was not applied: its key type (value_version None) or
        its value version is not one this broker knows."""
        ...


class ConsumerOffsetsReplay:
    """One `__consumer_offsets` partition replayed in log order into `state`."""

    def __init__(self, state: ConsumerOffsetsState) -> None:
        self._state = state
        self.offsets = OffsetCommitReplay(state.offset_changed)

    def replay(self, offset: int, producer_id: int, key: bytes, value: bytes | None) -> None:
        """The record at log `offset` of a batch written by `producer_id`."""
        decoded = decode_key(key, CONSUMER_OFFSETS_TOPIC)
        if isinstance(decoded, UnknownRecord):
            if decoded.version in sgr.RECORD_TYPES:
                share_key = sgr.decode_key(key)
                share_value = sgr.decode_value(share_key, value) if value is not None else None
                self._state.share_group_changed(share_key, share_value, offset)
                return
            if decoded.version not in cgr.RECORD_TYPES:
                self._state.skipped(offset, decoded, None)
                return
            consumer_group = cgr.decode(decoded.version, key, value)
            if consumer_group is None:
                assert value is not None  # a tombstone always decodes
                self._state.skipped(offset, decoded, cgr.value_version(value))
            elif consumer_group[0].record_type == cgr.PARTITION_METADATA_TYPE:
                pass  # Kafka 4.0's subscription metadata: Kafka 4.1 and Brook ignore it
            else:
                self._state.consumer_group_changed(consumer_group[0], consumer_group[1], offset)
            return
        decoded_value = decode_value(decoded, value)
        if isinstance(decoded_value, UnknownValue):
            self._state.skipped(offset, decoded, decoded_value.version)
            return
        if isinstance(decoded, OffsetCommitKey):
            assert decoded_value is None or isinstance(decoded_value, OffsetCommitValue)
            self.offsets.replay(decoded, decoded_value, producer_id, offset)
        elif isinstance(decoded, GroupMetadataKey):
            assert decoded_value is None or isinstance(decoded_value, GroupMetadataValue)
            self._state.group_changed(decoded.group, decoded_value, offset)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        self.offsets.replay_end_transaction_marker(producer_id, committed)
