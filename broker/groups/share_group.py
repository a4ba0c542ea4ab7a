"""A share group (KIP-932) as its coordinator keeps it: members, their subscriptions and
assignments, and the group epoch.

Unlike a consumer group's, a share group's partitions are not owned: several members
may read one partition, and the share partition (on the partition's leader) hands each
record to one of them. So an assignment changes at once, without revocation: a member
is told its new partitions at its next heartbeat, and its epoch is the group's.
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
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    assignment: ShareAssignment = field(default_factory=dict)


@dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareGroupMember] = field(default_factory=dict)
    # Each member's partitions as of assignment_epoch; a member gets them (and that epoch)
    # at its next heartbeat.
    target_assignment: dict[str, ShareAssignment] = field(default_factory=dict)
    # The subscribed topics' partition counts the assignment was made for: a topic that
    # gains partitions (or is made, deleted) makes a new one.
    subscribed_partitions: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> ShareGroupState:
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_topics(self) -> set[str]:
        return {name for m in self.members.values() for name in m.subscribed_topic_names}
