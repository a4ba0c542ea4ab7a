"""ShareGroupHeartbeat and ShareGroupDescribe on one shard (KIP-932's share groups).

A member joins with epoch 0 and its subscription (topic names), heartbeats with its epoch
every share.heartbeat.interval.ms, and leaves with epoch -1; one that stops
heartbeating for share.session.timeout.ms is removed. Any change to the members, their
subscriptions or the subscribed topics' partitions makes a new group epoch and a new
assignment (the simple assignor: assignors.py's share section), which each member gets
at its next heartbeat with the group's epoch: there is nothing to revoke first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import ErrorCode, KafkaError

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.shard import CoordinatorResult
from .share_assignor import assign_share_partitions
from .share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareAssignment,
    ShareGroup,
    ShareGroupMember,
)

if TYPE_CHECKING:
    from .consumer_groups import TopicImage
    from .group_configs import GroupConfigs

log = logging.getLogger("brook.groups")


@dataclass(frozen=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True)
class ShareHeartbeatResponse:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # None: unchanged since the member's last heartbeat.
    assignment: ShareAssignment | None = None


# Kafka's bound on a share member's id (a UUID's string is 36 characters).
MAX_MEMBER_ID_LENGTH = 36


def _session_timer(group_id: str, member_id: str) -> str:
    return f"share-session-{group_id}-{member_id}"


def validate_share_heartbeat(request: ShareHeartbeatRequest) -> KafkaError | None:
    """INVALID_REQUEST for what Kafka's throwIfShareGroupHeartbeatRequestIsInvalid refuses."""
    if not request.member_id or len(request.member_id) > MAX_MEMBER_ID_LENGTH:
        return KafkaError.with_code(ErrorCode.invalid_request, "Invalid member id in the request.")
    if request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return KafkaError.with_code(
            ErrorCode.invalid_request,
            f"MemberEpoch is {request.member_epoch}, but must be greater than or equal to -1.",
        )
    if request.member_epoch == 0 and not request.subscribed_topic_names:
        return KafkaError.with_code(
            ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
        )
    return None


class ShareGroups:
    def __init__(
        self,
        groups: dict[str, ShareGroup],
        timer: CoordinatorTimer,
        config: Any,
        topics: TopicImage | None,
        group_configs: GroupConfigs | None,
        other_group_exists: Callable[[str], bool],
    ) -> None:
        self.groups = groups
        self.timer = timer
        self.config = config
        self.topics = topics
        self.group_configs = group_configs
        self._other_group_exists = other_group_exists

    def _setting(self, group_id: str, name: str, broker_key: str) -> int:
        if self.group_configs is not None:
            return self.group_configs.value(group_id, name)
        return int(self.config[broker_key])

    def heartbeat(self, request: ShareHeartbeatRequest) -> CoordinatorResult[Any]:
        return CoordinatorResult([], self._heartbeat(request))

    def _heartbeat(self, request: ShareHeartbeatRequest) -> ShareHeartbeatResponse:
        group_id = request.group_id
        group = self.groups.get(group_id)
        if group is None:
            if self._other_group_exists(group_id):
                return ShareHeartbeatResponse(
                    ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
                )
            if request.member_epoch != 0:
                return ShareHeartbeatResponse(
                    ErrorCode.group_id_not_found, f"Group {group_id} not found."
                )
            group = ShareGroup(group_id)
        if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            return self._leave(group, request.member_id)
        member = group.members.get(request.member_id)
        max_size = self.config["group.share.max.size"]
        if member is None and len(group.members) >= max_size:
            return ShareHeartbeatResponse(
                ErrorCode.group_max_size_reached,
                f"The share group has reached its maximum capacity of {max_size} members.",
            )
        if request.member_epoch != 0:
            if member is None:
                return ShareHeartbeatResponse(
                    ErrorCode.unknown_member_id,
                    f"Member {request.member_id} is not a member of group {group_id}.",
                )
            if request.member_epoch != member.member_epoch:
                return ShareHeartbeatResponse(
                    ErrorCode.fenced_member_epoch,
                    f"The share group member has a different member epoch"
                    f" ({request.member_epoch}) than the one known by the group coordinator"
                    f" ({member.member_epoch}). The member must abandon all its partitions"
                    " and rejoin.",
                )
        self.groups[group_id] = group
        previous_assignment = member.assignment if member is not None else None
        if member is None:
            member = ShareGroupMember(request.member_id)
            group.members[member.member_id] = member
            group.group_epoch += 1
            log.info("Member %s joined share group %s", member.member_id, group_id)
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        names = request.subscribed_topic_names
        if names is not None and tuple(sorted(set(names))) != member.subscribed_topic_names:
            member.subscribed_topic_names = tuple(sorted(set(names)))
            group.group_epoch += 1
        partitions = self._subscribed_partitions(group)
        if partitions != group.subscribed_partitions:
            if group.subscribed_partitions:
                group.group_epoch += 1
            group.subscribed_partitions = partitions
        if group.assignment_epoch < group.group_epoch:
            self._assign(group)
        # Nothing to revoke first: the member takes its target and the group's epoch.
        member.assignment = group.target_assignment.get(member.member_id, {})
        member.member_epoch = group.assignment_epoch
        self._schedule_session_expiry(group, member)
        send = (
            request.member_epoch == 0
            or names is not None
            or previous_assignment != member.assignment
        )
        return ShareHeartbeatResponse(
            ErrorCode.none,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=self._setting(
                group_id, "share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms"
            ),
            assignment=dict(member.assignment) if send else None,
        )

    def _subscribed_partitions(self, group: ShareGroup) -> dict[str, int]:
        counts: dict[str, int] = {}
        if self.topics is None:
            return counts
        for name in sorted(group.subscribed_topics()):
            topic = self.topics.get(name)
            if topic is not None:
                counts[name] = len(topic.partitions)
        return counts

    def _assign(self, group: ShareGroup) -> None:
        topic_ids = {}
        if self.topics is not None:
            for name in group.subscribed_partitions:
                topic = self.topics.get(name)
                if topic is not None:
                    topic_ids[name] = topic.topic_id
        targets = assign_share_partitions(
            {m.member_id: m.subscribed_topic_names for m in group.members.values()},
            {topic_ids[name]: count for name, count in group.subscribed_partitions.items()},
            {topic_ids[name]: name for name in group.subscribed_partitions},
            {m.member_id: m.assignment for m in group.members.values()},
        )
        group.target_assignment = targets
        group.assignment_epoch = group.group_epoch

    def _leave(self, group: ShareGroup, member_id: str) -> ShareHeartbeatResponse:
        if group.members.pop(member_id, None) is not None:
            self._removed(group, member_id, "left")
        return ShareHeartbeatResponse(
            ErrorCode.none, member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
        )

    def _removed(self, group: ShareGroup, member_id: str, why: str) -> None:
        self.timer.cancel(_session_timer(group.group_id, member_id))
        group.group_epoch += 1
        group.target_assignment.pop(member_id, None)
        log.info("Member %s %s share group %s", member_id, why, group.group_id)

    def _schedule_session_expiry(self, group: ShareGroup, member: ShareGroupMember) -> None:
        timeout = self._setting(
            group.group_id, "share.session.timeout.ms", "group.share.session.timeout.ms"
        )
        group_id, member_id = group.group_id, member.member_id

        def expire() -> CoordinatorResult[None]:
            current = self.groups.get(group_id)
            if current is not None and current.members.pop(member_id, None) is not None:
                self._removed(current, member_id, "was removed from (session timed out)")
            return CoordinatorResult([], None)

        self.timer.schedule(_session_timer(group_id, member_id), timeout, expire)

    def describe(self, group_id: str) -> ShareGroup | None:
        return self.groups.get(group_id)

    def delete(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        return ErrorCode.none
