"""Replica assignment as Kafka's AdminUtils makes it: the examples of its documentation and
of its own tests (AdminTest, AdminRackAwareTest, AddPartitionsTest), its errors, and the
spread it promises, checked over many shapes with hypothesis."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brook.broker.cluster.assignment import (
    AdminOperationError,
    BrokerMetadata,
    RackAwareMode,
    assign_new_partitions,
    assign_replicas_to_brokers,
    broker_metadatas,
    rack_alternated_broker_list,
)
from brook.protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
)

# AdminUtils' scaladoc: six brokers on three racks.
DOC_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
# AdminRackAwareTest's usual layout: two brokers on each of three racks.
EVEN_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}


def unracked(count: int) -> list[BrokerMetadata]:
    return [BrokerMetadata(broker_id) for broker_id in range(count)]


def racked(racks: dict[int, str]) -> list[BrokerMetadata]:
    return [BrokerMetadata(broker_id, rack) for broker_id, rack in sorted(racks.items())]


def leader_counts(assignment: dict[int, list[int]]) -> Counter[int]:
    return Counter(replicas[0] for replicas in assignment.values())


def replica_counts(assignment: dict[int, list[int]]) -> Counter[int]:
    return Counter(broker for replicas in assignment.values() for broker in replicas)


# -- rack-unaware -------------------------------------------------------------------------


def test_five_brokers_ten_partitions_as_in_kafkas_documentation():
    """The table of AdminUtils' scaladoc (start index 0): leaders round-robin from broker 0,
    followers at a shift that grows by one after the first five partitions."""
    assignment = assign_replicas_to_brokers(unracked(5), 10, 3, fixed_start_index=0)
    assert assignment == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    # Each broker leads two partitions and holds six replicas.
    assert set(leader_counts(assignment).values()) == {2}
    assert set(replica_counts(assignment).values()) == {6}


def test_the_broker_list_order_is_the_round_robin_order():
    """Kafka walks the brokers as given (its callers sort them by id): ids need not be 0..n."""
    brokers = [BrokerMetadata(broker_id) for broker_id in (10, 20, 30)]
    assignment = assign_replicas_to_brokers(brokers, 3, 2, fixed_start_index=0)
    assert assignment == {0: [10, 20], 1: [20, 30], 2: [30, 10]}


def test_the_random_start_comes_from_the_injected_random():
    brokers = unracked(7)
    first = assign_replicas_to_brokers(brokers, 20, 3, rand=random.Random(42))
    again = assign_replicas_to_brokers(brokers, 20, 3, rand=random.Random(42))
    assert first == again
    # The seeds draw the start index and the first shift as Kafka draws them: in that order.
    draws = random.Random(42)
    start_index, shift = draws.randrange(7), draws.randrange(7)
    assert first[0][0] == start_index
    assert first[0][1] == (start_index + 1 + shift % 6) % 7
    layouts = {
        str(assign_replicas_to_brokers(brokers, 20, 3, rand=random.Random(seed)))
        for seed in range(20)
    }
    assert len(layouts) > 1, "different seeds should give different layouts"


def test_start_partition_id_numbers_the_partitions_and_shifts_at_each_wrap():
    """startPartitionId numbers the partitions from it; the follower shift starts where it is
    fixed and grows by one at each multiple of the broker count the numbering passes (not for
    the rounds before the start, as Kafka does it)."""
    brokers = unracked(5)
    tail = assign_replicas_to_brokers(brokers, 6, 3, fixed_start_index=0, start_partition_id=6)
    assert tail == {
        6: [1, 2, 3],
        7: [2, 3, 4],
        8: [3, 4, 0],
        9: [4, 0, 1],
        10: [0, 2, 3],
        11: [1, 3, 4],
    }


def test_replication_factor_one_on_one_broker():
    assert assign_replicas_to_brokers(unracked(1), 3, 1, rand=random.Random(0)) == {
        0: [0],
        1: [0],
        2: [0],
    }


# -- rack-aware ---------------------------------------------------------------------------


def test_rack_alternated_broker_list_as_in_kafkas_documentation():
    assert rack_alternated_broker_list(DOC_RACKS) == [0, 3, 1, 5, 4, 2]
    without_five = {broker: rack for broker, rack in DOC_RACKS.items() if broker != 5}
    assert rack_alternated_broker_list(without_five) == [0, 3, 1, 4, 2]
    nine = {broker: f"rack{broker // 3 + 1}" for broker in range(9)}
    assert rack_alternated_broker_list(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_aware_assignment_as_in_kafkas_documentation():
    """Six partitions round-robin over the alternated list, then partition 6 shifts its
    followers (0, 4, 2 instead of repeating partition 0's 0, 3, 1)."""
    assignment = assign_replicas_to_brokers(
        racked(DOC_RACKS), 7, 3, fixed_start_index=0, start_partition_id=0
    )
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "start_index"),
    [(6, 3, 2), (6, 3, -1), (12, 2, -1), (6, 2, -1)],
)
def test_rack_aware_spread_is_even_over_racks_brokers_and_leaders(
    partitions, replication_factor, start_index
):
    """AdminRackAwareTest's checkReplicaDistribution on even racks: every partition on
    distinct racks, every broker leading as many partitions and holding as many replicas."""
    assignment = assign_replicas_to_brokers(
        racked(EVEN_RACKS),
        partitions,
        replication_factor,
        fixed_start_index=start_index,
        rand=random.Random(7),
    )
    for replicas in assignment.values():
        assert len({EVEN_RACKS[broker] for broker in replicas}) == replication_factor
    assert set(leader_counts(assignment).values()) == {partitions // 6}
    assert set(replica_counts(assignment).values()) == {partitions * replication_factor // 6}


def test_rack_aware_expansion_numbers_from_start_partition_id():
    racks = {6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"}
    assignment = assign_replicas_to_brokers(
        racked(racks), 12, 2, start_partition_id=12, rand=random.Random(3)
    )
    assert sorted(assignment) == list(range(12, 24))
    for replicas in assignment.values():
        assert len({racks[broker] for broker in replicas}) == 2
    assert set(leader_counts(assignment).values()) == {2}
    assert set(replica_counts(assignment).values()) == {4}


def test_more_replicas_than_racks_put_one_on_every_rack():
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    assignment = assign_replicas_to_brokers(racked(racks), 6, 5, rand=random.Random(1))
    for replicas in assignment.values():
        assert len(set(replicas)) == 5
        assert {racks[broker] for broker in replicas} == {"rack1", "rack2", "rack3"}


def test_uneven_racks_still_spread_leaders_and_racks():
    racks = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
    assignment = assign_replicas_to_brokers(racked(racks), 12, 3, rand=random.Random(5))
    for replicas in assignment.values():
        assert len({racks[broker] for broker in replicas}) == 3
    assert set(leader_counts(assignment).values()) == {2}


def test_a_single_rack_falls_back_to_brokers():
    racks = dict.fromkeys(range(6), "rack1")
    assignment = assign_replicas_to_brokers(racked(racks), 6, 3, rand=random.Random(9))
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
    assert set(leader_counts(assignment).values()) == {1}


def test_a_broker_with_a_replica_is_skipped_while_others_have_none():
    """AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: rack a holds three of five
    brokers; with four replicas the fourth must go to an unused broker of rack a."""
    racks = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas_to_brokers(racked(racks), 6, 4, fixed_start_index=2)
    for replicas in assignment.values():
        assert len(set(replicas)) == 4
        assert {racks[broker] for broker in replicas} == {"a", "b", "c"}


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [0, -1])
def test_partitions_must_be_positive(partitions):
    with pytest.raises(InvalidPartitionsError) as caught:
        assign_replicas_to_brokers(unracked(3), partitions, 1)
    assert caught.value.message == "Number of partitions must be larger than 0."
    assert caught.value.error_code == ErrorCode.invalid_partitions


@pytest.mark.parametrize("replication_factor", [0, -1])
def test_replication_factor_must_be_positive(replication_factor):
    with pytest.raises(InvalidReplicationFactorError) as caught:
        assign_replicas_to_brokers(unracked(5), 10, replication_factor)
    assert caught.value.message == "Replication factor must be larger than 0."
    assert caught.value.error_code == ErrorCode.invalid_replication_factor


def test_replication_factor_above_the_brokers_is_refused():
    with pytest.raises(InvalidReplicationFactorError) as caught:
        assign_replicas_to_brokers(unracked(5), 10, 6)
    assert caught.value.message == "Replication factor: 6 larger than available brokers: 5."
    with pytest.raises(InvalidReplicationFactorError) as caught:
        assign_replicas_to_brokers([], 1, 1)
    assert caught.value.message == "Replication factor: 1 larger than available brokers: 0."


def test_partitions_are_checked_before_the_replication_factor():
    with pytest.raises(InvalidPartitionsError):
        assign_replicas_to_brokers(unracked(1), 0, 5)


def test_brokers_with_and_without_racks_are_refused():
    """Kafka throws AdminOperationException, which CreateTopics answers as
    UNKNOWN_SERVER_ERROR (it is not an ApiException)."""
    brokers = [BrokerMetadata(0, "rack1"), BrokerMetadata(1), BrokerMetadata(2, "rack2")]
    with pytest.raises(AdminOperationError) as caught:
        assign_replicas_to_brokers(brokers, 3, 2)
    assert caught.value.message == (
        "Not all brokers have rack information for replica rack aware assignment."
    )
    assert caught.value.error_code == ErrorCode.unknown_server_error


# -- gathering the brokers ----------------------------------------------------------------


def test_broker_metadatas_sorts_by_id_and_applies_the_rack_aware_mode():
    mixed = [BrokerMetadata(2, "r2"), BrokerMetadata(0), BrokerMetadata(1, "r1")]
    with pytest.raises(AdminOperationError) as caught:
        broker_metadatas(mixed)
    assert "Not all brokers have rack information." in caught.value.message
    assert broker_metadatas(mixed, RackAwareMode.SAFE) == unracked(3)
    assert broker_metadatas(mixed, RackAwareMode.DISABLED) == unracked(3)
    every = [BrokerMetadata(1, "r1"), BrokerMetadata(0, "r0")]
    assert broker_metadatas(every, RackAwareMode.SAFE) == [
        BrokerMetadata(0, "r0"),
        BrokerMetadata(1, "r1"),
    ]
    assert broker_metadatas(every, RackAwareMode.DISABLED) == unracked(2)
    assert broker_metadatas(list(reversed(unracked(3)))) == unracked(3)


# -- CreatePartitions ---------------------------------------------------------------------


def test_added_partitions_carry_on_from_partition_zero_as_kafka_places_them():
    """AddPartitionsTest.testReplicaPlacementAllServers: four brokers, partition 0 on
    2, 3, 0, 1; growing to seven partitions leads them on 3, 0, 1, 2, 3, 0."""
    added = assign_new_partitions("new-topic3", {0: [2, 3, 0, 1]}, unracked(4), 7)
    assert {partition: replicas[0] for partition, replicas in added.items()} == {
        1: 3,
        2: 0,
        3: 1,
        4: 2,
        5: 3,
        6: 0,
    }
    assert all(sorted(replicas) == [0, 1, 2, 3] for replicas in added.values())


def test_added_partitions_on_some_of_the_brokers():
    """AddPartitionsTest.testReplicaPlacementPartialServers: partition 0 on 1, 2."""
    added = assign_new_partitions("new-topic2", {0: [1, 2]}, unracked(4), 3)
    assert added == {1: [2, 0], 2: [3, 1]}


def test_added_partitions_start_at_the_first_broker_not_below_the_old_leader():
    """Partition 0 led by a broker that is gone: start at the next id up, or at 0."""
    brokers = [BrokerMetadata(broker_id) for broker_id in (1, 4, 6)]
    added = assign_new_partitions("t", {0: [5, 6], 1: [6, 1]}, brokers, 3)
    # The first id not below 5 is 6, at index 2: partition 2 leads at (2 + 2) % 3, broker 4.
    assert added == {2: [4, 6]}
    added = assign_new_partitions("t", {0: [9, 6]}, brokers, 2)
    assert added == {1: [4, 6]}


def test_added_partitions_keep_the_replication_factor_of_partition_zero():
    added = assign_new_partitions("t", {0: [0, 1, 2], 1: [1, 2, 3]}, unracked(5), 6)
    assert sorted(added) == [2, 3, 4, 5]
    assert all(len(set(replicas)) == 3 for replicas in added.values())


def test_added_partitions_that_are_no_increase_are_refused():
    for count in (1, 0):
        with pytest.raises(InvalidPartitionsError) as caught:
            assign_new_partitions("t", {0: [0]}, unracked(2), count)
        assert caught.value.message == (
            "The number of partitions for a topic can only be increased."
            f" Topic t currently has 1 partitions, {count} would not be an increase."
        )


def test_added_partitions_without_partition_zero_are_refused():
    with pytest.raises(AdminOperationError) as caught:
        assign_new_partitions("new-topic5", {1: [0, 1]}, unracked(2), 3)
    assert caught.value.message.startswith(
        "Unexpected existing replica assignment for topic 'new-topic5', partition id 0 is missing."
    )


def test_added_partitions_need_enough_brokers():
    with pytest.raises(InvalidReplicationFactorError) as caught:
        assign_new_partitions("t", {0: [0, 1, 2]}, unracked(2), 2)
    assert caught.value.message == "Replication factor: 3 larger than available brokers: 2."


# -- properties ---------------------------------------------------------------------------


@st.composite
def cluster(draw: st.DrawFn, with_racks: bool) -> tuple[list[BrokerMetadata], int, int]:
    """Brokers with distinct ids (and racks, or none), a partition count and an RF."""
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=12, unique=True))
    ids.sort()
    if with_racks:
        racks = draw(st.lists(st.sampled_from("abcde"), min_size=len(ids), max_size=len(ids)))
        brokers = [
            BrokerMetadata(broker_id, rack) for broker_id, rack in zip(ids, racks, strict=True)
        ]
    else:
        brokers = [BrokerMetadata(broker_id) for broker_id in ids]
    partitions = draw(st.integers(1, 60))
    replication_factor = draw(st.integers(1, len(ids)))
    return brokers, partitions, replication_factor


def check_spread(
    brokers: list[BrokerMetadata], assignment: dict[int, list[int]], replication_factor: int
) -> None:
    ids = {broker.id for broker in brokers}
    for replicas in assignment.values():
        assert len(replicas) == replication_factor
        assert len(set(replicas)) == replication_factor
        assert set(replicas) <= ids
    leaders = leader_counts(assignment)
    counts = [leaders.get(broker_id, 0) for broker_id in ids]
    assert max(counts) - min(counts) <= 1, f"leaders spread unevenly: {leaders}"


@settings(max_examples=300, deadline=None)
@given(cluster(with_racks=False), st.integers(0, 2**32), st.integers(-1, 40))
def test_rack_unaware_spread_holds_for_any_cluster(shape, seed, start_partition_id):
    brokers, partitions, replication_factor = shape
    assignment = assign_replicas_to_brokers(
        brokers,
        partitions,
        replication_factor,
        start_partition_id=start_partition_id,
        rand=random.Random(seed),
    )
    first = max(0, start_partition_id)
    assert sorted(assignment) == list(range(first, first + partitions))
    check_spread(brokers, assignment, replication_factor)
    # Whole rounds from partition 0: every broker holds the same number of replicas.
    if start_partition_id <= 0 and partitions % len(brokers) == 0:
        assert len(set(replica_counts(assignment).values())) == 1


@settings(max_examples=300, deadline=None)
@given(cluster(with_racks=True), st.integers(0, 2**32))
def test_rack_aware_spread_holds_for_any_cluster(shape, seed):
    brokers, partitions, replication_factor = shape
    racks = {broker.id: broker.rack for broker in brokers}
    rack_count = len(set(racks.values()))
    assignment = assign_replicas_to_brokers(
        brokers, partitions, replication_factor, rand=random.Random(seed)
    )
    check_spread(brokers, assignment, replication_factor)
    for replicas in assignment.values():
        # One replica per rack while racks remain: distinct racks up to the rack count.
        assert len({racks[broker] for broker in replicas}) == min(replication_factor, rack_count)


@settings(max_examples=200, deadline=None)
@given(cluster(with_racks=False), st.integers(1, 30))
def test_added_partitions_spread_like_the_rest(shape, more):
    brokers, partitions, replication_factor = shape
    existing = assign_replicas_to_brokers(
        brokers, partitions, replication_factor, rand=random.Random(0)
    )
    added = assign_new_partitions("t", existing, brokers, partitions + more)
    assert sorted(added) == list(range(partitions, partitions + more))
    check_spread(brokers, added, replication_factor)
