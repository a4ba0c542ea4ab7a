"""One consumer group of the classic protocol, as Kafka's GroupMetadata models it.

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead once
deleted. Members join (JoinGroup), the leader hands out assignments (SyncGroup), all
heartbeat; a member that stops heartbeating for its session timeout is removed. The
timers that drive this belong to the group's coordinator shard (shard.py).
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from brook.coordinator_state.offsets import CommittedOffset
from brook.protocol.errors import ErrorCode


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass
class JoinResult:
    """What a JoinGroup waiting for the rebalance is answered with."""

    error: ErrorCode = ErrorCode.none
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_waiter: asyncio.Future[JoinResult] | None = None
    sync_waiter: asyncio.Future[tuple[ErrorCode, bytes]] | None = None
    is_new: bool = True

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(frozen=True)
class JoinRequest:
    """What a JoinGroup asks, in the coordinator's terms (every version's fields)."""

    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool  # v4+: MEMBER_ID_REQUIRED on a first join (KIP-394)
    supports_skip_assignment: bool = True  # v9+: KIP-814

    def new_member(self, member_id: str) -> Member:
        return Member(
            member_id,
            self.instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.protocol_type,
            self.protocols,
        )

    def update(self, member: Member) -> None:
        """A rejoining member takes the timeouts and protocols it joins with now."""
        member.rebalance_timeout_ms = self.rebalance_timeout_ms
        member.session_timeout_ms = self.session_timeout_ms
        member.protocols = self.protocols


@dataclass(frozen=True)
class SyncRequest:
    """What a SyncGroup asks: the leader's assignments, or a follower's wait for its own."""

    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None
    protocol_type: str | None  # v5+
    protocol_name: str | None  # v5+
    assignments: dict[str, bytes]


def new_member_id(client_id: str) -> str:
    """Kafka's form: the client id, a dash, a random UUID."""
    return f"{client_id}-{uuid.uuid4()}"


class Group:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        # Member ids handed out with MEMBER_ID_REQUIRED, not yet joined with them.
        self.pending_members: set[str] = set()
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        # While the first rebalance waits for more members: the clock's time at which
        # it stops waiting whatever happens (group.initial.rebalance.delay.ms).
        self.initial_delay_deadline: int | None = None

    # --- state ----------------------------------------------------------------------

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    # --- members --------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, new_member_id: str) -> Member:
        """A static member rejoining under a new member id keeps its place and its
        assignment, so no rebalance is needed (KIP-345)."""
        old_id = self.static_members[instance_id]
        member = self.members.pop(old_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        self.static_members[instance_id] = new_member_id
        if self.leader_id == old_id:
            self.leader_id = new_member_id
        return member

    def all_rejoined(self) -> bool:
        return all(member.join_waiter is not None for member in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols ------------------------------------------------------------------

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """A joining member must share the protocol type and at least one protocol with
        every current member (INCONSISTENT_GROUP_PROTOCOL otherwise)."""
        if not protocols:
            return False
        if not self.members:
            return bool(protocol_type)
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        sets = [set(member.protocol_names) for member in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those every member
        supports; the most votes win (ties to the first voted), as in Kafka."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            vote = next(name for name in member.protocol_names if name in candidates)
            votes[vote] += 1
        return votes.most_common(1)[0][0]

    def describe_members(self) -> list[Any]:
        return list(self.members.values())
