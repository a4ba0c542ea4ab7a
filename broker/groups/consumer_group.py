"""One consumer group of Kafka 4's protocol (KIP-848), as Kafka's ConsumerGroup models it.

The coordinator owns the assignment. The group has an epoch, bumped whenever what the
assignment depends on changes (a member joins or leaves, a subscription changes, a
subscribed topic gains partitions); a target assignment computed at some epoch; and
members, each with its own epoch, reconciling towards the target (reconciliation.py).
A member's partitions carry its epoch in `partition_epochs`: a partition is free for
another member only once its owner has let it go, so no partition has two consumers.

All of it is rebuilt from the records (replay_*): an operation computes the records of
a change, and the runtime replays them into the group as the partition takes them.
The state is derived as Kafka derives it: Empty, Assigning (target behind the group
epoch), Reconciling (a member not yet at the target), Stable.
"""

from __future__ import annotations

import base64
import enum
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from brook.coordinator_state.offsets import CommittedOffset

from .assignors import Assignment, TopicId

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's MemberState ids, as the current-assignment record stores them."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ClassicMetadata:
    """What a classic member joined with: its session timeout and its protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_name(self) -> str:
        """The protocol its JoinGroup and SyncGroup answers name: its first, as Kafka's."""
        return self.protocols[0][0] if self.protocols else ""


@dataclass(frozen=True)
class ConsumerGroupMember:
    """A member: what it subscribes to (its metadata record) and where it stands (its
    current-assignment record). Frozen: a change is a new member, compared with the old
    to know which records to write."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    # A member speaking the classic protocol (JoinGroup/SyncGroup) inside the group: its
    # session timeout and protocols (name, subscription bytes); None for KIP-848 members.
    classic: ClassicMetadata | None = None
    # Current assignment.
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # The member epoch at which each of its partitions was assigned to it (Kafka 4.3's
    # KIP-1251): it may commit a partition's offset with any epoch from that one to its
    # current, so a commit racing the heartbeat that moved its epoch is not refused.
    assignment_epochs: Mapping[tuple[TopicId, int], int] = field(default_factory=dict)

    def same_subscription(self, other: ConsumerGroupMember) -> bool:
        """Whether the member metadata record would be the same."""
        return (
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.subscribed_topic_names,
            self.subscribed_topic_regex,
            self.server_assignor,
            self.classic,
        ) == (
            other.instance_id,
            other.rack_id,
            other.client_id,
            other.client_host,
            other.rebalance_timeout_ms,
            other.subscribed_topic_names,
            other.subscribed_topic_regex,
            other.server_assignor,
            other.classic,
        )

    def same_assignment(self, other: ConsumerGroupMember) -> bool:
        """Whether the current-assignment record would be the same."""
        return (
            self.member_epoch,
            self.previous_member_epoch,
            self.state,
            self.assigned,
            self.pending_revocation,
            self.assignment_epochs,
        ) == (
            other.member_epoch,
            other.previous_member_epoch,
            other.state,
            other.assigned,
            other.pending_revocation,
            other.assignment_epochs,
        )

    def assignment_epoch(self, topic: TopicId, partition: int) -> int | None:
        """The epoch the partition was assigned to the member at; None if it is not the
        member's (neither assigned nor being revoked)."""
        if partition not in self.assigned.get(topic, frozenset()) and partition not in (
            self.pending_revocation.get(topic, frozenset())
        ):
            return None
        return self.assignment_epochs.get((topic, partition), self.member_epoch)

    def reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    def with_member_epoch(self, epoch: int, **changes: object) -> ConsumerGroupMember:
        """The member at `epoch`, its previous epoch the one it leaves (Kafka's
        updateMemberEpoch: unchanged when the epoch is)."""
        previous = self.member_epoch if epoch != self.member_epoch else self.previous_member_epoch
        return replace(self, member_epoch=epoch, previous_member_epoch=previous, **changes)  # type: ignore[arg-type]


def new_member_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes, URL-safe base64."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


def member_topics(member: ConsumerGroupMember, resolved: Mapping[str, frozenset[str]]) -> set[str]:
    """The topics a member subscribes to: by name, and those its regex resolved to."""
    names = set(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names |= resolved.get(member.subscribed_topic_regex, frozenset())
    return names


def subscribed_names(
    members: Iterable[ConsumerGroupMember], resolved: Mapping[str, frozenset[str]]
) -> set[str]:
    """The topics any of `members` subscribes to."""
    names: set[str] = set()
    for member in members:
        names |= member_topics(member, resolved)
    return names


def partitions_of(assignment: Mapping[TopicId, frozenset[int]]) -> Iterator[tuple[TopicId, int]]:
    for topic, partitions in assignment.items():
        for partition in partitions:
            yield topic, partition


def preferred_assignor(members: Iterable[ConsumerGroupMember]) -> str | None:
    """The server assignor most members ask for (ties: the first name in order)."""
    votes: dict[str, int] = {}
    for member in members:
        if member.server_assignor:
            votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
    if not votes:
        return None
    return min(votes, key=lambda name: (-votes[name], name))


class ConsumerGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment_epoch = 0
        self.target_assignment: dict[str, Assignment] = {}
        # (topic id, partition) -> the epoch of the member that owns it (or revokes it).
        self.partition_epochs: dict[tuple[TopicId, int], int] = {}
        # Regular expression -> the topics it resolved to (KIP-848 regex subscriptions).
        self.resolved_regexes: dict[str, frozenset[str]] = {}
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        self.state_timestamp = now_ms
        self.dead = False

    # --- derived state ------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.target_assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(
            not m.reconciled_to(self.target_assignment_epoch)
            for m in self.members.values()
            if m.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
        ):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    def partition_epoch(self, topic: TopicId, partition: int) -> int:
        return self.partition_epochs.get((topic, partition), -1)

    def subscribed_topic_names(self) -> set[str]:
        """Every topic a member subscribes to by name or through a resolved regex."""
        return subscribed_names(self.members.values(), self.resolved_regexes)

    def preferred_assignor(self) -> str | None:
        return preferred_assignor(self.members.values())

    # --- replay ---------------------------------------------------------------------------

    def replay_member(self, member_id: str, subscription: ConsumerGroupMember | None) -> None:
        """A member metadata record (None: its tombstone). The member's current assignment
        is its own record's; a new member starts with none."""
        old = self.members.get(member_id)
        if subscription is None:
            if old is not None:
                self._release(old)
                del self.members[member_id]
                if old.instance_id is not None and self.static_members.get(old.instance_id) == (
                    member_id
                ):
                    del self.static_members[old.instance_id]
            return
        if old is not None:
            subscription = replace(
                subscription,
                member_epoch=old.member_epoch,
                previous_member_epoch=old.previous_member_epoch,
                state=old.state,
                assigned=old.assigned,
                pending_revocation=old.pending_revocation,
            )
            if old.instance_id is not None and old.instance_id != subscription.instance_id:
                self.static_members.pop(old.instance_id, None)
        self.members[member_id] = subscription
        if subscription.instance_id is not None:
            self.static_members[subscription.instance_id] = member_id

    def replay_current_assignment(
        self,
        member_id: str,
        member_epoch: int,
        previous_member_epoch: int,
        state: MemberState,
        assigned: Assignment,
        pending_revocation: Assignment,
        assignment_epochs: Mapping[tuple[TopicId, int], int] | None = None,
    ) -> None:
        old = self.members.get(member_id)
        if old is None:
            # Kafka writes a member's metadata before its assignment; an assignment
            # alone makes a member with no subscription yet.
            old = ConsumerGroupMember(member_id)
        self._release(old)
        member = replace(
            old,
            member_epoch=member_epoch,
            previous_member_epoch=previous_member_epoch,
            state=state,
            assigned=assigned,
            pending_revocation=pending_revocation,
            assignment_epochs=dict(assignment_epochs or {}),
        )
        self.members[member_id] = member
        for tp in partitions_of(member.assigned):
            self.partition_epochs[tp] = member_epoch
        for tp in partitions_of(member.pending_revocation):
            self.partition_epochs[tp] = member_epoch

    def replay_current_assignment_tombstone(self, member_id: str) -> None:
        old = self.members.get(member_id)
        if old is None:
            return
        self._release(old)
        self.members[member_id] = replace(
            old,
            member_epoch=0,
            previous_member_epoch=0,
            state=MemberState.STABLE,
            assigned={},
            pending_revocation={},
            assignment_epochs={},
        )

    def _release(self, member: ConsumerGroupMember) -> None:
        for tp in partitions_of(member.assigned):
            if self.partition_epochs.get(tp) == member.member_epoch:
                del self.partition_epochs[tp]
        for tp in partitions_of(member.pending_revocation):
            if self.partition_epochs.get(tp) == member.member_epoch:
                del self.partition_epochs[tp]

    def replay_target_member(self, member_id: str, assignment: Assignment | None) -> None:
        if assignment is None:
            self.target_assignment.pop(member_id, None)
        else:
            self.target_assignment[member_id] = assignment

    def describe_members(self) -> list[ConsumerGroupMember]:
        return list(self.members.values())
