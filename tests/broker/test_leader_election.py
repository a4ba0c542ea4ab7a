"""Leader elections as Kafka's controller makes them (PartitionLeaderElectionAlgorithms and
Election): who leads, the ISR that follows, and when nobody may lead."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from brook.broker.cluster.leader_election import (
    LeaderAndIsr,
    controlled_shutdown_partition_leader_election,
    new_partition_leader,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)

# -- new partitions -----------------------------------------------------------------------


def test_a_new_partition_is_led_by_its_first_live_replica_with_every_live_replica_in_sync():
    assert new_partition_leader([1, 2, 3], {1, 2, 3}) == LeaderAndIsr(1, (1, 2, 3))
    assert new_partition_leader([1, 2, 3], {3, 2}) == LeaderAndIsr(2, (2, 3))
    assert new_partition_leader([1, 2, 3], {4}) is None
    assert new_partition_leader([], {1}) is None


# -- offline partitions -------------------------------------------------------------------


def test_offline_election_takes_the_first_live_isr_member_in_replica_order():
    # The ISR's own order does not matter: replica order does.
    result = offline_partition_leader_election([1, 2, 3], [3, 2, 1], {2, 3}, False)
    assert result == LeaderAndIsr(2, (3, 2))


def test_offline_election_skips_live_replicas_outside_the_isr():
    result = offline_partition_leader_election([1, 2, 3], [1, 3], {2, 3}, False)
    assert result == LeaderAndIsr(3, (3,))


def test_offline_election_drops_dead_brokers_from_the_isr():
    result = offline_partition_leader_election([1, 2, 3, 4], [1, 2, 3, 4], {2, 4}, False)
    assert result == LeaderAndIsr(2, (2, 4))
    assert not result.unclean


def test_offline_election_without_a_live_isr_member_elects_nobody_when_unclean_is_off():
    assert offline_partition_leader_election([1, 2, 3], [1], {2, 3}, False) is None
    assert offline_partition_leader_election([1, 2, 3], [], {2, 3}, False) is None


def test_unclean_election_takes_the_first_live_replica_and_it_alone_is_in_sync():
    result = offline_partition_leader_election([1, 2, 3], [1], {3, 2}, True)
    assert result == LeaderAndIsr(2, (2,), unclean=True)


def test_unclean_is_only_a_fallback_a_live_isr_member_still_wins():
    result = offline_partition_leader_election([1, 2, 3], [3], {2, 3}, True)
    assert result == LeaderAndIsr(3, (3,), unclean=False)


def test_no_live_replica_elects_nobody_even_unclean():
    assert offline_partition_leader_election([1, 2, 3], [1, 2], {4, 5}, True) is None


# -- reassignment -------------------------------------------------------------------------


def test_reassignment_election_walks_the_target_replicas_and_keeps_the_isr():
    # Moving from [1, 2, 3] to [4, 3, 2]: 4 has not caught up yet, 3 is the first that has.
    result = reassign_partition_leader_election([4, 3, 2], [1, 2, 3], {1, 2, 3, 4})
    assert result == LeaderAndIsr(3, (1, 2, 3))


def test_reassignment_election_needs_a_live_in_sync_target():
    assert reassign_partition_leader_election([4, 5], [1, 2, 4], {1, 2, 5}) is None
    assert reassign_partition_leader_election([4, 5], [1, 2], {1, 2, 4, 5}) is None


# -- preferred replica --------------------------------------------------------------------


def test_preferred_election_elects_the_first_replica_when_live_and_in_sync():
    result = preferred_replica_partition_leader_election([2, 1, 3], [1, 3, 2], {1, 2, 3})
    assert result == LeaderAndIsr(2, (1, 3, 2))


def test_preferred_election_tries_no_other_replica():
    # The preferred replica is live but out of the ISR: nobody, though 1 could lead.
    assert preferred_replica_partition_leader_election([2, 1], [1], {1, 2}) is None
    # In the ISR but not live (a broker in controlled shutdown counts as not live here).
    assert preferred_replica_partition_leader_election([2, 1], [1, 2], {1}) is None
    assert preferred_replica_partition_leader_election([], [1], {1}) is None


# -- controlled shutdown ------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_off_the_broker_and_out_of_the_isr():
    result = controlled_shutdown_partition_leader_election([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1})
    assert result == LeaderAndIsr(2, (2, 3))


def test_controlled_shutdown_skips_out_of_sync_and_dead_replicas():
    result = controlled_shutdown_partition_leader_election([1, 2, 3, 4], [1, 3, 4], {1, 2, 4}, {1})
    # 2 is not in the ISR, 3 is not live: 4 leads; the ISR keeps 3 (only shutting-down
    # brokers leave it here, the dead one leaves when its own failure is handled).
    assert result == LeaderAndIsr(4, (3, 4))


def test_controlled_shutdown_with_no_other_isr_member_elects_nobody():
    assert controlled_shutdown_partition_leader_election([1, 2], [1], {1, 2}, {1}) is None
    assert controlled_shutdown_partition_leader_election([1, 2], [1, 2], {1, 2}, {1, 2}) is None


# -- properties ---------------------------------------------------------------------------

BROKERS = st.integers(0, 9)


@st.composite
def partition_state(draw: st.DrawFn) -> tuple[list[int], list[int], set[int]]:
    replicas = draw(st.lists(BROKERS, min_size=1, max_size=6, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), unique=True))
    live = draw(st.sets(BROKERS))
    return replicas, isr, live


@settings(max_examples=500, deadline=None)
@given(partition_state(), st.booleans())
def test_offline_election_properties(state, unclean_enabled):
    replicas, isr, live = state
    result = offline_partition_leader_election(replicas, isr, live, unclean_enabled)
    live_isr = [replica for replica in replicas if replica in live and replica in isr]
    live_replicas = [replica for replica in replicas if replica in live]
    if live_isr:
        assert result is not None
        assert result.leader == live_isr[0]
        assert not result.unclean
        # The new ISR: the old one's live members, leader included, nobody added.
        assert set(result.isr) == set(isr) & live
        assert result.leader in result.isr
    elif unclean_enabled and live_replicas:
        assert result == LeaderAndIsr(live_replicas[0], (live_replicas[0],), unclean=True)
    else:
        assert result is None


@settings(max_examples=500, deadline=None)
@given(partition_state(), st.sets(BROKERS))
def test_controlled_shutdown_properties(state, shutting_down):
    replicas, isr, live = state
    live_or_shutting_down = live | shutting_down
    result = controlled_shutdown_partition_leader_election(
        replicas, isr, live_or_shutting_down, shutting_down
    )
    if result is None:
        assert not [
            replica
            for replica in isr
            if replica in live_or_shutting_down and replica not in shutting_down
        ]
    else:
        assert result.leader not in shutting_down
        assert result.leader in isr and result.leader in live_or_shutting_down
        assert not set(result.isr) & set(shutting_down)
        assert result.leader in result.isr
