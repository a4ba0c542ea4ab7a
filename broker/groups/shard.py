"""The groups of one `__consumer_offsets` partition: Kafka's classic group protocol.

A coordinator shard (broker/coordinator/shard.py). Every request is an operation that
returns the records to write and the response; the runtime answers when the records are
committed. Offset commits and deletions change the shard's state by replay of their
records, so a write the partition refuses leaves it as it was. A classic group's
membership lives here and its GroupMetadata record is its durable copy: a rebalance
changes the members at once, and what waits on the record (SyncGroup's assignment, a
static member's new id) completes when it is written, or is undone when it fails, as
Kafka's GroupMetadataManager does.

Requests that must wait for the rest of the group (JoinGroup until the rebalance
completes, SyncGroup until the leader's assignment) park on futures; timers of the
shard complete rebalances, expire silent members and expire offsets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from brook.coordinator_state.consumer_offsets import ConsumerOffsetsReplay
from brook.coordinator_state.offsets import CommittedOffset
from brook.protocol import consumer_group_records as cgr
from brook.protocol import coordinator_records as cr
from brook.protocol import share_group_records as sgr
from brook.protocol.errors import ErrorCode, KafkaError
from brook.storage.clock import Clock

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.partition_writer import TopicPartition
from ..coordinator.records import CoordinatorRecord, TransactionalProducer
from ..coordinator.shard import CoordinatorResult, WriteCallback
from ..coordinator.write_errors import coordinator_error
from . import records
from .classic_members import ClassicMembers
from .consumer_group import ConsumerGroup
from .consumer_groups import ConsumerGroups, HeartbeatRequest, HeartbeatResponse, TopicImage
from .consumer_protocol import subscribed_topics
from .consumer_records import replay as replay_consumer_group
from .group import (
    Group,
    GroupState,
    JoinRequest,
    JoinResult,
    Member,
    SyncRequest,
    new_member_id,
)
from .group_configs import GroupConfigs
from .share_group import ShareGroup
from .share_groups import ShareGroups, ShareHeartbeatRequest
from .share_records import replay as replay_share_group

log = logging.getLogger("brook.groups")

T = TypeVar("T")
OffsetKey = tuple[str, int]
SyncAnswer = tuple[ErrorCode, bytes]

EXPIRE_OFFSETS_TIMER = "expire-group-metadata"


def _session_timer(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def _join_timer(group_id: str) -> str:
    return f"join-{group_id}"


def _pending_member_timer(group_id: str, member_id: str) -> str:
    return f"pending-member-{group_id}-{member_id}"


@dataclass(slots=True)
class RebalanceStats:
    """Kafka's group-coordinator-metrics group-rebalance-count (rebalances begun) and
    group-completed-rebalance-count (generations formed), for /metrics."""

    rebalances: int = 0
    completed_rebalances: int = 0
    # Kafka's consumer-group-rebalance-count: new epochs of consumer groups (KIP-848).
    consumer_rebalances: int = 0


class GroupCoordinatorShard:
    def __init__(
        self,
        tp: TopicPartition,
        timer: CoordinatorTimer,
        config: Any,
        clock: Clock,
        stats: RebalanceStats | None = None,
        topics: TopicImage | None = None,
        group_configs: GroupConfigs | None = None,
    ):
        self.tp = tp
        # Shared by the coordinator's shards: they come and go with leadership.
        self.stats = stats if stats is not None else RebalanceStats()
        self.timer = timer
        self.config = config
        self.clock = clock
        # Classic groups (and "simple" ones: offsets without members), and Kafka 4's
        # consumer groups: a group id is in one of the two at most.
        self.groups: dict[str, Group] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.consumer = ConsumerGroups(
            self.consumer_groups,
            self.groups,
            timer,
            config,
            clock,
            topics,
            group_configs,
            self.stats,
        )
        self.consumer.on_downgrade = self._downgraded
        # Share groups (KIP-932): a group id is a share group's or one of the others'.
        self.share_groups: dict[str, ShareGroup] = {}
        self.share = ShareGroups(
            self.share_groups,
            timer,
            config,
            topics,
            group_configs,
            lambda group_id: group_id in self.groups or group_id in self.consumer_groups,
        )
        self.classic_members = ClassicMembers(self.consumer)
        # Offsets written inside transactions wait there for their marker.
        self._replay = ConsumerOffsetsReplay(self)
        # Group records that the running operation writes, and what waits on them.
        self._records: list[CoordinatorRecord] = []
        self._callbacks: list[WriteCallback] = []

    # --- replay (CoordinatorShard) ----------------------------------------------------

    def replay(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        self._replay.replay(offset, producer_id, key, value)

    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, result: cr.ControlRecordType
    ) -> None:
        self._replay.replay_end_transaction_marker(
            producer_id, result is cr.ControlRecordType.COMMIT
        )

    # --- what replay changes (ConsumerOffsetsState) -------------------------------------

    def offset_changed(
        self, key: cr.OffsetCommitKey, committed: CommittedOffset | None, offset: int
    ) -> None:
        consumer_group = self.consumer_groups.get(key.group)
        if consumer_group is not None:
            if committed is None:
                consumer_group.offsets.pop((key.topic, key.partition), None)
            else:
                consumer_group.offsets[(key.topic, key.partition)] = committed
            return
        group = self.groups.get(key.group)
        if committed is None:
            if group is not None:
                group.offsets.pop((key.topic, key.partition), None)
            return
        if group is None:
            # A "simple" group: offsets without members (an admin, or a consumer that
            # assigns its own partitions).
            group = self.groups[key.group] = Group(key.group, self.clock())
        group.offsets[(key.topic, key.partition)] = committed

    def group_changed(
        self, group_id: str, value: cr.GroupMetadataValue | None, offset: int
    ) -> None:
        old = self.groups.get(group_id)
        if value is None:
            if old is None:
                return
            old.transition(GroupState.DEAD, self.clock())
            del self.groups[group_id]
            if old.offsets:
                # Offsets outlive the group's metadata until they are deleted too.
                self.groups[group_id] = Group(group_id, self.clock())
                self.groups[group_id].offsets = old.offsets
            return
        group = Group(group_id, self.clock())
        if old is not None:
            group.offsets = old.offsets
        records.restore_group(group, value, self.clock())
        self.groups[group_id] = group

    def consumer_group_changed(
        self, key: cgr.ConsumerGroupKey, value: cgr.ConsumerGroupValue | None, offset: int
    ) -> None:
        replay_consumer_group(self.consumer_groups, self.groups, key, value, self.clock())

    def share_group_changed(
        self, key: sgr.ShareGroupKey, value: sgr.ShareGroupValue | None, offset: int
    ) -> None:
        replay_share_group(self.share_groups, key, value)

    def skipped(self, offset: int, key: cr.Key, value_version: int | None) -> None:
        if value_version is None:
            return  # other record types (KIP-848 groups, newer Kafkas) are not this shard's
        assert isinstance(key, cr.OffsetCommitKey | cr.GroupMetadataKey)
        log.warning(
            "%s: skipping the record of group %s at offset %d: value version %d of %s"
            " is one this broker does not know",
            self.tp,
            key.group,
            offset,
            value_version,
            type(key).__name__,
        )

    def on_loaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_session_expiry(group, member)
        self.consumer.on_loaded()
        self.share.on_loaded()
        self._schedule_offsets_expiry()
        if self.groups or self.consumer_groups:
            log.info(
                "%s: loaded %d classic and %d consumer group(s)",
                self.tp,
                len(self.groups),
                len(self.consumer_groups),
            )

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.join_waiter is not None and not member.join_waiter.done():
                    member.join_waiter.set_result(
                        JoinResult(ErrorCode.not_coordinator, member_id=member.member_id)
                    )
                if member.sync_waiter is not None and not member.sync_waiter.done():
                    member.sync_waiter.set_result((ErrorCode.not_coordinator, b""))
            group.transition(GroupState.DEAD, self.clock())
        self.groups.clear()
        for consumer_group in self.consumer_groups.values():
            consumer_group.dead = True
        self.consumer_groups.clear()

    # --- operations' records ----------------------------------------------------------

    def _write_group(
        self, group: Group, on_written: WriteCallback | None = None, **kwargs: Any
    ) -> None:
        self._records.append(records.group_metadata_record(group, **kwargs))
        if on_written is not None:
            self._callbacks.append(on_written)

    def _result(self, response: T) -> CoordinatorResult[T]:
        """The response with the group records the operation wrote on its way."""
        written, callbacks = self._records, self._callbacks
        self._records, self._callbacks = [], []

        def on_written(error: KafkaError | None) -> None:
            for callback in callbacks:
                callback(error)

        return CoordinatorResult(written, response, replay_records=False, on_written=on_written)

    def _timer_operation(self, action: Callable[[], None]) -> Callable[[], CoordinatorResult[None]]:
        def operation() -> CoordinatorResult[None]:
            action()
            return self._result(None)

        return operation

    # --- JoinGroup ------------------------------------------------------------------

    def join(self, request: JoinRequest) -> CoordinatorResult[Any]:
        """Answers a JoinResult, or a future of one when the member waits for the group."""
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is not None and not consumer_group.is_empty:
            if not self._session_timeout_ok(request):
                return CoordinatorResult(
                    [], JoinResult(ErrorCode.invalid_session_timeout, member_id=request.member_id)
                )
            # A classic member inside a consumer group (KIP-848).
            return self.classic_members.join(consumer_group, request)
        return self._result(self._join(request))

    def _session_timeout_ok(self, request: JoinRequest) -> bool:
        return bool(
            self.config["group.min.session.timeout.ms"]
            <= request.session_timeout_ms
            <= self.config["group.max.session.timeout.ms"]
        )

    def _join(self, request: JoinRequest) -> JoinResult | asyncio.Future[JoinResult]:
        group_id, member_id = request.group_id, request.member_id
        if not self._session_timeout_ok(request):
            return JoinResult(ErrorCode.invalid_session_timeout, member_id=member_id)
        if group_id in self.share_groups:  # Kafka's answer to a classic join of a share group
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:  # empty: members of a consumer group go elsewhere
            self._classic_from_empty_consumer_group(consumer_group)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.unknown_member_id, member_id=member_id)
            group = self.groups[group_id] = Group(group_id, self.clock())
        if not self._accepts_joining_member(group, member_id):
            group.pending_members.discard(member_id)
            return JoinResult(ErrorCode.group_max_size_reached)
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, member_id=member_id)
        if not group.supports(request.protocol_type, request.protocols):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id=member_id)
        if not member_id:
            return self._join_new_member(group, request)
        if member_id in group.pending_members:
            self.timer.cancel(_pending_member_timer(group_id, member_id))
            member = request.new_member(member_id)
            return self._add_and_rebalance(group, member, f"{member_id} joined")
        return self._join_known_member(group, request)

    def _downgraded(self, consumer_group: ConsumerGroup, value: cr.GroupMetadataValue) -> None:
        """A consumer group whose last consumer-protocol member left becomes the classic
        group `value` describes, at once, and rebalances so that its members join it."""
        group_id = consumer_group.group_id
        del self.consumer_groups[group_id]
        consumer_group.dead = True
        group = Group(group_id, self.clock())
        group.offsets = consumer_group.offsets
        records.restore_group(group, value, self.clock())
        self.groups[group_id] = group
        for member in group.members.values():
            self._schedule_session_expiry(group, member)
        self._prepare_rebalance(
            group, "it became a classic group (its last consumer-protocol member left)"
        )

    def _classic_from_empty_consumer_group(self, consumer_group: ConsumerGroup) -> None:
        """A classic member joining an empty consumer group makes it a classic group, as
        in Kafka: the consumer group's records are deleted, its offsets stay."""
        group_id = consumer_group.group_id
        self._records.extend(self.consumer.delete(consumer_group))
        del self.consumer_groups[group_id]
        group = self.groups[group_id] = Group(group_id, self.clock())
        group.offsets = consumer_group.offsets
        log.info("Empty consumer group %s becomes a classic group", group_id)

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
    ) -> JoinResult | asyncio.Future[JoinResult]:
        member_id = new_member_id(request.client_id)
        instance_id = request.instance_id
        if instance_id is not None and instance_id in group.static_members:
            return self._rejoin_static_member(group, request, member_id)
        if instance_id is None and request.require_known_member_id:
            # KIP-394: the member must come back with this id, so that a client that
            # times out on its first join does not leave a ghost member behind.
            group.pending_members.add(member_id)
            self.timer.schedule(
                _pending_member_timer(group.group_id, member_id),
                request.session_timeout_ms,
                self._timer_operation(lambda: self._expire_pending(group, member_id)),
            )
            return JoinResult(ErrorCode.member_id_required, member_id=member_id)
        member = request.new_member(member_id)
        return self._add_and_rebalance(group, member, f"{member_id} joined")

    def _rejoin_static_member(
        self, group: Group, request: JoinRequest, member_id: str
    ) -> JoinResult | asyncio.Future[JoinResult]:
        instance_id = request.instance_id
        assert instance_id is not None
        old_id = group.static_members[instance_id]
        old = group.members[old_id]
        previous_leader = group.leader_id
        # The old incarnation may still wait on the group: it is fenced at once.
        if old.join_waiter is not None and not old.join_waiter.done():
            old.join_waiter.set_result(JoinResult(ErrorCode.fenced_instance_id, member_id=old_id))
        old.join_waiter = None
        if old.sync_waiter is not None and not old.sync_waiter.done():
            old.sync_waiter.set_result((ErrorCode.fenced_instance_id, b""))
        old.sync_waiter = None
        old_settings = (old.rebalance_timeout_ms, old.session_timeout_ms, old.protocols)
        self.timer.cancel(_session_timer(group.group_id, old_id))
        member = group.replace_static_member(instance_id, member_id)
        request.update(member)
        self._schedule_session_expiry(group, member)
        log.info(
            "Static member %s of group %s rejoined as %s", instance_id, group.group_id, member_id
        )
        if group.is_(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                return self._keep_static_member(
                    group, request, member, old_id, old_settings, previous_leader
                )
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

    def _keep_static_member(
        self,
        group: Group,
        request: JoinRequest,
        member: Member,
        old_id: str,
        old_settings: tuple[int, int, list[tuple[str, bytes]]],
        previous_leader: str | None,
    ) -> asyncio.Future[JoinResult]:
        """KIP-345: a restart that does not change the group's protocol keeps the
        generation and the assignment; only the new member id is recorded, and the
        member is answered once it is. If the record cannot be written, the old member
        id comes back and the new one is refused."""
        new_id = member.member_id
        instance_id = member.group_instance_id
        assert instance_id is not None
        generation = group.generation_id
        is_leader = new_id == group.leader_id
        if request.supports_skip_assignment:
            # KIP-814: the leader gets the members (to know the group) but is told not
            # to assign again.
            answer = self._join_result(
                group, member, include_members=is_leader, skip_assignment=is_leader
            )
        else:
            # Older clients cannot skip the assignment, so they are not told they lead:
            # the old leader id is returned and the client only syncs.
            answer = self._join_result(group, member, include_members=False)
            answer.leader_id = previous_leader or ""
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()

        def on_written(error: KafkaError | None) -> None:
            if error is None:
                if not waiter.done():
                    waiter.set_result(answer)
                return
            code = coordinator_error(error)
            log.warning(
                "Static member %s of group %s keeps its old id %s: its new id was not stored (%s)",
                instance_id,
                group.group_id,
                old_id,
                code.name.upper(),
            )
            if (
                group.static_members.get(instance_id) == new_id
                and group.generation_id == generation
            ):
                self.timer.cancel(_session_timer(group.group_id, new_id))
                restored = group.replace_static_member(instance_id, old_id)
                (
                    restored.rebalance_timeout_ms,
                    restored.session_timeout_ms,
                    restored.protocols,
                ) = old_settings
                self._schedule_session_expiry(group, restored)
            if not waiter.done():
                waiter.set_result(JoinResult(code, member_id=new_id))

        self._write_group(group, on_written)
        return waiter

    def _join_known_member(
        self, group: Group, request: JoinRequest
    ) -> JoinResult | asyncio.Future[JoinResult]:
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
    ) -> asyncio.Future[JoinResult]:
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
                JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id)
            )
        member.join_waiter = asyncio.get_running_loop().create_future()
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
            error=ErrorCode.none,
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
            self._fail_sync_waiters(group, ErrorCode.rebalance_in_progress)
        delay_ms = self.config["group.initial.rebalance.delay.ms"]
        was_empty = group.is_(GroupState.EMPTY)
        group.transition(GroupState.PREPARING_REBALANCE, self.clock())
        self.stats.rebalances += 1
        log.info(
            "Preparing to rebalance group %s in generation %d: %s",
            group.group_id,
            group.generation_id,
            reason,
        )
        if was_empty and delay_ms > 0:
            # Kafka waits a little for more members before the first generation, so
            # that a group starting up does not rebalance once per member.
            group.initial_delay_deadline = self.clock() + group.max_rebalance_timeout_ms()
            self._schedule_join(group, delay_ms, self._initial_delay_over)
            return
        self._schedule_join(group, group.max_rebalance_timeout_ms(), self._complete_join)
        self._maybe_complete_join(group)

    def _schedule_join(self, group: Group, delay_ms: int, then: Callable[[Group], None]) -> None:
        self.timer.schedule(
            _join_timer(group.group_id), delay_ms, self._timer_operation(lambda: then(group))
        )

    def _extend_initial_delay(self, group: Group) -> None:
        assert group.initial_delay_deadline is not None
        delay_ms = self.config["group.initial.rebalance.delay.ms"]
        remaining = group.initial_delay_deadline - self.clock()
        self._schedule_join(group, max(min(delay_ms, remaining), 0), self._initial_delay_over)

    def _initial_delay_over(self, group: Group) -> None:
        group.initial_delay_deadline = None
        self._schedule_join(group, group.max_rebalance_timeout_ms(), self._complete_join)
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
        if (
            not group.is_(GroupState.PREPARING_REBALANCE)
            or self.groups.get(group.group_id) is not group
        ):
            return
        self.timer.cancel(_join_timer(group.group_id))
        group.initial_delay_deadline = None
        for member in [m for m in group.members.values() if m.join_waiter is None]:
            log.info(
                "Removing member %s of group %s: it did not rejoin in time",
                member.member_id,
                group.group_id,
            )
            self._forget_member(group, member.member_id)
        for member_id in group.pending_members:
            self.timer.cancel(_pending_member_timer(group.group_id, member_id))
        group.pending_members.clear()
        group.generation_id += 1
        if group.is_empty:
            # The protocol type stays, so an empty consumer group still lists as one.
            group.protocol_name = None
            group.leader_id = None
            group.transition(GroupState.EMPTY, self.clock())
            group_id, generation = group.group_id, group.generation_id

            def on_written(error: KafkaError | None) -> None:
                if error is not None:
                    log.warning(
                        "Group %s: its empty generation %d was not stored: %s",
                        group_id,
                        generation,
                        coordinator_error(error).name.upper(),
                    )

            self._write_group(group, on_written)
            log.info("Group %s is empty in generation %d", group.group_id, group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(GroupState.COMPLETING_REBALANCE, self.clock())
        self.stats.completed_rebalances += 1
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

    def _fail_sync_waiters(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            if member.sync_waiter is not None and not member.sync_waiter.done():
                member.sync_waiter.set_result((error, b""))
            member.sync_waiter = None

    # --- SyncGroup ------------------------------------------------------------------

    def sync(self, request: SyncRequest) -> CoordinatorResult[Any]:
        """Answers (error, assignment), or a future of it while the leader assigns."""
        consumer_group = self.consumer_groups.get(request.group_id)
        if consumer_group is not None:
            return self.classic_members.sync(consumer_group, request)
        return self._result(self._sync(request))

    def _sync(self, request: SyncRequest) -> SyncAnswer | asyncio.Future[SyncAnswer]:
        group = self.groups.get(request.group_id)
        member_id = request.member_id
        error = self._check_member(group, member_id, request.instance_id, request.generation_id)
        if error:
            return error, b""
        assert group is not None
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol, b""
        member = group.members[member_id]
        self._schedule_session_expiry(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress, b""
        if group.is_(GroupState.STABLE):
            return ErrorCode.none, member.assignment
        member.sync_waiter = asyncio.get_running_loop().create_future()
        waiter = member.sync_waiter
        if member_id == group.leader_id:
            self._store_assignment(group, dict(request.assignments))
        return waiter

    def _store_assignment(self, group: Group, assignments: dict[str, bytes]) -> None:
        """Write the leader's assignment; the group becomes stable and its members get
        their assignments once it is stored. If it cannot be, they get the error and
        the group rebalances again."""
        generation = group.generation_id

        def on_written(error: KafkaError | None) -> None:
            # Members may have come or gone while the record was written: only the
            # generation it was written for takes it.
            if not (
                group.is_(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation
            ):
                return
            if error is not None:
                code = coordinator_error(error)
                self._fail_sync_waiters(group, code)
                self._prepare_rebalance(
                    group, f"its assignment could not be stored ({code.name.upper()})"
                )
                return
            for member in group.members.values():
                member.assignment = assignments.get(member.member_id, b"")
            group.transition(GroupState.STABLE, self.clock())
            log.info("Group %s is stable in generation %d", group.group_id, generation)
            for member in group.members.values():
                if member.sync_waiter is not None and not member.sync_waiter.done():
                    member.sync_waiter.set_result((ErrorCode.none, member.assignment))
                member.sync_waiter = None

        self._write_group(group, on_written, assignments=assignments)

    # --- Heartbeat and LeaveGroup ------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self.classic_members.heartbeat(
                consumer_group, member_id, instance_id, generation_id
            )
        group = self.groups.get(group_id)
        error = self._check_member(group, member_id, instance_id, generation_id)
        if error:
            return error
        assert group is not None
        self._schedule_session_expiry(group, group.members[member_id])
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> CoordinatorResult[tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]]:
        """Remove members; answers a group-level error and one error per member."""
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            return self.classic_members.leave(consumer_group, members)
        return self._result(self._leave(group_id, members))

    def _leave(
        self, group_id: str, members: Iterable[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        group = self.groups.get(group_id)
        results = []
        if group is None or group.is_(GroupState.DEAD):
            # Kafka names every member unknown and leaves the response's own error
            # empty (before v3 the one member's error becomes the response's).
            return ErrorCode.none, [
                (member_id, instance_id, ErrorCode.unknown_member_id)
                for member_id, instance_id in members
            ]
        left = []
        for member_id, instance_id in members:
            if not member_id and instance_id is not None:
                # An admin removes a static member by its instance id alone.
                known = group.static_members.get(instance_id)
                error = ErrorCode.none if known is not None else ErrorCode.unknown_member_id
                target = known
            elif member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self.timer.cancel(_pending_member_timer(group_id, member_id))
                results.append((member_id, instance_id, ErrorCode.none))
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
        return ErrorCode.none, results

    def _check_member(
        self, group: Group | None, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Kafka's checks of a member's Heartbeat, SyncGroup and OffsetCommit."""
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.unknown_member_id
        error = self._validate_member(group, member_id, instance_id)
        if error:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return ErrorCode.none

    @staticmethod
    def _validate_member(group: Group, member_id: str, instance_id: str | None) -> ErrorCode:
        """A static member's instance id must map to its member id: an instance id the
        group does not know is an unknown member, one mapped to another member id is a
        fenced (older) incarnation."""
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.unknown_member_id
            if known != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    def _forget_member(self, group: Group, member_id: str) -> Member | None:
        self.timer.cancel(_session_timer(group.group_id, member_id))
        return group.remove(member_id)

    def _remove_member(self, group: Group, member_id: str, reason: str) -> None:
        member = self._forget_member(group, member_id)
        if member is None:
            return
        log.info("Member %s of group %s %s", member_id, group.group_id, reason)
        if member.join_waiter is not None and not member.join_waiter.done():
            member.join_waiter.set_result(
                JoinResult(ErrorCode.unknown_member_id, member_id=member_id)
            )
        if group.is_(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member_id} {reason}")
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._maybe_complete_join(group)

    # --- session timeouts -------------------------------------------------------------

    def _schedule_session_expiry(self, group: Group, member: Member) -> None:
        self.timer.schedule(
            _session_timer(group.group_id, member.member_id),
            member.session_timeout_ms,
            self._timer_operation(lambda: self._session_expired(group, member)),
        )

    def _session_expired(self, group: Group, member: Member) -> None:
        if self.groups.get(group.group_id) is not group:
            return
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
        offsets: dict[OffsetKey, CommittedOffset],
        api_version: int = 9,
    ) -> CoordinatorResult[ErrorCode]:
        """The group-level check of an OffsetCommit, then the offsets' records, which
        take effect when the partition has them."""
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = self.consumer.validate_commit(
                consumer_group, member_id, instance_id, generation_id, api_version, False, offsets
            )
            if error:
                return CoordinatorResult([], error)
            return CoordinatorResult(
                [records.offset_commit_record(group_id, key, c) for key, c in offsets.items()],
                ErrorCode.none,
            )
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a group that does not exist. Kafka says so from v9 on; older
                # clients expect ILLEGAL_GENERATION and rejoin.
                if api_version >= 9:
                    return CoordinatorResult([], ErrorCode.group_id_not_found)
                return CoordinatorResult([], ErrorCode.illegal_generation)
            if not offsets:
                # A "simple" group comes into being with its first commit, even of none.
                self.groups[group_id] = Group(group_id, self.clock())
        else:
            error = self._validate_commit(group, generation_id, member_id, instance_id)
            if error:
                return CoordinatorResult([], error)
            member = group.members.get(member_id)
            if member is not None:
                self._schedule_session_expiry(group, member)
        return CoordinatorResult(
            [records.offset_commit_record(group_id, key, c) for key, c in offsets.items()],
            ErrorCode.none,
        )

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer: TransactionalProducer,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[OffsetKey, CommittedOffset],
    ) -> CoordinatorResult[ErrorCode]:
        """TxnOffsetCommit: the offsets are written inside the producer's transaction and
        take effect only when its COMMIT marker reaches this partition (KIP-447: a
        member's generation is checked as for OffsetCommit)."""
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            error = self.consumer.validate_commit(
                consumer_group, member_id, instance_id, generation_id, 9, True, offsets
            )
            if error:
                return CoordinatorResult([], error)
            return CoordinatorResult(
                [records.offset_commit_record(group_id, key, c) for key, c in offsets.items()],
                ErrorCode.none,
                producer=producer,
            )
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return CoordinatorResult([], ErrorCode.illegal_generation)
        else:
            error = self._validate_commit(
                group, generation_id, member_id, instance_id, transactional=True
            )
            if error:
                return CoordinatorResult([], error)
        return CoordinatorResult(
            [records.offset_commit_record(group_id, key, c) for key, c in offsets.items()],
            ErrorCode.none,
            producer=producer,
        )

    def has_pending_transactional_offsets(self, group_id: str, key: OffsetKey) -> bool:
        """Whether a transaction not yet ended holds an offset of this partition."""
        return self._replay.offsets.has_pending(cr.OffsetCommitKey(group_id, key[0], key[1]))

    def _validate_commit(
        self,
        group: Group,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        transactional: bool = False,
    ) -> ErrorCode:
        """Kafka's order: the member and its generation first, then the group's state.
        A transactional commit is checked only for what it carries: TxnOffsetCommit
        v0-v2 carry no member id or generation (aiokafka and kafkajs send them), and
        Kafka takes them into a group with members, in any state."""
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.none
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._check_member(group, member_id, instance_id, generation_id)
            if error:
                return error
        elif not transactional and not group.is_(GroupState.EMPTY):
            # A simple commit into a group that has members.
            return ErrorCode.unknown_member_id
        if not transactional and group.is_(GroupState.COMPLETING_REBALANCE):
            # A valid member that has its join response but no assignment yet.
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def fetch_offsets(
        self, group_id: str, partitions: list[OffsetKey] | None
    ) -> dict[OffsetKey, CommittedOffset | None]:
        group: Group | ConsumerGroup | None = self.groups.get(group_id)
        if group is None:
            group = self.consumer_groups.get(group_id)
        stored = group.offsets if group is not None else {}
        if partitions is None:
            return dict(stored)
        return {key: stored.get(key) for key in partitions}

    def validate_fetch_member(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """OffsetFetch v9+ from a member of a consumer group: its id and epoch."""
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is None:
            return ErrorCode.none
        return self.consumer.validate_fetch(consumer_group, member_id, member_epoch)

    def consumer_group_heartbeat(
        self, request: HeartbeatRequest
    ) -> CoordinatorResult[HeartbeatResponse]:
        if request.group_id in self.share_groups:
            return CoordinatorResult(
                [],
                HeartbeatResponse(
                    ErrorCode.group_id_not_found,
                    f"Group {request.group_id} is not a consumer group.",
                ),
            )
        return self.consumer.heartbeat(request)

    def share_group_heartbeat(self, request: ShareHeartbeatRequest) -> CoordinatorResult[Any]:
        return self.share.heartbeat(request)

    def alter_share_group_offsets(
        self, group_id: str, partitions: dict[Any, frozenset[int]]
    ) -> CoordinatorResult[int]:
        if group_id in self.groups or group_id in self.consumer_groups:
            raise KafkaError.with_code(
                ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
            )
        return self.share.alter_offsets(group_id, partitions)

    def delete_offsets(
        self, group_id: str, partitions: list[OffsetKey]
    ) -> CoordinatorResult[tuple[ErrorCode, dict[OffsetKey, ErrorCode]]]:
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            subscribed = consumer_group.subscribed_topic_names()
            errors = {
                key: ErrorCode.group_subscribed_to_topic if key[0] in subscribed else ErrorCode.none
                for key in partitions
            }
            deletable = [k for k, e in errors.items() if not e and k in consumer_group.offsets]
            return CoordinatorResult(
                records.offset_tombstones(group_id, deletable), (ErrorCode.none, errors)
            )
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return CoordinatorResult([], (ErrorCode.group_id_not_found, {}))
        if not group.is_(GroupState.EMPTY) and group.protocol_type != "consumer":
            # Kafka can tell which topics a group uses only for the consumer protocol.
            return CoordinatorResult([], (ErrorCode.non_empty_group, {}))
        subscribed = self.subscribed_topics(group)
        # Until its first generation forms, a group's subscriptions are unknown, and
        # Kafka (GroupMetadata.isSubscribedToTopic) then takes every topic as subscribed.
        unknown = group.generation_id == 0
        errors = {}
        deletable = []
        for key in partitions:
            if not group.is_(GroupState.EMPTY) and (unknown or key[0] in subscribed):
                errors[key] = ErrorCode.group_subscribed_to_topic
            else:
                errors[key] = ErrorCode.none
                if key in group.offsets:
                    deletable.append(key)
        return CoordinatorResult(
            records.offset_tombstones(group_id, deletable), (ErrorCode.none, errors)
        )

    @staticmethod
    def subscribed_topics(group: Group) -> set[str]:
        """Topics the group's consumers subscribe to (consumer protocol only)."""
        if group.protocol_type != "consumer" or group.protocol_name is None:
            return set()
        topics: set[str] = set()
        for member in group.members.values():
            topics |= subscribed_topics(member.metadata_for(group.protocol_name))
        return topics

    # --- admin ------------------------------------------------------------------------

    def delete_group(self, group_id: str) -> CoordinatorResult[ErrorCode]:
        """Tombstones for the group's offsets and metadata; their replay removes it."""
        if group_id in self.share_groups:
            deleted = self.share.delete(group_id)
            if deleted.response is ErrorCode.none:
                log.info("Deleting share group %s", group_id)
            return deleted
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            if not consumer_group.is_empty:
                return CoordinatorResult([], ErrorCode.non_empty_group)
            tombstones = records.offset_tombstones(group_id, consumer_group.offsets)
            tombstones += self.consumer.delete(consumer_group)
            log.info("Deleting consumer group %s", group_id)
            return CoordinatorResult(tombstones, ErrorCode.none)
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return CoordinatorResult([], ErrorCode.group_id_not_found)
        if not group.is_(GroupState.EMPTY):
            return CoordinatorResult([], ErrorCode.non_empty_group)
        tombstones = records.offset_tombstones(group_id, group.offsets)
        tombstones.append(records.group_tombstone(group_id))
        log.info("Deleting group %s", group_id)
        return CoordinatorResult(tombstones, ErrorCode.none)

    def _schedule_offsets_expiry(self) -> None:
        self.timer.schedule(
            EXPIRE_OFFSETS_TIMER,
            self.config["offsets.retention.check.interval.ms"],
            self.expire_offsets,
        )

    def expire_offsets(self) -> CoordinatorResult[int]:
        """Drop committed offsets of empty groups older than offsets.retention.minutes, and
        remove empty groups left without offsets (with a tombstone for their metadata, so
        they stay gone after a restart), as Kafka's cleanup does every
        offsets.retention.check.interval.ms."""
        self._schedule_offsets_expiry()
        retention_ms = self.config["offsets.retention.minutes"] * 60_000
        now = self.clock()
        tombstones: list[CoordinatorRecord] = []
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
                tombstones += records.offset_tombstones(group.group_id, expired)
                expired_total += len(expired)
                log.info(
                    "Expiring %d committed offset(s) of group %s", len(expired), group.group_id
                )
            if len(expired) == len(group.offsets):
                tombstones.append(records.group_tombstone(group.group_id))
                log.info("Removing group %s: empty and without committed offsets", group.group_id)
        for consumer_group in list(self.consumer_groups.values()):
            # Kafka keeps the offsets of topics a consumer group still subscribes to.
            subscribed = consumer_group.subscribed_topic_names()
            expired = [
                key
                for key, offset in consumer_group.offsets.items()
                if key[0] not in subscribed and now - offset.commit_timestamp >= retention_ms
            ]
            if expired:
                tombstones += records.offset_tombstones(consumer_group.group_id, expired)
                expired_total += len(expired)
                log.info(
                    "Expiring %d committed offset(s) of consumer group %s",
                    len(expired),
                    consumer_group.group_id,
                )
            if consumer_group.is_empty and len(expired) == len(consumer_group.offsets):
                tombstones += self.consumer.delete(consumer_group)
                log.info(
                    "Removing consumer group %s: empty and without committed offsets",
                    consumer_group.group_id,
                )
        return CoordinatorResult(tombstones, expired_total)
