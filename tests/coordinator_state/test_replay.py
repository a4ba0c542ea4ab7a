"""The replay rules the broker's coordinators and the audit share (brook.coordinator_state),
driven with records encoded by the broker's own schemas."""

from __future__ import annotations

import struct

import pytest
from kio.static.primitive import i32

from brook.coordinator_state.consumer_offsets import ConsumerOffsetsReplay
from brook.coordinator_state.offsets import CommittedOffset
from brook.coordinator_state.transaction_log import TransactionLogReplay, value_of
from brook.coordinator_state.transaction_metadata import TransactionMetadata, TransactionState
from brook.protocol import consumer_group_records as cgr
from brook.protocol import coordinator_records as cr
from brook.protocol import share_group_records as sgr

NOT_TRANSACTIONAL = cr.NO_PRODUCER_ID


class Seen:
    """What a replay told its owner, in order."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, str, int], tuple[int | None, int]] = {}
        self.groups: dict[str, int] = {}
        self.skipped_records: list[tuple[int, int | None]] = []
        self.share_groups: list[tuple[int, object, object]] = []
        self.consumer_groups: list[tuple[int, object, object]] = []

    def offset_changed(
        self, key: cr.OffsetCommitKey, committed: CommittedOffset | None, offset: int
    ) -> None:
        where = (key.group, key.topic, key.partition)
        if committed is None:
            self.offsets.pop(where, None)
        else:
            self.offsets[where] = (committed.offset, offset)

    def group_changed(self, group: str, value: cr.GroupMetadataValue | None, offset: int) -> None:
        if value is None:
            self.groups.pop(group, None)
        else:
            self.groups[group] = value.generation

    def consumer_group_changed(
        self, key: cgr.ConsumerGroupKey, value: cgr.ConsumerGroupValue | None, offset: int
    ) -> None:
        self.consumer_groups.append((offset, key, value))

    def share_group_changed(
        self, key: sgr.ShareGroupKey, value: sgr.ShareGroupValue | None, offset: int
    ) -> None:
        self.share_groups.append((offset, key, value))

    def skipped(self, offset: int, key: cr.Key, value_version: int | None) -> None:
        self.skipped_records.append((offset, value_version))


def commit(partition: int, offset: int) -> tuple[bytes, bytes]:
    key = cr.encode_key(cr.OffsetCommitKey("g", "t", partition))
    return key, cr.encode_value(cr.OffsetCommitValue(offset=offset))


def test_a_transactional_commit_waits_for_its_producers_marker() -> None:
    seen = Seen()
    replay = ConsumerOffsetsReplay(seen)
    replay.replay(0, NOT_TRANSACTIONAL, *commit(0, 5))
    replay.replay(1, 7, *commit(0, 10))  # producer 7, inside its transaction
    replay.replay(2, 8, *commit(1, 20))  # producer 8, inside its transaction
    assert seen.offsets == {("g", "t", 0): (5, 0)}
    assert replay.offsets.has_pending(cr.OffsetCommitKey("g", "t", 0))
    replay.replay_end_transaction_marker(7, committed=True)
    replay.replay_end_transaction_marker(8, committed=False)
    # The commit applies with the log offset of its record, not of the marker.
    assert seen.offsets == {("g", "t", 0): (10, 1)}
    assert not replay.offsets.has_pending(cr.OffsetCommitKey("g", "t", 1))
    assert list(replay.offsets.pending()) == []


def test_a_tombstone_deletes_and_a_pending_one_deletes_at_commit() -> None:
    seen = Seen()
    replay = ConsumerOffsetsReplay(seen)
    key, value = commit(0, 5)
    replay.replay(0, NOT_TRANSACTIONAL, key, value)
    replay.replay(1, 9, key, None)
    assert seen.offsets == {("g", "t", 0): (5, 0)}
    assert [(p, k.partition, c) for p, k, c, _ in replay.offsets.pending()] == [(9, 0, None)]
    replay.replay_end_transaction_marker(9, committed=True)
    assert seen.offsets == {}


def test_group_metadata_and_records_of_unknown_kinds() -> None:
    seen = Seen()
    replay = ConsumerOffsetsReplay(seen)
    group_key = cr.encode_key(cr.GroupMetadataKey("g"))
    metadata = cr.GroupMetadataValue(
        protocol_type="consumer", generation=3, protocol="range", leader="m", members=[]
    )
    replay.replay(0, NOT_TRANSACTIONAL, group_key, cr.encode_value(metadata))
    assert seen.groups == {"g": 3}
    # A value version newer than the schemas known, and a key type of a newer protocol
    # (17, a streams group's): skipped, the owner told which.
    newer_value = struct.pack(">h", 99) + b"\x00" * 8
    replay.replay(1, NOT_TRANSACTIONAL, group_key, newer_value)
    replay.replay(2, NOT_TRANSACTIONAL, struct.pack(">hh", 17, 1) + b"g", b"\x00\x00")
    assert seen.skipped_records == [(1, 99), (2, None)]
    assert seen.groups == {"g": 3}
    replay.replay(3, NOT_TRANSACTIONAL, group_key, None)
    assert seen.groups == {}
    # KIP-848's records (ConsumerGroupMetadataKey is type 3) are handed over decoded.
    epoch_key = cgr.encode_key(cgr.ConsumerGroupMetadataKey(group_id="c"))
    epoch = cgr.ConsumerGroupMetadataValue(epoch=i32(4))
    replay.replay(4, NOT_TRANSACTIONAL, epoch_key, cgr.encode_value(epoch))
    replay.replay(5, NOT_TRANSACTIONAL, epoch_key, None)
    assert seen.consumer_groups == [
        (4, cgr.ConsumerGroupMetadataKey(group_id="c"), epoch),
        (5, cgr.ConsumerGroupMetadataKey(group_id="c"), None),
    ]
    # A value of a version newer than v0 is a newer Kafka's: skipped, unread.
    replay.replay(6, NOT_TRANSACTIONAL, epoch_key, struct.pack(">h", 1) + b"\x00")
    assert seen.skipped_records[-1] == (6, 1)


def test_bytes_that_do_not_parse_raise() -> None:
    replay = ConsumerOffsetsReplay(Seen())
    key, value = commit(0, 5)
    with pytest.raises(cr.CoordinatorRecordError):
        replay.replay(0, NOT_TRANSACTIONAL, key, value[:5])


def test_the_transaction_log_keeps_each_ids_last_state() -> None:
    seen = Seen()
    replay = TransactionLogReplay(seen.skipped)
    key = cr.encode_key(cr.TransactionLogKey("tx"))
    ongoing = TransactionMetadata(
        "tx", 4, 0, 60_000, TransactionState.ONGOING, frozenset({("t", 1), ("t", 0)}), 10, 11
    )
    replay.replay(0, key, cr.encode_value(value_of(ongoing)))
    assert replay.transactions == {"tx": ongoing}
    done = ongoing.transition(TransactionState.PREPARE_COMMIT, 12)
    replay.replay(1, key, cr.encode_value(value_of(done)))
    replay.replay(2, cr.encode_key(cr.GroupMetadataKey("g")), None)  # not this topic's
    assert replay.transactions["tx"].state is TransactionState.PREPARE_COMMIT
    assert replay.record_offsets == {"tx": 1}
    assert seen.skipped_records == [(2, None)]
    replay.replay(3, key, None)
    assert replay.transactions == {} and replay.record_offsets == {}


def test_a_transaction_status_kafka_does_not_have_is_refused() -> None:
    replay = TransactionLogReplay()
    key = cr.encode_key(cr.TransactionLogKey("tx"))
    value = value_of(TransactionMetadata("tx", 4, 0, 60_000, TransactionState.EMPTY))
    value.transaction_status = 42
    with pytest.raises(cr.CoordinatorRecordError, match="42 is not a transaction status"):
        replay.replay(0, key, cr.encode_value(value))
