"""A member's next step towards the group's target assignment (Kafka's CurrentAssignmentBuilder).

A member gives up before it gets: partitions it must lose are first revoked (the
member stays at its epoch, UNREVOKED_PARTITIONS, until a heartbeat shows it no longer
owns them); only then does it move to the target epoch and take what the target gives
it, and of that only the partitions no other member still holds (the rest wait,
UNRELEASED_PARTITIONS, until their owner lets go). So the epoch of a member says which
target it has reached, and a partition is never consumed by two members at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from brook.protocol.errors import ErrorCode, KafkaError

from .assignors import Assignment, TopicId
from .consumer_group import ConsumerGroupMember, MemberState

OwnedPartitions = Mapping[TopicId, frozenset[int]]


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[TopicId, int], int],
    owned: OwnedPartitions | None,
) -> ConsumerGroupMember:
    """The member after this heartbeat. `owned` is what the heartbeat says the member
    owns (None when it did not say); `partition_epoch` is the group's owner epoch of a
    partition (-1 when free)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or _owns_any(owned, member.pending_revocation):
            return member  # still revoking
        epoch = min(member.member_epoch + 1, target_epoch)
        return _next(member, epoch, target_epoch, target, partition_epoch, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or any(owned.values()):
        raise KafkaError.with_code(
            ErrorCode.fenced_member_epoch,
            f"member {member.member_id} is in an unknown state and owns partitions",
        )
    return _next(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _owns_any(owned: OwnedPartitions, partitions: Assignment) -> bool:
    return any(owned.get(topic, frozenset()) & parts for topic, parts in partitions.items())


def _next(
    member: ConsumerGroupMember,
    epoch: int,
    target_epoch: int,
    target: Assignment,
    partition_epoch: Callable[[TopicId, int], int],
    owned: OwnedPartitions | None,
) -> ConsumerGroupMember:
    assigned: dict[TopicId, frozenset[int]] = {}
    revoking: dict[TopicId, frozenset[int]] = {}
    to_assign: dict[TopicId, frozenset[int]] = {}
    unreleased = False
    for topic in set(member.assigned) | set(target):
        current = member.assigned.get(topic, frozenset())
        wanted = target.get(topic, frozenset())
        kept = current & wanted
        if kept:
            assigned[topic] = kept
        if current - kept:
            revoking[topic] = current - kept
        own_revoking = member.pending_revocation.get(topic, frozenset())
        free = set()
        for partition in wanted - kept:
            # A partition this member itself still revokes is not another's to release.
            if partition_epoch(topic, partition) == -1 or partition in own_revoking:
                free.add(partition)
            else:
                unreleased = True
        if free:
            to_assign[topic] = frozenset(free)
    if revoking and (owned is None or _owns_any(owned, revoking)):
        # Give up first: the member keeps its epoch until the revocation is acknowledged.
        return member.with_member_epoch(
            epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
            assignment_epochs=_epochs(member, [assigned, revoking], {}, epoch),
        )
    for topic, parts in to_assign.items():
        assigned[topic] = assigned.get(topic, frozenset()) | parts
    return member.with_member_epoch(
        target_epoch,
        state=MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE,
        assigned=assigned,
        pending_revocation={},
        assignment_epochs=_epochs(member, [assigned], to_assign, target_epoch),
    )


def _epochs(
    member: ConsumerGroupMember,
    kept: list[Mapping[TopicId, frozenset[int]]],
    new: Mapping[TopicId, frozenset[int]],
    epoch: int,
) -> dict[tuple[TopicId, int], int]:
    """Each partition's assignment epoch (KIP-1251): a partition the member had keeps
    its own; one it is given now gets the epoch it is given at."""
    epochs = {}
    for assignment in kept:
        for topic, parts in assignment.items():
            for partition in parts:
                if partition in new.get(topic, frozenset()):
                    epochs[(topic, partition)] = epoch
                else:
                    had = member.assignment_epoch(topic, partition)
                    epochs[(topic, partition)] = had if had is not None else epoch
    return epochs
