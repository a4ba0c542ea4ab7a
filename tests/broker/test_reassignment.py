"""A partition's assignment during a move (Kafka's ReplicaAssignment.reassignTo) and the
checks of a target (KafkaController.validateReplicas), as pure functions."""

from __future__ import annotations

from brook.broker.cluster.reassignment import (
    ReplicaAssignment,
    is_reassignment_complete,
    validate_target_replicas,
)
from brook.protocol.errors import ErrorCode


def test_a_move_is_target_then_original_with_adding_and_removing():
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([2, 3, 4])
    assert moving == ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert moving.is_being_reassigned
    assert moving.target_replicas == (2, 3, 4)
    # The original order after the union's: a cancel restores the set, as in Kafka.
    assert moving.original_replicas == (2, 3, 1)


def test_a_cancel_or_a_new_target_replaces_the_move_from_the_original_replicas():
    moving = ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert moving.reassign_to(moving.original_replicas) == ReplicaAssignment((2, 3, 1))
    assert moving.reassign_to([5, 1]) == ReplicaAssignment((5, 1, 2, 3), (5,), (2, 3))


def test_a_reorder_is_no_move_and_a_shrink_only_removes():
    assert ReplicaAssignment((1, 2, 3)).reassign_to([3, 2, 1]) == ReplicaAssignment((3, 2, 1))
    assert ReplicaAssignment((1, 2, 3)).reassign_to([1, 2]) == ReplicaAssignment(
        (1, 2, 3), (), (3,)
    )


def test_complete_once_every_target_replica_is_in_the_isr():
    moving = ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert not is_reassignment_complete(moving, [1, 2, 3])
    assert is_reassignment_complete(moving, [1, 2, 3, 4])


def test_kafkas_checks_of_a_target():
    current = ReplicaAssignment((1, 2, 3))
    invalid = ErrorCode.invalid_replica_assignment
    assert validate_target_replicas(current, [], {1, 2, 3}) == (
        invalid,
        "Empty replica list specified in partition reassignment.",
    )
    assert validate_target_replicas(current, [1, 1], {1, 2, 3}) == (
        invalid,
        "Duplicate replica ids in partition reassignment replica list: List(1, 1)",
    )
    assert validate_target_replicas(current, [1, -1], {1, 2, 3}) == (
        invalid,
        "Invalid broker id in replica list: List(1, -1)",
    )
    assert validate_target_replicas(current, [1, 4], {1, 2, 3}) == (
        invalid,
        "Replica assignment has brokers that are not alive. Replica list: List(4), live"
        " broker list: Set(1, 2, 3)",
    )
    # Only replicas to add must be live: a dead replica may stay.
    assert validate_target_replicas(current, [3, 2], {1, 2}) is None
