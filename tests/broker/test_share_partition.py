"""The share-partition state machine (KIP-932) on its own: what is acquired, what an
acknowledgement does, locks, the delivery limit, the start offset, and what is persisted
and read back."""

from __future__ import annotations

import pytest

from brook.broker.share.share_partition import (
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRange,
    InvalidAcknowledgementError,
    InvalidRecordStateError,
    RecordState,
    SharePartition,
    StateBatch,
)
from brook.protocol.record_batch import BatchHeader

CONTROL = 0x20
TRANSACTIONAL = 0x10
LOCK_MS = 1000


def batch(base: int, count: int, attributes: int = 0, producer_id: int = -1) -> BatchHeader:
    return BatchHeader(
        base_offset=base,
        batch_length=0,
        partition_leader_epoch=0,
        magic=2,
        crc=0,
        attributes=attributes,
        last_offset_delta=count - 1,
        base_timestamp=0,
        max_timestamp=0,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        record_count=count,
    )


def partition(start: int = 0, limit: int = 3, max_in_flight: int = 100) -> SharePartition:
    return SharePartition(
        "group", "topic", 0, start, max_in_flight=max_in_flight, delivery_count_limit=limit
    )


def ack(first: int, last: int, *types: int) -> AcknowledgementBatch:
    return AcknowledgementBatch(first, last, types)


def test_new_records_are_acquired_whole_batches_at_a_time():
    share = partition()
    got = share.acquire(
        "a", [batch(0, 5), batch(5, 5)], max_records=3, now_ms=0, lock_duration_ms=LOCK_MS
    )
    # The limit is passed to finish the first batch, and no further.
    assert got == [AcquiredRange(0, 4, 1)]
    assert (share.start_offset, share.end_offset) == (0, 5)
    assert share.next_fetch_offset() == 5


def test_accept_release_and_reject_move_the_start_offset():
    share = partition()
    share.acquire("a", [batch(0, 4)], 10, 0, LOCK_MS)
    share.acknowledge("a", [ack(0, 3, 1, 2, 3, 1)], 0, LOCK_MS)
    assert share.start_offset == 1  # 0 accepted; 1 released: available again
    assert share.next_fetch_offset() == 1
    again = share.acquire("b", [batch(0, 4)], 10, 0, LOCK_MS)
    assert again == [AcquiredRange(1, 1, 2)]
    share.acknowledge("b", [ack(1, 1, 1)], 0, LOCK_MS)
    assert share.start_offset == 4 and share.in_flight() == 0


def test_an_acknowledgement_of_records_another_member_holds_changes_nothing():
    share = partition()
    share.acquire("a", [batch(0, 2)], 10, 0, LOCK_MS)
    with pytest.raises(InvalidRecordStateError):
        share.acknowledge("b", [ack(0, 1, 1)], 0, LOCK_MS)
    # All or nothing: a batch whose second range is not acquired leaves the first alone.
    with pytest.raises(InvalidAcknowledgementError):
        share.acknowledge("a", [ack(0, 0, 1), ack(1, 5, 1)], 0, LOCK_MS)
    assert share.counts()[RecordState.ACQUIRED] == 2


@pytest.mark.parametrize(
    "batches",
    [
        [ack(1, 0, 1)],  # backwards
        [ack(0, 1, 1), ack(1, 1, 1)],  # overlapping
        [ack(0, 1, 1, 1, 1)],  # three types for two offsets
        [ack(0, 1, 9)],  # no such type
    ],
)
def test_malformed_acknowledgements_are_refused(batches):
    share = partition()
    share.acquire("a", [batch(0, 2)], 10, 0, LOCK_MS)
    with pytest.raises(InvalidAcknowledgementError):
        share.acknowledge("a", batches, 0, LOCK_MS)
    assert share.counts()[RecordState.ACQUIRED] == 2


def test_the_delivery_limit_archives_a_record_released_too_often():
    share = partition(limit=2)
    for delivery in (1, 2):
        got = share.acquire("a", [batch(0, 1)], 10, 0, LOCK_MS)
        assert got == [AcquiredRange(0, 0, delivery)]
        share.acknowledge("a", [ack(0, 0, 2)], 0, LOCK_MS)
    assert share.acquire("a", [batch(0, 1)], 10, 0, LOCK_MS) == []
    assert share.start_offset == 1


def test_locks_expire_and_the_record_is_delivered_again():
    share = partition()
    share.acquire("a", [batch(0, 2)], 10, now_ms=0, lock_duration_ms=LOCK_MS)
    assert share.next_lock_deadline() == LOCK_MS
    assert share.expire_locks(LOCK_MS - 1) == 0
    assert share.expire_locks(LOCK_MS) == 2
    assert share.acquire("b", [batch(0, 2)], 10, LOCK_MS, LOCK_MS) == [AcquiredRange(0, 1, 2)]
    with pytest.raises(InvalidRecordStateError):
        share.acknowledge("a", [ack(0, 1, 1)], LOCK_MS, LOCK_MS)


def test_a_closed_session_gives_records_back_without_counting_the_delivery():
    share = partition(limit=2)
    share.acquire("a", [batch(0, 3)], 10, 0, LOCK_MS)
    assert share.release_member("a") == 3
    assert share.acquire("b", [batch(0, 3)], 10, 0, LOCK_MS) == [AcquiredRange(0, 2, 1)]


def test_the_records_in_flight_are_bounded():
    share = partition(max_in_flight=5)
    share.acquire("a", [batch(0, 5)], 10, 0, LOCK_MS)
    assert not share.can_acquire()
    assert share.acquire("a", [batch(5, 5)], 10, 0, LOCK_MS) == []
    share.acknowledge("a", [ack(0, 1, 1)], 0, LOCK_MS)
    assert share.can_acquire()


def test_control_records_and_aborted_transactions_are_archived_not_delivered():
    share = partition()
    batches = [
        batch(0, 2, TRANSACTIONAL, producer_id=7),
        batch(2, 1, TRANSACTIONAL | CONTROL, producer_id=7),  # its ABORT marker
        batch(3, 2, TRANSACTIONAL, producer_id=8),
        batch(5, 1, TRANSACTIONAL | CONTROL, producer_id=8),  # its COMMIT marker
    ]
    got = share.acquire("a", batches, 10, 0, LOCK_MS, aborted=[AbortedTransaction(7, 0)])
    assert got == [AcquiredRange(3, 4, 1)]
    assert share.start_offset == 3
    share.acknowledge("a", [ack(3, 4, 1)], 0, LOCK_MS)
    assert share.start_offset == 6


def test_what_is_persisted_reads_back_with_acquired_records_available_again():
    share = partition(start=10)
    share.acquire("a", [batch(10, 6)], 10, 0, LOCK_MS)
    share.acknowledge("a", [ack(11, 12, 1, 3)], 0, LOCK_MS)
    persisted = share.state_batches()
    assert persisted == [
        StateBatch(10, 10, RecordState.AVAILABLE, 1),
        StateBatch(11, 11, RecordState.ACKNOWLEDGED, 1),
        StateBatch(12, 12, RecordState.ARCHIVED, 1),
        StateBatch(13, 15, RecordState.AVAILABLE, 1),
    ]
    restored = SharePartition(
        "group",
        "topic",
        0,
        share.start_offset,
        max_in_flight=100,
        delivery_count_limit=3,
        state_batches=persisted,
    )
    assert (restored.start_offset, restored.end_offset) == (10, 16)
    got = restored.acquire("b", [batch(10, 6)], 10, 0, LOCK_MS)
    assert got == [AcquiredRange(10, 10, 2), AcquiredRange(13, 15, 2)]


def test_the_log_start_moving_past_the_start_offset_drops_what_it_removed():
    share = partition()
    share.acquire("a", [batch(0, 4)], 10, 0, LOCK_MS)
    share.move_start_to(2)
    assert (share.start_offset, share.in_flight()) == (2, 2)
    with pytest.raises(InvalidRecordStateError):
        share.acknowledge("b", [ack(2, 3, 1)], 0, LOCK_MS)
    # An acknowledgement of what is gone is done already, not an error.
    share.acknowledge("a", [ack(0, 1, 1)], 0, LOCK_MS)


def test_record_limit_mode_acquires_exactly_max_records():
    share = partition()
    got = share.acquire("a", [batch(0, 5)], 3, 0, LOCK_MS, record_limit=True)
    assert got == [AcquiredRange(0, 2, 1)]
    # The rest of the batch is in flight and goes to the next fetch.
    assert (share.end_offset, share.next_fetch_offset()) == (5, 3)
    assert share.acquire("b", [batch(0, 5)], 3, 0, LOCK_MS, record_limit=True) == [
        AcquiredRange(3, 4, 1)
    ]


def test_renew_keeps_a_record_acquired_with_a_fresh_lock():
    share = partition()
    share.acquire("a", [batch(0, 1)], 10, now_ms=0, lock_duration_ms=LOCK_MS)
    share.acknowledge("a", [ack(0, 0, 4)], now_ms=900, lock_duration_ms=LOCK_MS)
    assert share.expire_locks(LOCK_MS) == 0  # renewed at 900: good until 1900
    assert share.next_lock_deadline() == 900 + LOCK_MS
    share.acknowledge("a", [ack(0, 0, 1)], 1000, LOCK_MS)
    assert share.start_offset == 1


def test_a_stored_state_past_any_in_flight_window_is_cut_not_expanded() -> None:
    from brook.broker.share.share_partition import RESTORED_WINDOWS

    partition = SharePartition(
        "g",
        "t",
        0,
        100,
        max_in_flight=50,
        delivery_count_limit=5,
        state_batches=[StateBatch(100, 2**62, RecordState.ACKNOWLEDGED, 1)],
    )
    assert partition.end_offset <= 100 + RESTORED_WINDOWS * 50
