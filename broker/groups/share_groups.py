"""ShareGroupHeartbeat and the rest of a share group's life on one shard (KIP-932), as
Kafka 4.2's GroupMetadataManager has it.

A member joins with epoch 0 and its subscription (topic names), heartbeats with its epoch
every share.heartbeat.interval.ms, and leaves with epoch -1; one that stops
heartbeating for share.session.timeout.ms is removed. A heartbeat's changes are records
(share_records.py), which the runtime replays into the group once the partition takes
them: the member's metadata; a new group epoch when the subscriptions or the subscribed
topics' partitions changed; a new target assignment (the simple assignor) when the
group epoch moved past it; the member's current assignment, which is its target at once
(a share group's partitions are not owned, so nothing is revoked first) with the target's
epoch. The partitions a share group reads are "initialized" first (the
ShareGroupStatePartitionMetadata record): only those are assigned.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import ErrorCode, KafkaError

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.records import CoordinatorRecord
from ..coordinator.shard import CoordinatorResult
from . import share_records as records
from .consumer_groups import topics_hash
from .share_assignor import assign_share_partitions
from .share_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    ShareAssignment,
    ShareGroup,
    ShareGroupMember,
    StatePartitions,
    TopicId,
)

if TYPE_CHECKING:
    from .consumer_groups import TopicImage
    from .group_configs import GroupConfigs

log = logging.getLogger("brook.groups")

# Kafka's bound on a share member's id (a UUID's string is 36 characters).
MAX_MEMBER_ID_LENGTH = 36


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


def _session_timer(group_id: str, member_id: str) -> str:
    return f"share-session-{group_id}-{member_id}"


def validate_share_heartbeat(request: ShareHeartbeatRequest) -> KafkaError | None:
    """INVALID_REQUEST for what Kafka's KafkaApis and throwIfShareGroupHeartbeatRequestIsInvalid
    refuse, with their messages."""
    if not request.member_id or len(request.member_id) > MAX_MEMBER_ID_LENGTH:
        return KafkaError.with_code(ErrorCode.invalid_request, "Invalid member id in the request.")
    if not request.member_id.strip():
        return KafkaError.with_code(ErrorCode.invalid_request, "MemberId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        return KafkaError.with_code(ErrorCode.invalid_request, "RackId can't be empty.")
    if request.member_epoch == 0 and not request.subscribed_topic_names:
        return KafkaError.with_code(
            ErrorCode.invalid_request, "SubscribedTopicNames must be set in first request."
        )
    if request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        return KafkaError.with_code(ErrorCode.invalid_request, "MemberEpoch is invalid.")
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

    # --- heartbeat -----------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeatRequest) -> CoordinatorResult[Any]:
        try:
            if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as exc:
            return CoordinatorResult([], ShareHeartbeatResponse(exc.error_code, exc.message))

    def _group(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self._other_group_exists(group_id):
            raise KafkaError.with_code(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
            )
        if not create:
            raise KafkaError.with_code(
                ErrorCode.group_id_not_found, f"Share group {group_id} not found."
            )
        # Made for real when its records are replayed.
        return ShareGroup(group_id)

    def _heartbeat(self, request: ShareHeartbeatRequest) -> CoordinatorResult[Any]:
        group_id = request.group_id
        group = self._group(group_id, create=request.member_epoch == 0)
        max_size = self.config["group.share.max.size"]
        member = group.members.get(request.member_id)
        if member is None and len(group.members) >= max_size:
            raise KafkaError.with_code(
                ErrorCode.group_max_size_reached,
                f"The share group has reached its maximum capacity of {max_size} members.",
            )
        if member is None:
            if request.member_epoch != 0:
                raise KafkaError.with_code(
                    ErrorCode.unknown_member_id,
                    f"Member {request.member_id} is not a member of group {group_id}.",
                )
            member = ShareGroupMember(request.member_id)
        elif request.member_epoch != 0:
            self._check_epoch(member, request.member_epoch)
        out: list[CoordinatorRecord] = []
        names = request.subscribed_topic_names
        updated = ShareGroupMember(
            member.member_id,
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id,
            client_host=request.client_host,
            subscribed_topic_names=(
                tuple(sorted(set(names))) if names is not None else member.subscribed_topic_names
            ),
            assignment=member.assignment,
        )
        new_member = member.member_id not in group.members
        subscription_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        if new_member or _metadata_changed(member, updated):
            out.append(records.member_metadata(group_id, updated))
        members = {**group.members, updated.member_id: updated}
        subscribed = {name for m in members.values() for name in m.subscribed_topic_names}
        # The partitions a share group reads are initialized the first time it subscribes
        # to them, and only initialized ones are assigned.
        state = self._initialize(group, subscribed)
        if state is not None:
            out.append(records.state_partitions(group_id, state, self._names(state)))
        initialized = state.initialized if state is not None else group.state_partitions.initialized
        metadata_hash = self._metadata_hash(subscribed)
        group_epoch = group.group_epoch
        if (
            new_member
            or subscription_changed
            or metadata_hash != group.metadata_hash
            or state is not None
        ):
            group_epoch += 1
            out.append(records.group_epoch(group_id, group_epoch, metadata_hash))
        assignment_epoch = group.assignment_epoch
        targets = dict(group.target_assignment)
        if group_epoch > assignment_epoch:
            computed = self._target(members, initialized, targets)
            for member_id, target in computed.items():
                if targets.get(member_id) != target:
                    out.append(records.target_member(group_id, member_id, target))
            targets = computed
            assignment_epoch = group_epoch
            out.append(records.target_epoch(group_id, assignment_epoch))
        # Nothing to revoke first: the member takes its target, and the target's epoch.
        assigned = self._subscribed_only(targets.get(updated.member_id, {}), updated)
        epoch, previous = updated.member_epoch, updated.previous_member_epoch
        if assignment_epoch != epoch:
            epoch, previous = assignment_epoch, updated.member_epoch
        if (epoch, assigned) != (updated.member_epoch, updated.assignment) or new_member:
            out.append(
                records.current_assignment(group_id, updated.member_id, epoch, previous, assigned)
            )
        self._schedule_session_expiry(group_id, updated.member_id)
        if new_member:
            log.info("Member %s joined share group %s", updated.member_id, group_id)
        send = request.member_epoch == 0 or names is not None or assigned != member.assignment
        return CoordinatorResult(
            out,
            ShareHeartbeatResponse(
                ErrorCode.none,
                member_id=updated.member_id,
                member_epoch=epoch,
                heartbeat_interval_ms=self._setting(
                    group_id, "share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms"
                ),
                assignment=dict(assigned) if send else None,
            ),
        )

    @staticmethod
    def _check_epoch(member: ShareGroupMember, received: int) -> None:
        if received > member.member_epoch:
            raise KafkaError.with_code(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a greater member epoch ({received}) than the"
                f" one known by the group coordinator ({member.member_epoch}). The member"
                " must abandon all its partitions and rejoin.",
            )
        if received < member.member_epoch and received != member.previous_member_epoch:
            raise KafkaError.with_code(
                ErrorCode.fenced_member_epoch,
                f"The share group member has a smaller member epoch ({received}) than the"
                f" one known by the group coordinator ({member.member_epoch}) and it does"
                " not match the previous member epoch"
                f" ({member.previous_member_epoch}). The member must abandon all its"
                " partitions and rejoin.",
            )

    def _initialize(self, group: ShareGroup, subscribed: set[str]) -> StatePartitions | None:
        """The group's state partitions with the subscribed partitions not initialized
        yet added, or None when there are none. Kafka asks the share coordinator to write
        an empty state first (InitializeShareGroupState, start offset -1); Brook's share
        coordinator takes a missing state for that, so they are initialized at once."""
        if self.topics is None:
            return None
        current = group.state_partitions
        added: dict[TopicId, frozenset[int]] = {}
        for name in subscribed:
            topic = self.topics.get(name)
            if topic is None:
                continue
            have = current.initialized.get(topic.topic_id, frozenset())
            wanted = frozenset(range(len(topic.partitions)))
            if not wanted <= have:
                added[topic.topic_id] = wanted | have
        if not added:
            return None
        return StatePartitions(
            initializing=dict(current.initializing),
            initialized={**current.initialized, **added},
            deleting=current.deleting - frozenset(added),
        )

    def _names(self, state: StatePartitions) -> dict[TopicId, str]:
        names = {}
        for topic_id in {*state.initializing, *state.initialized, *state.deleting}:
            topic = self.topics.get_by_id(topic_id) if self.topics is not None else None
            if topic is not None:
                names[topic_id] = topic.name
        return names

    def _metadata_hash(self, names: set[str]) -> int:
        """A hash of the subscribed topics as they are (id, partition count): when it
        changes, the group epoch moves and the assignment is made again. Kafka keeps
        such a hash (xxh3 of more fields); its value here is Brook's own."""
        return topics_hash(self.topics, names)

    def _target(
        self,
        members: dict[str, ShareGroupMember],
        initialized: dict[TopicId, frozenset[int]],
        current: dict[str, ShareAssignment],
    ) -> dict[str, ShareAssignment]:
        names: dict[TopicId, str] = {}
        counts: dict[TopicId, int] = {}
        subscribed = {name for m in members.values() for name in m.subscribed_topic_names}
        for name in subscribed:
            topic = self.topics.get(name) if self.topics is not None else None
            if topic is None or topic.topic_id not in initialized:
                continue
            names[topic.topic_id] = name
            counts[topic.topic_id] = len(topic.partitions)
        assignable = {
            topic_id: frozenset(p for p in initialized[topic_id] if p < counts[topic_id])
            for topic_id in counts
        }
        return assign_share_partitions(
            {m.member_id: m.subscribed_topic_names for m in members.values()},
            assignable,
            names,
            current,
        )

    def _subscribed_only(
        self, target: ShareAssignment, member: ShareGroupMember
    ) -> ShareAssignment:
        subscribed = set(member.subscribed_topic_names)
        kept = {}
        for topic_id, partitions in target.items():
            topic = self.topics.get_by_id(topic_id) if self.topics is not None else None
            if topic is not None and topic.name in subscribed and partitions:
                kept[topic_id] = partitions
        return kept

    # --- leaving and expiring ------------------------------------------------------------

    def _leave(self, request: ShareHeartbeatRequest) -> CoordinatorResult[Any]:
        group = self.groups.get(request.group_id)
        if group is None:
            if self._other_group_exists(request.group_id):
                raise KafkaError.with_code(
                    ErrorCode.group_id_not_found,
                    f"Group {request.group_id} is not a share group.",
                )
            raise KafkaError.with_code(
                ErrorCode.group_id_not_found, f"Group {request.group_id} not found."
            )
        if request.member_id not in group.members:
            raise KafkaError.with_code(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {request.group_id}.",
            )
        out = self._fence(group, request.member_id, "left")
        return CoordinatorResult(
            out,
            ShareHeartbeatResponse(
                ErrorCode.none, member_id=request.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH
            ),
        )

    def _fence(self, group: ShareGroup, member_id: str, why: str) -> list[CoordinatorRecord]:
        """The member's records go; the group epoch moves (the others get the member's
        partitions at their next heartbeat)."""
        self.timer.cancel(_session_timer(group.group_id, member_id))
        out = records.member_tombstones(group.group_id, member_id)
        remaining = {
            name
            for m in group.members.values()
            if m.member_id != member_id
            for name in m.subscribed_topic_names
        }
        out.append(
            records.group_epoch(
                group.group_id, group.group_epoch + 1, self._metadata_hash(remaining)
            )
        )
        log.info("Member %s %s share group %s", member_id, why, group.group_id)
        return out

    def _schedule_session_expiry(self, group_id: str, member_id: str) -> None:
        timeout = self._setting(
            group_id, "share.session.timeout.ms", "group.share.session.timeout.ms"
        )

        def expire() -> CoordinatorResult[None]:
            group = self.groups.get(group_id)
            if group is None or member_id not in group.members:
                return CoordinatorResult([], None)
            return CoordinatorResult(
                self._fence(group, member_id, "was removed from (session timed out)"), None
            )

        self.timer.schedule(_session_timer(group_id, member_id), timeout, expire)

    def on_loaded(self) -> None:
        """The partition loaded: each member's session starts again from now."""
        for group in self.groups.values():
            for member_id in group.members:
                self._schedule_session_expiry(group.group_id, member_id)

    # --- offsets (AlterShareGroupOffsets, DeleteShareGroupOffsets) ------------------------

    def _empty_share_group(self, group_id: str, create: bool) -> ShareGroup:
        """The group whose share state an admin request changes: a share group (made when
        `create` and missing) without members."""
        group = self._group(group_id, create)
        if group.members:
            raise KafkaError.with_code(ErrorCode.non_empty_group, "The group is not empty.")
        return group

    def alter_offsets(
        self, group_id: str, partitions: dict[TopicId, frozenset[int]]
    ) -> CoordinatorResult[int]:
        """The partitions get a new state (their start offsets, written by the caller to
        the share coordinator with the epoch answered): they are initialized from now."""
        group = self._empty_share_group(group_id, create=True)
        current = group.state_partitions
        initialized = dict(current.initialized)
        for topic_id, indexes in partitions.items():
            initialized[topic_id] = initialized.get(topic_id, frozenset()) | indexes
        state = StatePartitions(
            initializing=dict(current.initializing),
            initialized=initialized,
            deleting=current.deleting - frozenset(partitions),
        )
        # A missing group is made by the record's replay, as in Kafka.
        out = [records.state_partitions(group_id, state, self._names(state))]
        return CoordinatorResult(out, group.group_epoch)

    def offsets_to_delete(
        self, group_id: str, topic_ids: list[TopicId]
    ) -> dict[TopicId, frozenset[int]]:
        """The initialized partitions of the topics (whose state the caller deletes)."""
        group = self.groups.get(group_id)
        if group is None:
            self._group(group_id, create=False)  # raises GROUP_ID_NOT_FOUND with its message
            raise AssertionError("unreachable")
        if group.members:
            raise KafkaError.with_code(ErrorCode.non_empty_group, "The group is not empty.")
        initialized = group.state_partitions.initialized
        return {t: initialized[t] for t in topic_ids if t in initialized}

    def offsets_deleted(self, group_id: str, topic_ids: list[TopicId]) -> CoordinatorResult[None]:
        """The topics' share state is gone: they are no longer initialized."""
        group = self.groups.get(group_id)
        if group is None:
            return CoordinatorResult([], None)
        current = group.state_partitions
        state = StatePartitions(
            initializing={t: p for t, p in current.initializing.items() if t not in topic_ids},
            initialized={t: p for t, p in current.initialized.items() if t not in topic_ids},
            deleting=current.deleting - frozenset(topic_ids),
        )
        return CoordinatorResult(
            [records.state_partitions(group_id, state, self._names(state))], None
        )

    # --- deleting ------------------------------------------------------------------------

    def delete(self, group_id: str) -> CoordinatorResult[ErrorCode]:
        group = self.groups.get(group_id)
        if group is None:
            return CoordinatorResult([], ErrorCode.group_id_not_found)
        if group.members:
            return CoordinatorResult([], ErrorCode.non_empty_group)
        return CoordinatorResult(records.group_tombstones(group), ErrorCode.none)


def _metadata_changed(before: ShareGroupMember, after: ShareGroupMember) -> bool:
    def fields(member: ShareGroupMember) -> tuple[object, ...]:
        return (member.rack_id, member.client_id, member.client_host, member.subscribed_topic_names)

    return fields(before) != fields(after)
