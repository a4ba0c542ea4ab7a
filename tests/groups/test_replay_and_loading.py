"""Replay of `__consumer_offsets` (transaction markers and tombstones included), and the
load and unload of one partition, as when its leadership moves."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brook.broker.coordinator.in_memory_writer import InMemoryPartitionWriter
from brook.broker.coordinator.records import CoordinatorRecord
from brook.broker.coordinator.runtime import PartitionState
from brook.broker.groups.group import GroupState
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode

from .harness import Groups, answer, offset_record


def marker(result: cr.ControlRecordType) -> CoordinatorRecord:
    return CoordinatorRecord(
        cr.encode_key(cr.ControlRecordKey(type=result)),
        cr.encode_value(cr.EndTxnMarker(coordinator_epoch=0)),
    )


def transactional(producer_id: int) -> dict[str, Any]:
    return {"producer_id": producer_id, "producer_epoch": 0, "transactional": True}


@pytest.mark.asyncio
async def test_replay_applies_committed_transactions_and_tombstones_only() -> None:
    writer = InMemoryPartitionWriter()
    tp = Groups(writer).tp("g")
    writer.append_batch(tp, [offset_record("g", "t", 0, 10), offset_record("g", "t", 1, 11)], 1)
    # A producer's offsets commit with its transaction, another's abort with theirs, a
    # third's transaction is still open when the partition loads.
    for producer_id, partition in ((7, 2), (8, 3), (9, 4)):
        offset = offset_record("g", "t", partition, 10 + partition)
        writer.append_batch(tp, [offset], 1, **transactional(producer_id))
    for producer_id, result in ((7, cr.ControlRecordType.COMMIT), (8, cr.ControlRecordType.ABORT)):
        writer.append_batch(tp, [marker(result)], 1, control=True, **transactional(producer_id))
    # A tombstone deletes the offset of t-1.
    writer.append_batch(
        tp, [CoordinatorRecord(cr.encode_key(cr.OffsetCommitKey("g", "t", 1)), None)], 1
    )
    groups = await Groups(writer).start()
    assert groups.offsets("g") == {("t", 0): 10, ("t", 2): 12}
    shard = next(s for s in groups.coordinator.runtime.active_shards() if s.tp == tp)
    assert {producer_id for producer_id, *_ in shard._replay.offsets.pending()} == {9}


@pytest.mark.asyncio
async def test_a_group_comes_back_with_its_members_and_a_deleted_one_stays_gone() -> None:
    first = await Groups().start()
    joined = await first.stable_member("kept")
    assert await answer(first.commit("kept", {("t", 0): 3}, 1, joined.member_id)) is (
        ErrorCode.none
    )
    assert await answer(first.commit("deleted", {("t", 0): 4})) is ErrorCode.none
    assert await answer(first.coordinator.delete_group("deleted")) is ErrorCode.none

    again = await Groups(first.writer).start()
    group = again.coordinator.group("kept")
    assert group.state is GroupState.STABLE and group.generation_id == 1
    assert list(group.members) == [joined.member_id]
    assert group.members[joined.member_id].assignment == b"assigned"
    assert again.offsets("kept") == {("t", 0): 3}
    assert again.coordinator.group("deleted") is None and again.offsets("deleted") == {}
    # The loaded member's session runs from the load: silent, it expires.
    again.sleep(10_000)
    await asyncio.sleep(0)
    assert again.coordinator.group("kept").is_empty


@pytest.mark.asyncio
async def test_unloading_one_partition_stops_its_groups_only_and_loading_brings_them_back() -> None:
    groups = await Groups().start()
    here, there = (
        "g",
        next(
            f"other-{i}"
            for i in range(100)
            if groups.partition_of(f"other-{i}") != groups.partition_of("g")
        ),
    )
    assert await answer(groups.commit(here, {("t", 0): 1})) is ErrorCode.none
    assert await answer(groups.commit(there, {("t", 0): 2})) is ErrorCode.none
    await answer(groups.join(here))
    # A second member waits for the first to rejoin.
    waiting = asyncio.ensure_future(answer(groups.join(here)))
    await asyncio.sleep(0)
    partition = groups.partition_of(here)

    groups.coordinator.runtime.unload(partition)
    assert groups.coordinator.runtime.state_of(partition) is None
    # Whoever waited on the partition's groups is told to find the coordinator again.
    assert (await waiting).error is ErrorCode.not_coordinator
    assert await answer(groups.commit(here, {("t", 0): 5})) is ErrorCode.not_coordinator
    assert groups.coordinator.fetch_offsets(here, None) == (ErrorCode.not_coordinator, {})
    assert groups.coordinator.heartbeat(here, 1, "m", None) is ErrorCode.not_coordinator
    assert groups.coordinator.group(here) is None
    assert groups.offsets(there) == {("t", 0): 2}  # other partitions serve on

    await groups.coordinator.runtime.load(partition)
    assert groups.coordinator.runtime.state_of(partition) is PartitionState.ACTIVE
    assert groups.offsets(here) == {("t", 0): 1}


@pytest.mark.asyncio
async def test_a_partition_that_cannot_be_read_does_not_serve() -> None:
    class UnreadableWriter(InMemoryPartitionWriter):
        def read(self, tp):  # type: ignore[no-untyped-def]
            raise OSError(5, "Input/output error")

    groups = await Groups(UnreadableWriter()).start()
    partition = groups.partition_of("g")
    assert groups.coordinator.runtime.state_of(partition) is PartitionState.FAILED
    assert await answer(groups.commit("g", {("t", 0): 1})) is ErrorCode.not_coordinator
