"""A share group (KIP-932) as its coordinator keeps it: members, their subscriptions and
assignments, the group epoch, the target assignment and the partitions whose share state
the group has (the ShareGroupStatePartitionMetadata record).

Unlike a consumer group's, a share group's partitions are not owned: several members
may read one partition, and the share partition (on the partition's leader) hands each
record to one of them. So an assignment changes at once, without revocation: a member
is told its new partitions at its next heartbeat, and its epoch is the target's.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

TopicId = uuid.UUID
# A member's partitions: topic id -> partition indexes.
ShareAssignment = dict[TopicId, frozenset[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class ShareGroupMember:
    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: ShareAssignment = field(default_factory=dict)


@dataclass(frozen=True)
class StatePartitions:
    """The topic partitions whose share state the group has: being initialized,
    initialized (only these are assigned), and being deleted."""

    initializing: dict[TopicId, frozenset[int]] = field(default_factory=dict)
    initialized: dict[TopicId, frozenset[int]] = field(default_factory=dict)
    deleting: frozenset[TopicId] = frozenset()


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    # The hash of the subscribed topics' metadata the group epoch was last moved for.
    metadata_hash: int = 0
    # -1 before the first target assignment, as Kafka describes it.
    assignment_epoch: int = -1
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # Each member's partitions as of assignment_epoch; a member gets them (and that epoch)
    # at its next heartbeat.
    target_assignment: dict[str, ShareAssignment] = field(default_factory=dict)
    state_partitions: StatePartitions = field(default_factory=StatePartitions)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY
