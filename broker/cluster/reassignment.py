"""A partition's replica assignment while a reassignment moves it (Kafka's KIP-455
ReplicaAssignment), and the checks of a reassignment asked for, as pure functions.

During a move the partition's replicas are the union of the target and the original
replicas, target first, with `adding` (target - original) and `removing` (original -
target) beside them; all three live in the topic's znode, so a new controller resumes
the move. The original replicas are the replicas less those being added: their order
after a first replica left is the union's, as in Kafka (a cancel restores the set, not
always the order).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from brook.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = field(default=())
    removing: tuple[int, ...] = field(default=())

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """The assignment while moving to `target` from this one's original replicas (a
        move under way is replaced, not stacked: its adding replicas that the new target
        lacks are simply dropped)."""
        original = self.original_replicas
        full = tuple(dict.fromkeys((*target, *original)))
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in original),
            tuple(r for r in full if r not in target),
        )


def scala_seq(values: Collection[int], kind: str = "List") -> str:
    """A collection as Kafka's messages print a Scala one: List(1, 2, 3)."""
    return f"{kind}({', '.join(map(str, values))})"


def validate_target_replicas(
    current: ReplicaAssignment, target: Sequence[int], live: Collection[int]
) -> tuple[ErrorCode, str] | None:
    """Kafka's KafkaController.validateReplicas: None when `target` may be moved to, else
    INVALID_REPLICA_ASSIGNMENT with Kafka's message. Only the replicas to add must be live:
    a dead broker may stay a replica, or leave."""
    if not target:
        return (
            ErrorCode.invalid_replica_assignment,
            "Empty replica list specified in partition reassignment.",
        )
    if len(set(target)) != len(target):
        return (
            ErrorCode.invalid_replica_assignment,
            f"Duplicate replica ids in partition reassignment replica list: {scala_seq(target)}",
        )
    if any(replica < 0 for replica in target):
        return (
            ErrorCode.invalid_replica_assignment,
            f"Invalid broker id in replica list: {scala_seq(target)}",
        )
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live):
        return (
            ErrorCode.invalid_replica_assignment,
            f"Replica assignment has brokers that are not alive. Replica list: "
            f"{scala_seq(adding)}, live broker list: {scala_seq(sorted(live), 'Set')}",
        )
    return None


def is_reassignment_complete(assignment: ReplicaAssignment, isr: Collection[int]) -> bool:
    """Every target replica is in the ISR (Kafka's isReassignmentComplete)."""
    return set(assignment.target_replicas) <= set(isr)
