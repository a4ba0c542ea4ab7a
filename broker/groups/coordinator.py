"""The group coordinator of the classic protocol: every group this broker coordinates.

All state lives on the event loop. Requests that must wait for the rest of the group
(JoinGroup until the rebalance completes, SyncGroup until the leader's assignment)
park on futures; timers complete rebalances and expire silent members.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import ErrorCode
from brook.storage.errors import KafkaStorageError

from .group import (
    CommittedOffset,
    Group,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    new_member_id,
)

if TYPE_CHECKING:
    from .offsets_store import OffsetsStore

log = logging.getLogger("brook.groups")

NO_GENERATION = -1


class GroupCoordinator:
    def __init__(self, config: Any, store: OffsetsStore, clock: Callable[[], int]) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.groups: dict[str, Group] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    # --- loading --------------------------------------------------------------------

    def load(self) -> None:
        """Rebuild groups and committed offsets from `__consumer_offsets`."""
        now = self.clock()
        for group_id, metadata, offsets in self.store.load():
            group = Group(group_id, now)
            group.offsets = offsets
            if metadata is not None:
                self.store.restore_group(group, metadata)
                for member in group.members.values():
                    member.is_new = False
                    self._schedule_session_expiry(group, member)
            self.groups[group_id] = group
        if self.groups:
            log.info("Loaded %d consumer group(s) from __consumer_offsets", len(self.groups))

    # --- JoinGroup ------------------------------------------------------------------

    def join(self, request: JoinRequest) -> JoinResult | Awaitable[JoinResult]:
        group_id, member_id = request.group_id, request.member_id
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id.value, member_id=member_id)
        if not (
            self.config["group.min.session.timeout.ms"]
            <= request.session_timeout_ms
            <= self.config["group.max.session.timeout.ms"]
        ):
            return JoinResult(ErrorCode.invalid_session_timeout.value, member_id=member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.unknown_member_id.value, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, self.clock())
        if not self._accepts_joining_member(group, member_id):
            group.pending_members.discard(member_id)
            return JoinResult(ErrorCode.group_max_size_reached.value)
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available.value, member_id=member_id)
        if not group.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol.value, member_id=member_id)
        if not member_id:
            return self._join_new_member(group, request)
        if member_id in group.pending_members:
            member = request.new_member(member_id)
            return self._add_and_rebalance(group, member, f"{member_id} joined")
        return self._join_known_member(group, request)

    def _accepts_joining_member(self, group: Group, member_id: str) -> bool:
        """Kafka's group.max.size rule. While the group rebalances it counts the members
        that have rejoined, so that members rejoining last are the ones left out when the
        limit was lowered; otherwise it counts the members."""
        max_size = self.config["group.max.size"]
        member = group.members.get(member_id)
        if group.is_(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_(GroupState.PREPARING_REBALANCE):
            awaiting = sum(1 for m in group.members.values() if m.join_waiter is not None)
            return (member is not None and member.join_waiter is not None) or awaiting < max_size
        return member is not None or len(group.members) < max_size

    def _join_new_member(
        self, group: Group, request: JoinRequest
    ) -> JoinResult | Awaitable[JoinResult]:
        member_id = new_member_id(request.client_id)
        instance_id = request.instance_id
        if instance_id is not None and instance_id in group.static_members:
            return self._rejoin_static_member(group, request, member_id)
        if instance_id is None and request.require_known_member_id:
            # KIP-394: the member must come back with this id, so that a client that
            # times out on its first join does not leave a ghost member behind.
            group.pending_members.add(member_id)
            self.loop.call_later(
                request.session_timeout_ms / 1000, self._expire_pending, group, member_id
            )
            return JoinResult(ErrorCode.member_id_required.value, member_id=member_id)
        member = request.new_member(member_id)
        return self._add_and_rebalance(group, member, f"{member_id} joined")

    def _rejoin_static_member(
        self, group: Group, request: JoinRequest, member_id: str
    ) -> JoinResult | Awaitable[JoinResult]:
        instance_id = request.instance_id
        assert instance_id is not None
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        previous_leader = group.leader_id
        # The old incarnation may still wait on the group: it is fenced at once.
        if old.join_waiter is not None and not old.join_waiter.done():
            old.join_waiter.set_result(
                JoinResult(ErrorCode.fenced_instance_id.value, member_id=old_id)
            )
        old.join_waiter = None
        if old.sync_waiter is not None and not old.sync_waiter.done():
            old.sync_waiter.set_result((ErrorCode.fenced_instance_id.value, b""))
        old.sync_waiter = None
        member = group.replace_static_member(instance_id, member_id)
        request.update(member)
        self._schedule_session_expiry(group, member)
        log.info(
            "Static member %s of group %s rejoined as %s", instance_id, group.group_id, member_id
        )
        if group.is_(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                # KIP-345: a restart that does not change the group's protocol keeps the
                # generation and the assignment; only the new member id is recorded.
                self.store.write_group(group)
                is_leader = member_id == group.leader_id
                if request.supports_skip_assignment:
                    # KIP-814: the leader gets the members (to know the group) but is told
                    # not to assign again.
                    return self._join_result(
                        group, member, include_members=is_leader, skip_assignment=is_leader
                    )
                # Older clients cannot skip the assignment, so they are not told they
                # lead: the old leader id is returned and the client only syncs.
                result = self._join_result(group, member, include_members=False)
                result.leader_id = previous_leader or ""
                return result
            waiter = self._park_join(member)
            self._prepare_rebalance(group, f"static member {instance_id} changed protocols")
            return waiter
        waiter = self._park_join(member)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: start over.
            self._prepare_rebalance(group, f"static member {instance_id} rejoined")
        else:
            self._maybe_complete_join(group)
        return waiter

    def _join_known_member(
        self, group: Group, request: JoinRequest
    ) -> JoinResult | Awaitable[JoinResult]:
        member_id, protocols = request.member_id, request.protocols
        error = self._validate_member(group, member_id, request.instance_id)
        if error:
            return JoinResult(error, member_id=member_id)
        member = group.members[member_id]
        is_leader = member_id == group.leader_id
        if group.is_(GroupState.COMPLETING_REBALANCE) and member.matches(protocols):
            # The member missed its join response: answer with the current generation.
            return self._join_result(group, member, include_members=is_leader)
        if group.is_(GroupState.STABLE) and not is_leader and member.matches(protocols):
            # A follower rejoining without change just learns the current generation.
            return self._join_result(group, member, include_members=False)
        # New metadata, or the leader rejoining (it may have seen topics change that its
        # subscription does not show): rebalance.
        request.update(member)
        waiter = self._park_join(member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, f"{member_id} rejoined")
        return waiter

    def _add_and_rebalance(
        self, group: Group, member: Member, reason: str
    ) -> Awaitable[JoinResult]:
        group.add(member)
        waiter = self._park_join(member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            if group.initial_delay_deadline is not None:
                self._extend_initial_delay(group)
            self._maybe_complete_join(group)
        else:
            self._prepare_rebalance(group, reason)
        return waiter

    def _park_join(self, member: Member) -> asyncio.Future[JoinResult]:
        if member.join_waiter is not None and not member.join_waiter.done():
            # A duplicate join replaces the earlier one, which gets a retriable error.
            member.join_waiter.set_result(
                JoinResult(ErrorCode.rebalance_in_progress.value, member_id=member.member_id)
            )
        member.join_waiter = self.loop.create_future()
        return member.join_waiter

    def _join_result(
        self, group: Group, member: Member, include_members: bool, skip_assignment: bool = False
    ) -> JoinResult:
        members = []
        if include_members and group.protocol_name is not None:
            members = [
                (m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            ]
        return JoinResult(
            error=0,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            member_id=member.member_id,
            members=members,
            skip_assignment=skip_assignment,
        )

    # --- rebalancing ------------------------------------------------------------------

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._fail_sync_waiters(group, ErrorCode.rebalance_in_progress.value)
        delay_ms = self.config["group.initial.rebalance.delay.ms"]
        was_empty = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, self.clock())
        log.info(
            "Preparing to rebalance group %s in generation %d: %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        if was_empty and delay_ms > 0:
            # Kafka waits a little for more members before the first generation, so
            # that a group starting up does not rebalance once per member.
            group.initial_delay_deadline = (
                self.loop.time() + group.max_rebalance_timeout_ms() / 1000
            )
            group.rebalance_timer = self.loop.call_later(
                delay_ms / 1000, self._initial_delay_over, group
            )
            return
        group.rebalance_timer = self.loop.call_later(
            group.max_rebalance_timeout_ms() / 1000, self._complete_join, group
        )
        self._maybe_complete_join(group)

    def _extend_initial_delay(self, group: Group) -> None:
        assert group.initial_delay_deadline is not None
        delay_s = self.config["group.initial.rebalance.delay.ms"] / 1000
        remaining = group.initial_delay_deadline - self.loop.time()
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
        group.rebalance_timer = self.loop.call_later(
            max(min(delay_s, remaining), 0), self._initial_delay_over, group
        )

    def _initial_delay_over(self, group: Group) -> None:
        group.initial_delay_deadline = None
        group.rebalance_timer = self.loop.call_later(
            group.max_rebalance_timeout_ms() / 1000, self._complete_join, group
        )
        self._maybe_complete_join(group)

    def _maybe_complete_join(self, group: Group) -> None:
        if (
            group.is_(GroupState.PREPARING_REBALANCE)
            and group.initial_delay_deadline is None
            and group.all_rejoined()
            and not group.pending_members
        ):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()
            group.rebalance_timer = None
        group.initial_delay_deadline = None
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            log.info(
                "Removing member %s of group %s: it did not rejoin in time",
                member.member_id,
                group.group_id,
            )
            group.remove(member.member_id)
        group.pending_members.clear()
        group.generation_id += 1
        if group.is_empty:
            # The protocol type stays, so an empty consumer group still lists as one.
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, self.clock())
            self.store.write_group(group)
            log.info("Group %s is empty in generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, self.clock())
        log.info(
            "Group %s formed generation %d with %d member(s), protocol %s",
            group.group_id,
            group.generation_id,
            len(group.members),
            group.protocol_name,
        )
        for member in group.members.values():
            waiter, member.join_waiter = member.join_waiter, None
            member.is_new = False
            self._schedule_session_expiry(group, member)
            if waiter is not None and not waiter.done():
                waiter.set_result(
                    self._join_result(
                        group, member, include_members=member.member_id == group.leader_id
                    )
                )

    def _fail_sync_waiters(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None and not member.sync_waiter.done():
                member.sync_waiter.set_result((error, b""))
            member.sync_waiter = None

    # --- SyncGroup ------------------------------------------------------------------

    def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> tuple[int, bytes] | Awaitable[tuple[int, bytes]]:
        group = self.groups.get(group_id)
        error = self._check_member(group, member_id, instance_id, generation_id)
        if error:
            return error, b""
        assert group is not None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol.value, b""
        member = group.members[member_id]
        self._schedule_session_expiry(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress.value, b""
        if group.is_(GroupState.STABLE):
            return 0, member.assignment
        member.sync_waiter = self.loop.create_future()
        waiter = member.sync_waiter
        if member_id == group.leader_id:
            for each in group.members.values():
                each.assignment = assignments.get(each.member_id, b"")
            group.transition(GroupState.STABLE, self.clock())
            self.store.write_group(group)
            log.info("Group %s is stable in generation %d", group.group_id, group.generation_id)
            for each in group.members.values():
                if each.sync_waiter is not None and not each.sync_waiter.done():
                    each.sync_waiter.set_result((0, each.assignment))
                each.sync_waiter = None
        return waiter

    # --- Heartbeat and LeaveGroup ------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> int:
        group = self.groups.get(group_id)
        error = self._check_member(group, member_id, instance_id, generation_id)
        if error:
            return error
        assert group is not None
        self._schedule_session_expiry(group, group.members[member_id])
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress.value
        return 0

    def leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        """Remove members; returns a group-level error and one error per member."""
        group = self.groups.get(group_id)
        results = []
        if group is None or group.is_(GroupState.DEAD):
            # Kafka names every member unknown and leaves the response's own error
            # empty (before v3 the one member's error becomes the response's).
            return 0, [
                (member_id, instance_id, ErrorCode.unknown_member_id.value)
                for member_id, instance_id in members
            ]
        left = []
        for member_id, instance_id in members:
            if not member_id and instance_id is not None:
                # An admin removes a static member by its instance id alone.
                known = group.static_members.get(instance_id)
                error = 0 if known is not None else ErrorCode.unknown_member_id.value
                target = known
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                results.append((member_id, instance_id, 0))
                self._maybe_complete_join(group)  # the join may have waited for it
                continue
            else:
                error = self._validate_member(group, member_id, instance_id)
                target = member_id
            # The response names the member as the request did.
            results.append((member_id, instance_id, error))
            if not error and target is not None:
                left.append(target)
        for member_id in left:
            self._remove_member(group, member_id, "left the group")
        return 0, results

    def _check_member(
        self, group: Group | None, member_id: str, instance_id: str | None, generation_id: int
    ) -> int:
        """Kafka's checks of a member's Heartbeat, SyncGroup and OffsetCommit."""
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.unknown_member_id.value
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation.value
        return 0

    @staticmethod
    def _validate_member(group: Group, member_id: str, instance_id: str | None) -> int:
        """A static member's instance id must map to its member id: an instance id the
        group does not know is an unknown member, one mapped to another member id is a
        fenced (older) incarnation."""
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.unknown_member_id.value
            if known != member_id:
                return ErrorCode.fenced_instance_id.value
        if member_id not in group.members:
            return ErrorCode.unknown_member_id.value
        return 0

    def _remove_member(self, group: Group, member_id: str, reason: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        log.info("Member %s of group %s %s", member_id, group.group_id, reason)
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(
                JoinResult(ErrorCode.unknown_member_id.value, member_id=member_id)
            )
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member_id} {reason}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # --- session timeouts -------------------------------------------------------------

    def _schedule_session_expiry(self, group: Group, member: Member) -> None:
        member.cancel_timer()
        member.session_timer = self.loop.call_later(
            member.session_timeout_ms / 1000, self._session_expired, group, member
        )

    def _session_expired(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        if member.join_waiter is not None or member.sync_waiter is not None:
            # A member waiting on the group is alive; its wait has its own bound.
            self._schedule_session_expiry(group, member)
            return
        self._remove_member(
            group,
            member.member_id,
            f"expired after its session timeout of {member.session_timeout_ms} ms",
        )

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group)

    # --- offsets ----------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[tuple[str, int], CommittedOffset],
        api_version: int = 9,
    ) -> int:
        """The group-level check of an OffsetCommit; 0 means the offsets were stored."""
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a group that does not exist. Kafka says so from v9 on; older
                # clients expect ILLEGAL_GENERATION and rejoin.
                if api_version >= 9:
                    return ErrorCode.group_id_not_found.value
                return ErrorCode.illegal_generation.value
            # Generation -1: an admin or a consumer that assigns its own partitions
            # commits into a "simple" group, created here.
            group = self.groups[group_id] = Group(group_id, self.clock())
        error = self._validate_commit(group, generation_id, member_id, instance_id)
        if error:
            return error
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_session_expiry(group, member)
        if offsets:
            try:
                self.store.write_offsets(group, offsets)
            except KafkaStorageError as exc:
                # Kafka's mapping of a failed offsets append: the client looks for the
                # coordinator again rather than retrying here.
                log.warning("Offset commit of group %s not stored: %s", group_id, exc.message)
                return ErrorCode.not_coordinator.value
            group.offsets.update(offsets)
        return 0

    def _validate_commit(
        self, group: Group, generation_id: int, member_id: str, instance_id: str | None
    ) -> int:
        """Kafka's order: the member and its generation first, then the group's state."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available.value
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return 0
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._check_member(group, member_id, instance_id, generation_id)
            if error:
                return error
        elif not group.is_(GroupState.EMPTY):
            # A simple commit into a group that has members.
            return ErrorCode.unknown_member_id.value
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # A valid member that has its join response but no assignment yet.
            return ErrorCode.rebalance_in_progress.value
        return 0

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset | None]:
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {key: stored.get(key) for key in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[tuple[str, int]]
    ) -> tuple[int, dict[tuple[str, int], int]]:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found.value, {}
        if not group.is_(GroupState.EMPTY) and group.protocol_type != "consumer":
            # Kafka can tell which topics a group uses only for the consumer protocol.
            return ErrorCode.non_empty_group.value, {}
        subscribed = self.subscribed_topics(group)
        # Until its first generation forms, a group's subscriptions are unknown, and
        # Kafka (GroupMetadata.isSubscribedToTopic) then takes every topic as subscribed.
        unknown = group.generation_id == 0
        errors = {}
        deletable = []
        for key in partitions:
            if not group.is_(GroupState.EMPTY) and (unknown or key[0] in subscribed):
                errors[key] = ErrorCode.group_subscribed_to_topic.value
            else:
                errors[key] = 0
                if key in group.offsets:
                    deletable.append(key)
        if deletable:
            self.store.delete_offsets(group, deletable)
            for key in deletable:
                group.offsets.pop(key, None)
        return 0, errors

    def subscribed_topics(self, group: Group) -> set[str]:
        """Topics the group's consumers subscribe to (consumer protocol only)."""
        from .consumer_protocol import subscribed_topics

        if group.protocol_type != "consumer" or group.protocol_name is None:
            return set()
        topics: set[str] = set()
        for member in group.members.values():
            topics |= subscribed_topics(member.metadata_for(group.protocol_name))
        return topics

    # --- admin ------------------------------------------------------------------------

    def delete_group(self, group_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found.value
        if not group.is_(GroupState.EMPTY):
            return ErrorCode.non_empty_group.value
        self.store.delete_group(group)
        group.transition(GroupState.DEAD, self.clock())
        del self.groups[group_id]
        log.info("Deleted group %s", group_id)
        return 0

    def expire_offsets(self) -> int:
        """Drop committed offsets of empty groups older than offsets.retention.minutes, and
        remove empty groups left without offsets (with a tombstone for their metadata, so
        they stay gone after a restart), as Kafka's cleanup does."""
        retention_ms = self.config["offsets.retention.minutes"] * 60_000
        now = self.clock()
        expired_total = 0
        for group in list(self.groups.values()):
            if not group.is_(GroupState.EMPTY):
                continue
            expired = [
                key
                for key, offset in group.offsets.items()
                if now - max(offset.commit_timestamp, group.state_timestamp) >= retention_ms
            ]
            if expired:
                self.store.delete_offsets(group, expired)
                for key in expired:
                    del group.offsets[key]
                expired_total += len(expired)
                log.info("Expired %d committed offset(s) of group %s", len(expired), group.group_id)
            if not group.offsets:
                if group.generation_id > 0:
                    self.store.delete_group(group)
                group.transition(GroupState.DEAD, now)
                del self.groups[group.group_id]
                log.info("Removed group %s: empty and without committed offsets", group.group_id)
        return expired_total
