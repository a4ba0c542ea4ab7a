"""Kafka 4's consumer groups (KIP-848) on the real coordinator runtime and a fake clock:
members reconcile towards the target assignment (revoke, then take), timers fence them
at the exact deadlines, topic changes start a new assignment, and a coordinator that
loads the partition again has the same groups."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from brook.broker.groups.consumer_group import ConsumerGroup, MemberState
from brook.broker.metadata.records import PartitionRecord, RemoveTopicRecord
from brook.protocol.errors import ErrorCode

from .harness import Groups

REBALANCE_MS = 20_000
SESSION_MS = 45_000


def join_fields(*topics: str, **more: Any) -> dict[str, Any]:
    return {
        "rebalance_timeout_ms": REBALANCE_MS,
        "subscribed_topic_names": topics,
        "owned": {},
        **more,
    }


def group_of(groups: Groups, group_id: str) -> ConsumerGroup:
    group = groups.coordinator.consumer_group(group_id)
    assert group is not None
    return group


def owned_twice(group: ConsumerGroup) -> set[tuple[uuid.UUID, int]]:
    seen: set[tuple[uuid.UUID, int]] = set()
    twice = set()
    for member in group.members.values():
        for topic, parts in member.assigned.items():
            for p in parts:
                if (topic, p) in seen:
                    twice.add((topic, p))
                seen.add((topic, p))
    return twice


@pytest.mark.asyncio
async def test_a_partition_moves_only_once_its_owner_revoked_it() -> None:
    groups = await Groups().start()
    tid = groups.create_topic("t", 4)
    a = await groups.heartbeat("g", "a", 0, **join_fields("t"))
    assert (a.member_epoch, a.assignment) == (1, {tid: frozenset({0, 1, 2, 3})})
    assert group_of(groups, "g").state.value == "Stable"
    b = await groups.heartbeat("g", "b", 0, **join_fields("t"))
    assert (b.member_epoch, b.assignment) == (2, {})
    group = group_of(groups, "g")
    assert (group.group_epoch, group.target_assignment_epoch) == (2, 2)
    assert group.state.value == "Reconciling"
    revoke = await groups.heartbeat("g", "a", 1, owned={tid: frozenset({0, 1, 2, 3})})
    assert revoke.member_epoch == 1
    kept = revoke.assignment[tid]
    assert len(kept) == 2
    assert group_of(groups, "g").members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # b waits: the partitions a revokes are still a's.
    waiting = await groups.heartbeat("g", "b", 2, owned={})
    assert waiting.assignment is None
    assert group_of(groups, "g").members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert not owned_twice(group_of(groups, "g"))
    acked = await groups.heartbeat("g", "a", 1, owned={tid: kept})
    assert (acked.member_epoch, acked.assignment) == (2, None)
    taken = await groups.heartbeat("g", "b", 2, owned={})
    assert taken.assignment == {tid: frozenset({0, 1, 2, 3}) - kept}
    assert group_of(groups, "g").state.value == "Stable"
    assert not owned_twice(group_of(groups, "g"))


@pytest.mark.asyncio
async def test_a_member_that_keeps_revoked_partitions_is_fenced_at_its_rebalance_timeout() -> None:
    groups = await Groups().start()
    tid = groups.create_topic("t", 2)
    everything = {tid: frozenset({0, 1})}
    await groups.heartbeat("g", "a", 0, **join_fields("t", rebalance_timeout_ms=3000))
    await groups.heartbeat("g", "b", 0, **join_fields("t"))
    await groups.heartbeat("g", "a", 1, owned=everything)  # told to revoke one
    groups.sleep(2999)
    await groups.heartbeat("g", "b", 2, owned={})
    await groups.heartbeat("g", "a", 1, owned=everything)  # a heartbeat is no revocation
    assert "a" in group_of(groups, "g").members
    groups.sleep(1)
    assert "a" not in group_of(groups, "g").members
    fenced = await groups.heartbeat("g", "a", 1, owned=everything)
    assert fenced.error == ErrorCode.unknown_member_id
    taken = await groups.heartbeat("g", "b", 2, owned={})
    assert taken.assignment == everything


@pytest.mark.asyncio
async def test_a_silent_member_is_fenced_at_its_session_timeout() -> None:
    groups = await Groups().start()
    groups.create_topic("t", 2)
    await groups.heartbeat("g", "a", 0, **join_fields("t"))
    groups.sleep(SESSION_MS - 1)
    await groups.heartbeat("g", "a", 1, owned=None)  # a heartbeat starts the session again
    groups.sleep(SESSION_MS - 1)
    assert "a" in group_of(groups, "g").members
    groups.sleep(1)
    group = group_of(groups, "g")
    assert (group.state.value, group.group_epoch) == ("Empty", 2)


@pytest.mark.asyncio
async def test_new_partitions_and_deleted_topics_start_a_new_assignment() -> None:
    groups = await Groups().start()
    tid = groups.create_topic("t", 2)
    other = groups.create_topic("u", 1)
    await groups.heartbeat("g", "a", 0, **join_fields("t", "u"))
    groups.topics.apply([PartitionRecord(tid, 2, (0,), (0,), 0)])
    grown = await groups.heartbeat("g", "a", 1, owned=None)
    assert (grown.member_epoch, grown.assignment) == (
        2,
        {tid: frozenset({0, 1, 2}), other: frozenset({0})},
    )
    groups.topics.apply([RemoveTopicRecord(other)])
    shrunk = await groups.heartbeat("g", "a", 2, owned=grown.assignment)
    assert shrunk.assignment == {tid: frozenset({0, 1, 2})}


@pytest.mark.asyncio
async def test_a_regex_subscription_takes_topics_created_later() -> None:
    groups = await Groups().start()
    first = groups.create_topic("orders-eu", 1)
    groups.create_topic("payments", 1)
    joined = await groups.heartbeat(
        "g",
        "a",
        0,
        **{**join_fields(), "subscribed_topic_names": None},
        subscribed_topic_regex="orders-.*",
    )
    assert joined.assignment == {first: frozenset({0})}
    later = groups.create_topic("orders-us", 2)
    again = await groups.heartbeat("g", "a", joined.member_epoch, owned=joined.assignment)
    assert again.assignment == {first: frozenset({0}), later: frozenset({0, 1})}
    assert group_of(groups, "g").resolved_regexes == {
        "orders-.*": frozenset({"orders-eu", "orders-us"})
    }


@pytest.mark.asyncio
async def test_a_static_member_away_keeps_its_partitions_until_its_session_ends() -> None:
    groups = await Groups().start()
    tid = groups.create_topic("t", 2)
    await groups.heartbeat("g", "a", 0, **join_fields("t", instance_id="i-a"))
    await groups.heartbeat("g", "b", 0, **join_fields("t", instance_id="i-b"))
    await groups.heartbeat("g", "a", 1, instance_id="i-a", owned={tid: frozenset({0, 1})})
    a = await groups.heartbeat("g", "a", 1, instance_id="i-a", owned={tid: frozenset({0})})
    b = await groups.heartbeat("g", "b", 2, instance_id="i-b", owned={})
    assert a.error == b.error == ErrorCode.none
    away = await groups.heartbeat("g", "b", -2, instance_id="i-b")
    assert away.member_epoch == -2
    group = group_of(groups, "g")
    assert group.members["b"].member_epoch == -2 and group.members["b"].assigned
    assert group.state.value == "Stable"
    groups.sleep(SESSION_MS // 2)
    await groups.heartbeat("g", "a", 2, instance_id="i-a", owned={tid: frozenset({0})})
    assert "b" in group_of(groups, "g").members
    groups.sleep(SESSION_MS - SESSION_MS // 2)
    group = group_of(groups, "g")
    assert set(group.members) == {"a"}
    again = await groups.heartbeat("g", "a", 2, instance_id="i-a", owned={tid: frozenset({0})})
    assert again.assignment == {tid: frozenset({0, 1})}


@pytest.mark.asyncio
async def test_a_coordinator_loading_the_partition_again_has_the_same_group() -> None:
    groups = await Groups().start()
    tid = groups.create_topic("t", 3)
    await groups.heartbeat("g", "a", 0, **join_fields("t", server_assignor="range"))
    await groups.heartbeat("g", "b", 0, **join_fields("t", instance_id="i-b"))
    await groups.heartbeat("g", "a", 1, owned={tid: frozenset({0, 1, 2})})
    before = group_of(groups, "g")
    snapshot = (
        before.group_epoch,
        before.target_assignment_epoch,
        dict(before.target_assignment),
        dict(before.members),
        dict(before.partition_epochs),
        before.state,
    )
    again = Groups(writer=groups.writer)
    again.topics = groups.topics
    again.coordinator = type(groups.coordinator)(
        again.config, again.topic, again.writer, again.timer, again.time, groups.topics
    )
    await again.start()
    after = group_of(again, "g")
    assert (
        after.group_epoch,
        after.target_assignment_epoch,
        after.target_assignment,
        after.members,
        after.partition_epochs,
        after.state,
    ) == snapshot
    assert after.preferred_assignor() == "range"
