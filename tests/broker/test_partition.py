"""The partition as a replica: its high watermark, ISR, leader-epoch fencing and the
bounds of its reads, on a real log in a temporary directory.

A single broker is always the whole ISR, so the paths that wait for followers are
driven here directly: a second replica in the ISR holds the high watermark back until
its fetches say how far its log reaches.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from brook.broker.replica.partition import FetchIsolation, Partition
from brook.protocol.errors import (
    FencedLeaderEpochError,
    InvalidRecordError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    PolicyViolationError,
    UnknownLeaderEpochError,
    UnknownTopicOrPartitionError,
)
from brook.protocol.record_batch import Record, build_batch, split_batches
from brook.storage import Log, LogConfig
from brook.storage.log_validator import AppendOrigin

NOW = 1_700_000_000_000
LOCAL, FOLLOWER = 0, 1


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    opened = Log.open(tmp_path / "orders-0", LogConfig(min_insync_replicas=1))
    yield opened
    opened.close()


def _partition(log: Log, replicas: list[int], isr: list[int], leader: int = LOCAL) -> Partition:
    return Partition("orders", 0, uuid.uuid4(), log, LOCAL, leader, 3, list(replicas), list(isr))


def _records(*values: bytes) -> bytes:
    return build_batch([Record(i, NOW, b"k", value) for i, value in enumerate(values)])


def _offsets(records: bytes | memoryview) -> list[int]:
    data = bytes(records)
    return [
        offset
        for header in split_batches(data)
        for offset in range(header.base_offset, header.next_offset)
    ]


def test_a_lone_leader_commits_what_it_writes(log: Log) -> None:
    partition = _partition(log, [LOCAL], [LOCAL])
    info = partition.append_records_as_leader(_records(b"a", b"b"), AppendOrigin.CLIENT, -1, NOW)
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert partition.high_watermark == 2
    assert partition.wait_for_commit(info.last_offset + 1) is None
    read = partition.read_records(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
    assert _offsets(read.records) == [0, 1]
    assert log.leader_epoch_cache.latest_epoch == 3  # the append carried the leader epoch


def test_acks_all_waits_for_every_in_sync_replica(log: Log) -> None:
    async def scenario() -> None:
        partition = _partition(log, [LOCAL, FOLLOWER], [LOCAL, FOLLOWER])
        info = partition.append_records_as_leader(
            _records(b"a", b"b", b"c"), AppendOrigin.CLIENT, -1, NOW
        )
        assert partition.high_watermark == 0  # the follower has nothing yet
        waiter = partition.wait_for_commit(info.last_offset + 1)
        assert waiter is not None and not waiter.done()
        consumer = partition.read_records(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
        assert _offsets(consumer.records) == []
        # The follower reads to the log end, then fetches from 2: it has 0 and 1.
        follower = partition.read_records(
            0, 1 << 20, FetchIsolation.LOG_END, True, replica_id=FOLLOWER
        )
        assert _offsets(follower.records) == [0, 1, 2]
        partition.read_records(2, 1 << 20, FetchIsolation.LOG_END, True, replica_id=FOLLOWER)
        assert partition.high_watermark == 2 and not waiter.done()
        partition.read_records(3, 1 << 20, FetchIsolation.LOG_END, True, replica_id=FOLLOWER)
        assert partition.high_watermark == 3
        await asyncio.wait_for(waiter, 5)
        consumer = partition.read_records(0, 1 << 20, FetchIsolation.HIGH_WATERMARK, True)
        assert _offsets(consumer.records) == [0, 1, 2]

    asyncio.run(scenario())


def test_a_replica_out_of_the_isr_does_not_hold_the_high_watermark(log: Log) -> None:
    partition = _partition(log, [LOCAL, FOLLOWER], [LOCAL])
    partition.append_records_as_leader(_records(b"a"), AppendOrigin.CLIENT, -1, NOW)
    assert partition.high_watermark == 1


def test_acks_all_refused_when_the_isr_is_below_min_insync(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "orders-0", LogConfig(min_insync_replicas=2))
    try:
        partition = _partition(log, [LOCAL, FOLLOWER], [LOCAL])
        with pytest.raises(NotEnoughReplicasError, match=r"min\.isr requirement of 2"):
            partition.append_records_as_leader(_records(b"a"), AppendOrigin.CLIENT, -1, NOW)
        assert log.log_end_offset == 0  # nothing written
        # acks=1 does not ask for the ISR.
        partition.append_records_as_leader(_records(b"a"), AppendOrigin.CLIENT, 1, NOW)
        assert log.log_end_offset == 1
    finally:
        log.close()


def test_only_replicas_may_fetch_as_followers(log: Log) -> None:
    partition = _partition(log, [LOCAL, FOLLOWER], [LOCAL, FOLLOWER])
    for stranger in (7, LOCAL):
        with pytest.raises(NotLeaderOrFollowerError):
            partition.read_records(0, 100, FetchIsolation.LOG_END, True, replica_id=stranger)
    assert partition.remote_replicas[FOLLOWER].log_end_offset == -1


def test_leader_epoch_fencing(log: Log) -> None:
    partition = _partition(log, [LOCAL], [LOCAL])
    partition.append_records_as_leader(_records(b"a"), AppendOrigin.CLIENT, 1, NOW)
    for check in (
        lambda epoch: partition.read_records(0, 100, FetchIsolation.HIGH_WATERMARK, True, epoch),
        lambda epoch: partition.fetch_offset_for_timestamp(
            -1, FetchIsolation.HIGH_WATERMARK, epoch
        ),
        lambda epoch: partition.last_offset_for_leader_epoch(epoch, 3),
    ):
        with pytest.raises(FencedLeaderEpochError):
            check(2)
        with pytest.raises(UnknownLeaderEpochError):
            check(4)
        check(3)
        check(-1)


def test_a_follower_takes_no_client_writes_and_serves_no_reads(log: Log) -> None:
    partition = _partition(log, [LOCAL, FOLLOWER], [LOCAL, FOLLOWER], leader=FOLLOWER)
    with pytest.raises(NotLeaderOrFollowerError):
        partition.append_records_as_leader(_records(b"a"), AppendOrigin.CLIENT, 1, NOW)
    with pytest.raises(NotLeaderOrFollowerError):
        partition.read_records(0, 100, FetchIsolation.HIGH_WATERMARK, True)
    assert log.log_end_offset == 0


def test_commit_waiters_fail_when_the_partition_goes_away(log: Log) -> None:
    async def scenario() -> None:
        partition = _partition(log, [LOCAL, FOLLOWER], [LOCAL, FOLLOWER])
        partition.append_records_as_leader(_records(b"a"), AppendOrigin.CLIENT, -1, NOW)
        waiter = partition.wait_for_commit(1)
        assert waiter is not None
        partition.fail_waiters(UnknownTopicOrPartitionError("deleted"))
        with pytest.raises(UnknownTopicOrPartitionError):
            await waiter

    asyncio.run(scenario())


def test_control_batches_come_from_coordinators_only(log: Log) -> None:
    partition = _partition(log, [LOCAL], [LOCAL])
    marker = build_batch(
        [Record(0, NOW, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")],
        producer_id=5,
        producer_epoch=0,
        transactional=True,
        control=True,
    )
    with pytest.raises(InvalidRecordError, match="not allowed to write control records"):
        partition.append_records_as_leader(marker, AppendOrigin.CLIENT, 1, NOW)
    info = partition.append_records_as_leader(marker, AppendOrigin.COORDINATOR, 1, NOW)
    assert info.first_offset == 0 and log.log_end_offset == 1


def test_delete_records_follows_the_cleanup_policy(tmp_path: Path) -> None:
    compacted = Log.open(tmp_path / "orders-0", LogConfig(cleanup_policy=("compact",)))
    try:
        partition = _partition(compacted, [LOCAL], [LOCAL])
        partition.append_records_as_leader(_records(b"a", b"b"), AppendOrigin.CLIENT, 1, NOW)
        with pytest.raises(PolicyViolationError):
            partition.delete_records_on_leader(1)
        assert partition.log_start_offset == 0
    finally:
        compacted.close()
