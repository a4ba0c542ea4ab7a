"""The classic group state machine on the fake clock: joins, syncs, heartbeats, session
and rebalance timeouts, the initial rebalance delay, static members."""

from __future__ import annotations

import asyncio

import pytest

from brook.broker.groups.group import GroupState
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode

from .harness import REBALANCE_MS, SESSION_MS, Groups, answer, settle


@pytest.mark.asyncio
async def test_join_sync_heartbeat_then_the_session_expires() -> None:
    groups = await Groups().start()
    joined = await groups.stable_member("g")
    assert joined.generation_id == 1 and joined.leader_id == joined.member_id
    assert groups.coordinator.group("g").state is GroupState.STABLE
    # The assignment is stored in the group's record, in Kafka's schema.
    key, value = groups.written("g")[-1]
    assert key == cr.GroupMetadataKey("g") and value.generation == 1
    assert [m.assignment for m in value.members] == [b"assigned"]

    for _ in range(3):  # heartbeats keep the member alive past its session timeout
        groups.sleep(SESSION_MS - 1)
        assert groups.coordinator.heartbeat("g", 1, joined.member_id, None) is ErrorCode.none
    groups.sleep(SESSION_MS - 1)
    assert groups.coordinator.group("g").has_member(joined.member_id)
    groups.sleep(1)
    await settle()
    group = groups.coordinator.group("g")
    assert group.is_empty and group.state is GroupState.EMPTY and group.generation_id == 2
    assert groups.coordinator.heartbeat("g", 1, joined.member_id, None) is (
        ErrorCode.unknown_member_id
    )
    key, value = groups.written("g")[-1]
    assert key == cr.GroupMetadataKey("g") and value.generation == 2 and value.members == []


@pytest.mark.asyncio
async def test_a_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout() -> None:
    groups = await Groups().start()
    first = await answer(groups.join("g"))
    # The group rebalances to take a second member.
    second_join = asyncio.ensure_future(answer(groups.join("g")))
    assert groups.coordinator.group("g").state is GroupState.PREPARING_REBALANCE
    # The first member heartbeats (and so learns of the rebalance) but does not rejoin.
    elapsed = 0
    while elapsed + 9000 < REBALANCE_MS:
        assert groups.coordinator.heartbeat("g", 1, first.member_id, None) is (
            ErrorCode.rebalance_in_progress
        )
        groups.sleep(9000)
        elapsed += 9000
    assert groups.coordinator.heartbeat("g", 1, first.member_id, None) is (
        ErrorCode.rebalance_in_progress
    )
    groups.sleep(REBALANCE_MS - 1 - elapsed)
    await settle()
    assert not second_join.done()
    groups.sleep(1)
    second = await second_join
    assert second.generation_id == 2 and second.leader_id == second.member_id
    assert list(groups.coordinator.group("g").members) == [second.member_id]


@pytest.mark.asyncio
async def test_the_initial_rebalance_delay_waits_for_more_members() -> None:
    groups = await Groups(group_initial_rebalance_delay_ms=3000).start()
    first = asyncio.ensure_future(answer(groups.join("g")))
    groups.sleep(2000)
    second = asyncio.ensure_future(answer(groups.join("g")))  # extends the wait by 3 s
    groups.sleep(2999)
    await settle()
    assert not first.done() and not second.done()
    groups.sleep(1)
    one, two = await first, await second
    assert one.generation_id == two.generation_id == 1
    assert len(groups.coordinator.group("g").members) == 2


@pytest.mark.asyncio
async def test_the_initial_delay_ends_at_the_rebalance_timeout_whatever_joins() -> None:
    groups = await Groups(group_initial_rebalance_delay_ms=3000).start()
    joins = [asyncio.ensure_future(answer(groups.join("g", rebalance_ms=7000)))]
    for _ in range(2):  # each would extend the wait to 3 s after it: to 8 s
        groups.sleep(2500)
        joins.append(asyncio.ensure_future(answer(groups.join("g", rebalance_ms=7000))))
    groups.sleep(1999)
    await settle()
    assert not any(join.done() for join in joins)
    groups.sleep(1)  # 7 s: the first member's rebalance timeout bounds the wait
    await settle()
    assert all(join.done() for join in joins)
    assert {join.result().generation_id for join in joins} == {1}


@pytest.mark.asyncio
async def test_a_static_member_rejoining_keeps_its_generation_and_fences_the_old_id() -> None:
    groups = await Groups().start()
    old = await groups.stable_member("g", instance_id="instance-1")
    again = await answer(groups.join("g", instance_id="instance-1"))
    assert again.error is ErrorCode.none and again.member_id != old.member_id
    assert again.generation_id == old.generation_id  # no rebalance
    group = groups.coordinator.group("g")
    assert group.state is GroupState.STABLE and group.static_members == {
        "instance-1": again.member_id
    }
    assert groups.coordinator.heartbeat("g", 1, old.member_id, "instance-1") is (
        ErrorCode.fenced_instance_id
    )
    # The new member id is what the group's record holds.
    _, value = groups.written("g")[-1]
    assert [m.member_id for m in value.members] == [again.member_id]
    # A static member that goes silent expires like any other.
    groups.sleep(SESSION_MS)
    await settle()
    assert groups.coordinator.group("g").is_empty


@pytest.mark.asyncio
async def test_an_invalid_session_timeout_and_an_empty_group_id_are_refused() -> None:
    groups = await Groups().start()
    refused = await answer(groups.join("g", session_ms=10))
    assert refused.error is ErrorCode.invalid_session_timeout
    assert groups.coordinator.group("g") is None
    assert (await answer(groups.join(""))).error is ErrorCode.invalid_group_id
