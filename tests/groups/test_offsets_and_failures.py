"""Offset commits answer when committed; a write the partition refuses changes nothing
and answers the error Kafka's group coordinator gives; offsets expire on the fake clock."""

from __future__ import annotations

import asyncio

import pytest

from brook.broker.groups.group import GroupState
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import (
    ErrorCode,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)

from .harness import Groups, answer, settle


@pytest.mark.asyncio
async def test_a_commit_answers_once_its_records_are_committed() -> None:
    groups = await Groups().start()
    groups.writer.hold_commits = True
    pending = asyncio.ensure_future(answer(groups.commit("g", {("t", 0): 5})))
    await settle()
    assert not pending.done()
    groups.writer.commit_held()
    assert await pending is ErrorCode.none
    assert groups.offsets("g") == {("t", 0): 5}
    key, value = groups.written("g")[-1]
    assert key == cr.OffsetCommitKey("g", "t", 0) and value.offset == 5


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (KafkaStorageError("disk gone"), ErrorCode.not_coordinator),
        (OSError(28, "No space left on device"), ErrorCode.not_coordinator),
        (UnknownTopicOrPartitionError("gone"), ErrorCode.coordinator_not_available),
        (NotEnoughReplicasError("isr"), ErrorCode.coordinator_not_available),
        (RecordTooLargeError("big"), ErrorCode.invalid_commit_offset_size),
        (RecordBatchTooLargeError("big"), ErrorCode.invalid_commit_offset_size),
    ],
)
@pytest.mark.asyncio
async def test_a_refused_commit_answers_kafkas_error_and_keeps_the_old_offsets(
    failure: BaseException, expected: ErrorCode, caplog: pytest.LogCaptureFixture
) -> None:
    groups = await Groups().start()
    assert await answer(groups.commit("g", {("t", 0): 1})) is ErrorCode.none
    groups.writer.fail_next_append(failure)
    assert await answer(groups.commit("g", {("t", 0): 2})) is expected
    assert groups.offsets("g") == {("t", 0): 1}
    assert "could not write the 1 record(s) of commit-offset" in caplog.text
    # The next commit goes through.
    assert await answer(groups.commit("g", {("t", 0): 3})) is ErrorCode.none
    assert groups.offsets("g") == {("t", 0): 3}


@pytest.mark.asyncio
async def test_a_commit_that_never_commits_is_undone_by_reloading_the_partition() -> None:
    groups = await Groups().start()
    assert await answer(groups.commit("g", {("t", 0): 1})) is ErrorCode.none
    groups.writer.hold_commits = True
    pending = asyncio.ensure_future(answer(groups.commit("g", {("t", 0): 2})))
    await settle()
    groups.writer.fail_held(NotLeaderError("leadership moved"))
    assert await pending is ErrorCode.not_coordinator
    await settle()
    assert groups.offsets("g") == {("t", 0): 1}


@pytest.mark.asyncio
async def test_offset_reads_wait_for_uncommitted_writes_and_never_show_a_lost_one() -> None:
    groups = await Groups().start()
    assert await answer(groups.commit("g", {("t", 0): 1})) is ErrorCode.none
    groups.writer.hold_commits = True
    pending = asyncio.ensure_future(answer(groups.commit("g", {("t", 0): 2})))
    await settle()
    read = asyncio.ensure_future(groups.coordinator.writes_committed("g"))
    await settle()
    assert not read.done()  # the offset 2 is taken but not committed: OffsetFetch waits
    groups.writer.fail_held(NotLeaderError("leadership moved"))
    await read
    assert await pending is ErrorCode.not_coordinator
    # The reload that undoes the lost write answers COORDINATOR_LOAD_IN_PROGRESS until it
    # ends; the read after it shows the committed offset only.
    await settle()
    await groups.coordinator.writes_committed("g")
    assert groups.offsets("g") == {("t", 0): 1}
    groups.writer.hold_commits = False
    assert await answer(groups.commit("g", {("t", 0): 3})) is ErrorCode.none
    await groups.coordinator.writes_committed("g")  # nothing pending: answers at once
    assert groups.offsets("g") == {("t", 0): 3}


class NotLeaderError(KafkaError):
    error_code = ErrorCode.not_leader_or_follower


@pytest.mark.asyncio
async def test_a_sync_whose_assignment_cannot_be_stored_fails_and_rebalances() -> None:
    groups = await Groups().start()
    joined = await answer(groups.join("g"))
    groups.writer.fail_next_append(KafkaStorageError("disk gone"))
    error, assignment = await answer(
        groups.sync("g", joined.member_id, 1, {joined.member_id: b"assigned"})
    )
    assert (error, assignment) == (ErrorCode.not_coordinator, b"")
    group = groups.coordinator.group("g")
    assert group.state is GroupState.PREPARING_REBALANCE
    assert group.members[joined.member_id].assignment == b""


@pytest.mark.asyncio
async def test_a_static_member_whose_new_id_cannot_be_stored_keeps_the_old_one() -> None:
    groups = await Groups().start()
    old = await groups.stable_member("g", instance_id="instance-1")
    groups.writer.fail_next_append(KafkaStorageError("disk gone"))
    refused = await answer(groups.join("g", instance_id="instance-1"))
    assert refused.error is ErrorCode.not_coordinator
    group = groups.coordinator.group("g")
    assert group.static_members == {"instance-1": old.member_id}
    assert groups.coordinator.heartbeat("g", 1, old.member_id, "instance-1") is ErrorCode.none


@pytest.mark.asyncio
async def test_offsets_of_an_empty_group_expire_and_the_group_goes() -> None:
    groups = await Groups(
        offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000
    ).start()
    await groups.stable_member("g")
    member = next(iter(groups.coordinator.group("g").members))
    assert await answer(groups.commit("g", {("t", 0): 7}, 1, member)) is ErrorCode.none
    await answer(groups.coordinator.leave("g", [(member, None)]))
    groups.sleep(59_000)
    await settle()
    assert groups.offsets("g") == {("t", 0): 7}  # the group is empty for 59 s only
    groups.sleep(1000)
    await settle()
    assert groups.coordinator.group("g") is None and groups.offsets("g") == {}
    # Tombstones keep it gone: the offset's, then the group's.
    assert groups.written("g")[-2:] == [
        (cr.OffsetCommitKey("g", "t", 0), None),
        (cr.GroupMetadataKey("g"), None),
    ]


@pytest.mark.asyncio
async def test_offsets_of_a_group_with_members_do_not_expire() -> None:
    groups = await Groups(
        offsets_retention_minutes=1, offsets_retention_check_interval_ms=1000
    ).start()
    joined = await groups.stable_member("g")
    assert await answer(groups.commit("g", {("t", 0): 7}, 1, joined.member_id)) is (ErrorCode.none)
    for _ in range(20):
        groups.sleep(9000)
        assert groups.coordinator.heartbeat("g", 1, joined.member_id, None) is ErrorCode.none
    await settle()
    assert groups.offsets("g") == {("t", 0): 7}


@pytest.mark.asyncio
async def test_deleting_a_group_writes_tombstones_and_answers_when_committed() -> None:
    groups = await Groups().start()
    assert await answer(groups.commit("g", {("t", 0): 1, ("t", 1): 2})) is ErrorCode.none
    groups.writer.hold_commits = True
    pending = asyncio.ensure_future(answer(groups.coordinator.delete_group("g")))
    await settle()
    assert not pending.done()
    groups.writer.commit_held()
    assert await pending is ErrorCode.none
    assert groups.coordinator.group("g") is None
    assert await answer(groups.coordinator.delete_group("g")) is ErrorCode.group_id_not_found
