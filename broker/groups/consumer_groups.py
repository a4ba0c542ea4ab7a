"""ConsumerGroupHeartbeat and the rest of Kafka 4's consumer group protocol on one shard.

Each heartbeat is one operation, computed as Kafka's GroupMetadataManager computes it:
the member as the request updates it; a new group epoch if the subscriptions or the
subscribed topics' metadata changed; a new target assignment if the group epoch moved
past it (the assignor runs over every member); the member's next step towards its
target (reconciliation.py). Each of those writes its records, and the group changes
only when the runtime replays them (`replay`), so a write the partition refuses leaves
the group as it was. Timers fence members whose session ends or who do not revoke
partitions within their rebalance timeout.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode, KafkaError

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.records import CoordinatorRecord
from ..coordinator.shard import CoordinatorResult
from . import consumer_records as records
from .assignors import ASSIGNORS, Assignment, MemberSubscription, TopicId
from .classic_members import (
    downgrade,
    join_timer,
    migration_allows,
    sync_timer,
    upgrade_records,
)
from .consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    member_topics,
    new_member_id,
    preferred_assignor,
    subscribed_names,
)
from .reconciliation import reconcile
from .records import group_tombstone
from .topic_regex import InvalidTopicRegex, compile_topic_regex, matching

if TYPE_CHECKING:
    from brook.storage.clock import Clock

    from ..metadata.cache import TopicMetadata
    from .group import Group
    from .group_configs import GroupConfigs
    from .shard import RebalanceStats

log = logging.getLogger("brook.groups")


# Subscriptions (and regexes) whose derived values are kept; beyond, they start again.
DERIVED_CACHE_SIZE = 1024


def topics_hash(topics: TopicImage | None, names: Iterable[str]) -> int:
    """A hash of the named topics as they are (id, partition count), for a group's
    metadata hash (consumer and share groups): Brook's own value, not Kafka's xxh3."""
    digest = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        topic = topics.get(name) if topics is not None else None
        if topic is not None:
            digest.update(f"{name}\0{topic.topic_id}\0{len(topic.partitions)}\n".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


class TopicImage(Protocol):
    """What the coordinator reads of the cluster's topics (the MetadataCache)."""

    def get(self, name: str) -> TopicMetadata | None: ...
    def get_by_id(self, topic_id: TopicId) -> TopicMetadata | None: ...
    def names(self) -> list[str]: ...
    @property
    def version(self) -> int:
        """Bumped by every change of the topics."""
        ...


@dataclass(frozen=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat in the coordinator's terms; None is "unchanged"."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[TopicId, frozenset[int]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1

    @property
    def is_full(self) -> bool:
        """A request with every field a (re)joining member sends: it gets its assignment."""
        return self.member_epoch == 0 or (
            self.rebalance_timeout_ms != -1
            and (self.subscribed_topic_names is not None or self.subscribed_topic_regex is not None)
            and self.owned is not None
        )


@dataclass
class HeartbeatResponse:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _error(code: ErrorCode, message: str) -> KafkaError:
    return KafkaError.with_code(code, message)


def validate_heartbeat(request: HeartbeatRequest, assignors: Iterable[str]) -> KafkaError | None:
    """Kafka's checks of a heartbeat before any group is read: INVALID_REQUEST for a
    malformed one, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION."""
    epoch = request.member_epoch
    if not request.member_id.strip() and (request.api_version >= 1 or epoch > 0 or epoch == -1):
        return _error(ErrorCode.invalid_request, "MemberId can't be empty.")
    for name, value in (("InstanceId", request.instance_id), ("RackId", request.rack_id)):
        if value is not None and not value.strip():
            return _error(ErrorCode.invalid_request, f"{name} can't be empty.")
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            return _error(
                ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request."
            )
        if request.owned is None or any(request.owned.values()):
            return _error(
                ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining."
            )
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return _error(
                ErrorCode.invalid_request,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when"
                " (re-)joining.",
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            return _error(ErrorCode.invalid_request, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return _error(ErrorCode.invalid_request, f"MemberEpoch {epoch} is invalid.")
    names = list(assignors)
    if request.server_assignor is not None and request.server_assignor not in names:
        return _error(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {request.server_assignor} is not supported. Supported assignors:"
            f" {', '.join(names)}.",
        )
    if request.subscribed_topic_regex:
        try:
            compile_topic_regex(request.subscribed_topic_regex)
        except InvalidTopicRegex as exc:
            return _error(
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex `{request.subscribed_topic_regex}` is not a valid regular"
                f" expression: {exc}.",
            )
    return None


def _session_timer(group_id: str, member_id: str) -> str:
    return f"consumer-session-{group_id}-{member_id}"


def _rebalance_timer(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-{group_id}-{member_id}"


class ConsumerGroups:
    """The consumer groups of one `__consumer_offsets` partition (a part of its shard)."""

    def __init__(
        self,
        groups: dict[str, ConsumerGroup],
        classic_groups: dict[str, Group],
        timer: CoordinatorTimer,
        config: Any,
        clock: Clock,
        topics: TopicImage | None,
        group_configs: GroupConfigs | None = None,
        stats: RebalanceStats | None = None,
    ) -> None:
        self.groups = groups
        self.classic_groups = classic_groups
        self.timer = timer
        self.config = config
        self.clock = clock
        self.topics = topics
        self.group_configs = group_configs
        self.stats = stats
        # What is derived from the topics, with the topics' version it was derived at.
        self._hashes: dict[frozenset[str], tuple[int, int]] = {}
        self._matches: dict[str, tuple[int, frozenset[str]]] = {}
        # The shard's: a consumer group turned classic takes its place (classic_members.py).
        self.on_downgrade: Callable[[ConsumerGroup, cr.GroupMetadataValue], None] | None = None

    # --- configuration ------------------------------------------------------------------

    def session_timeout_ms(self, group_id: str) -> int:
        """The group's consumer.session.timeout.ms, else the broker's."""
        if self.group_configs is not None:
            return self.group_configs.value(group_id, "consumer.session.timeout.ms")
        return int(self.config["group.consumer.session.timeout.ms"])

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """The group's consumer.heartbeat.interval.ms, else the broker's."""
        if self.group_configs is not None:
            return self.group_configs.value(group_id, "consumer.heartbeat.interval.ms")
        return int(self.config["group.consumer.heartbeat.interval.ms"])

    def assignor_names(self) -> list[str]:
        return list(self.config["group.consumer.assignors"])

    # --- ConsumerGroupHeartbeat ------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> CoordinatorResult[HeartbeatResponse]:
        try:
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except KafkaError as exc:
            log.info(
                "ConsumerGroupHeartbeat of member %s (epoch %d) of group %s refused: %s: %s",
                request.member_id,
                request.member_epoch,
                request.group_id,
                exc.error_code.name.upper(),
                exc.message,
            )
            return CoordinatorResult(
                [],
                HeartbeatResponse(
                    exc.error_code,
                    exc.message or None,
                    member_id=request.member_id,
                    member_epoch=request.member_epoch,
                ),
            )

    def _group_for(
        self, request: HeartbeatRequest
    ) -> tuple[ConsumerGroup, list[CoordinatorRecord]]:
        """The request's group, or a new one (not yet in the shard: its records create it)."""
        group = self.groups.get(request.group_id)
        if group is not None:
            return group, []
        classic = self.classic_groups.get(request.group_id)
        if classic is not None and not classic.is_empty:
            if request.member_epoch != 0 or not self._may_upgrade(classic):
                raise _error(
                    ErrorCode.group_id_not_found,
                    f"Group {request.group_id} is not a consumer group.",
                )
            written, upgraded = upgrade_records(self, classic)
            return upgraded, written
        if request.member_epoch != 0:
            raise _error(ErrorCode.group_id_not_found, f"Group {request.group_id} not found.")
        group = ConsumerGroup(request.group_id, self.clock())
        cleanup: list[CoordinatorRecord] = []
        if classic is not None and classic.generation_id > 0:
            # An empty classic group becomes a consumer group; its offsets stay.
            cleanup.append(group_tombstone(request.group_id))
        return group, cleanup

    def _may_upgrade(self, classic: Group) -> bool:
        """Kafka's validateOnlineUpgrade: the policy allows it, the group's members use
        the consumer protocol, and there are not more than a consumer group may have."""
        return (
            migration_allows(self.config["group.consumer.migration.policy"], "upgrade")
            and classic.protocol_type == "consumer"
            and len(classic.members) <= self.config["group.consumer.max.size"]
        )

    def _heartbeat(self, request: HeartbeatRequest) -> CoordinatorResult[HeartbeatResponse]:
        group, written = self._group_for(request)
        member_id = request.member_id or new_member_id()
        if request.instance_id is not None:
            old, written_static = self._static_member(group, request, member_id)
            written += written_static
        else:
            old = self._dynamic_member(group, request, member_id)
        max_size = self.config["group.consumer.max.size"]
        if member_id not in group.members and len(group.members) >= max_size:
            raise _error(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )
        member = self._updated(old, request, member_id)
        reconciled, group_epoch, changed = self.apply_member(
            group, old, member, request.owned, written
        )
        self._schedule_timers(group.group_id, reconciled, assignment_changed=changed)
        if old is None or old.member_id != member_id:
            log.info(
                "Member %s joined consumer group %s at group epoch %d",
                member_id,
                group.group_id,
                group_epoch,
            )
        assignment = None
        if request.is_full or old is None or reconciled.assigned != old.assigned:
            assignment = reconciled.assigned
        return CoordinatorResult(
            written,
            HeartbeatResponse(
                member_id=member_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=self.heartbeat_interval_ms(group.group_id),
                assignment=assignment,
            ),
        )

    def apply_member(
        self,
        group: ConsumerGroup,
        old: ConsumerGroupMember | None,
        member: ConsumerGroupMember,
        owned: Mapping[TopicId, frozenset[int]] | None,
        written: list[CoordinatorRecord],
    ) -> tuple[ConsumerGroupMember, int, bool]:
        """A member as a heartbeat or a classic JoinGroup updates it, written: its
        subscription; a new group epoch if what the assignment depends on changed; a new
        target if the epoch moved past it; the member's next step towards its target
        (`owned`: what it says it owns). The reconciled member, the group epoch, and
        whether the member's current assignment changed."""
        member_id = member.member_id
        # A static member restarted under a new member id replaces its old self.
        replacing = old is not None and old.member_id != member_id
        members = {**group.members, member_id: member}
        previous_ids = {}
        if old is not None and replacing:
            members.pop(old.member_id, None)
            previous_ids[member_id] = old.member_id
        if old is None or replacing or not member.same_subscription(old):
            written.append(records.member_record(group.group_id, member))
        resolved = self._resolve_regexes(group, members.values(), written)
        subscribed = subscribed_names(members.values(), resolved)
        metadata_hash = self.metadata_hash(subscribed)
        group_epoch = group.group_epoch
        if (
            group_epoch == 0
            or old is None
            or member.subscribed_topic_names != old.subscribed_topic_names
            or member.subscribed_topic_regex != old.subscribed_topic_regex
            or metadata_hash != group.metadata_hash
            or resolved != group.resolved_regexes
        ):
            group_epoch += 1
            written.append(records.group_epoch_record(group.group_id, group_epoch, metadata_hash))
            self._count_rebalance()
        target_epoch = group.target_assignment_epoch
        target = group.target_assignment.get(previous_ids.get(member_id, member_id), {})
        if group_epoch > target_epoch:
            target = self._new_target(group, members, previous_ids, resolved, group_epoch, written)[
                member_id
            ]
            target_epoch = group_epoch
        elif replacing:
            written.append(records.target_member_record(group.group_id, member_id, target))
        reconciled = reconcile(member, target_epoch, target, group.partition_epoch, owned)
        changed = old is None or replacing or not reconciled.same_assignment(old)
        if changed:
            written.append(records.current_assignment_record(group.group_id, reconciled))
        return reconciled, group_epoch, changed

    def _dynamic_member(
        self, group: ConsumerGroup, request: HeartbeatRequest, member_id: str
    ) -> ConsumerGroupMember | None:
        member = group.members.get(member_id)
        if member is None:
            if request.member_epoch != 0:
                raise _error(
                    ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            return None
        _check_epoch(member, request)
        return member

    def _static_member(
        self, group: ConsumerGroup, request: HeartbeatRequest, member_id: str
    ) -> tuple[ConsumerGroupMember | None, list[CoordinatorRecord]]:
        instance_id = request.instance_id
        assert instance_id is not None
        known_id = group.static_members.get(instance_id)
        known = group.members.get(known_id) if known_id is not None else None
        if request.member_epoch == 0:
            if known is None:
                return None, []
            if known.member_id == member_id:
                _check_epoch(known, request)
                return known, []
            if known.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise _error(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {instance_id} cannot join the"
                    f" group because the instance id is owned by member {known.member_id}.",
                )
            # The instance restarted: it takes the old member's place and assignment,
            # under its new member id, and the old id is gone.
            self.timer.cancel(_session_timer(group.group_id, known.member_id))
            self.timer.cancel(_rebalance_timer(group.group_id, known.member_id))
            written = records.removal_records(group.group_id, known.member_id)
            return replace(known, member_epoch=0, previous_member_epoch=0), written
        if known is None:
            raise _error(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if known.member_id != member_id:
            raise _error(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by member"
                f" {known.member_id}.",
            )
        _check_epoch(known, request)
        return known, []

    def _matching(self, regex: str) -> frozenset[str]:
        """The topics a regex resolves to now (every heartbeat asks: matched again only
        once the topics changed). Kafka matches no internal topic."""
        version = self.topics.version if self.topics is not None else 0
        cached = self._matches.get(regex)
        if cached is not None and cached[0] == version:
            return cached[1]
        names = [n for n in (self.topics.names() if self.topics else []) if not _internal(self, n)]
        if len(self._matches) >= DERIVED_CACHE_SIZE:
            self._matches.clear()
        topics = matching(regex, names)
        self._matches[regex] = (version, topics)
        return topics

    @staticmethod
    def _updated(
        old: ConsumerGroupMember | None, request: HeartbeatRequest, member_id: str
    ) -> ConsumerGroupMember:
        """The member with what the request changes (a None field changes nothing)."""
        base = old if old is not None else ConsumerGroupMember(member_id)
        changes: dict[str, Any] = {
            "member_id": member_id,
            "classic": None,  # a member heartbeating speaks the consumer protocol
            "client_id": request.client_id,
            "client_host": request.client_host,
        }
        if request.instance_id is not None:
            changes["instance_id"] = request.instance_id
        if request.rack_id is not None:
            changes["rack_id"] = request.rack_id
        if request.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            changes["server_assignor"] = request.server_assignor
        if request.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = tuple(sorted(request.subscribed_topic_names))
        if request.subscribed_topic_regex is not None:
            changes["subscribed_topic_regex"] = request.subscribed_topic_regex or None
        return replace(base, **changes)

    # --- subscriptions and topics ---------------------------------------------------------

    def _resolve_regexes(
        self,
        group: ConsumerGroup,
        members: Iterable[ConsumerGroupMember],
        written: list[CoordinatorRecord],
    ) -> dict[str, frozenset[str]]:
        """Every regex a member subscribes with, resolved against the topics now; a
        resolution that changed (a topic created or deleted) is written."""
        regexes = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}
        if not regexes:
            for stale in group.resolved_regexes:
                written.append(records.regex_tombstone(group.group_id, stale))
            return {}
        resolved = {}
        for regex in sorted(regexes):
            topics = self._matching(regex)
            resolved[regex] = topics
            if group.resolved_regexes.get(regex) != topics:
                written.append(records.regex_record(group.group_id, regex, topics, 0, self.clock()))
        for stale in set(group.resolved_regexes) - regexes:
            written.append(records.regex_tombstone(group.group_id, stale))
        return resolved

    def metadata_hash(self, names: Iterable[str]) -> int:
        """A hash of the subscribed topics as they are (id, partition count): when it
        changes, the assignment is computed again. Kafka 4.1 keeps such a hash too; its
        value is Brook's own, so a group moved to Kafka would rebalance once. Every
        heartbeat asks: computed again only once the topics changed."""
        subscribed = frozenset(names)
        version = self.topics.version if self.topics is not None else 0
        cached = self._hashes.get(subscribed)
        if cached is not None and cached[0] == version:
            return cached[1]
        if len(self._hashes) >= DERIVED_CACHE_SIZE:
            self._hashes.clear()
        value = self._hash_of(subscribed)
        self._hashes[subscribed] = (version, value)
        return value

    def _hash_of(self, names: Iterable[str]) -> int:
        return topics_hash(self.topics, names)

    def _topic_ids(self, names: Iterable[str]) -> dict[str, TopicId]:
        ids = {}
        for name in names:
            topic = self.topics.get(name) if self.topics else None
            if topic is not None:
                ids[name] = topic.topic_id
        return ids

    def _new_target(
        self,
        group: ConsumerGroup,
        members: Mapping[str, ConsumerGroupMember],
        previous_ids: Mapping[str, str],
        resolved: Mapping[str, frozenset[str]],
        epoch: int,
        written: list[CoordinatorRecord],
    ) -> dict[str, Assignment]:
        """The assignor's answer over every member, written as target records for the
        members whose target changed, then the target's epoch."""
        subscribed = subscribed_names(members.values(), resolved)
        ids = self._topic_ids(subscribed)
        counts: dict[TopicId, int] = {}
        for name, topic_id in ids.items():
            topic = self.topics.get(name) if self.topics else None
            if topic is not None:
                counts[topic_id] = len(topic.partitions)
        specs = {}
        for member_id, member in members.items():
            names = member_topics(member, resolved)
            specs[member_id] = MemberSubscription(
                subscribed_topic_ids=frozenset(ids[n] for n in names if n in ids),
                assignment=group.target_assignment.get(previous_ids.get(member_id, member_id), {}),
                rack_id=member.rack_id,
                instance_id=member.instance_id,
            )
        name = preferred_assignor(members.values()) or self.assignor_names()[0]
        target = ASSIGNORS[name].assign(specs, counts)
        for member_id, assignment in target.items():
            if member_id in previous_ids or group.target_assignment.get(member_id) != assignment:
                written.append(records.target_member_record(group.group_id, member_id, assignment))
        for member_id in set(group.target_assignment) - set(members):
            written.append(records.target_member_tombstone(group.group_id, member_id))
        written.append(records.target_epoch_record(group.group_id, epoch))
        return target

    # --- leaving and fencing -----------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest) -> CoordinatorResult[HeartbeatResponse]:
        group = self.groups.get(request.group_id)
        if group is None:
            raise _error(ErrorCode.group_id_not_found, f"Group {request.group_id} not found.")
        if request.instance_id is not None:
            known_id = group.static_members.get(request.instance_id)
            if known_id is None:
                raise _error(
                    ErrorCode.unknown_member_id, f"Instance id {request.instance_id} is unknown."
                )
            if known_id != request.member_id:
                raise _error(
                    ErrorCode.fenced_instance_id,
                    f"Static member {request.member_id} with instance id {request.instance_id}"
                    f" was fenced by member {known_id}.",
                )
        member = group.members.get(request.member_id)
        if member is None:
            raise _error(
                ErrorCode.unknown_member_id,
                f"Member {request.member_id} is not a member of group {group.group_id}.",
            )
        response = HeartbeatResponse(
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            heartbeat_interval_ms=0,
        )
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # A static member away for a restart keeps its partitions for its session.
            log.info(
                "Static member %s (instance %s) of consumer group %s left for now",
                member.member_id,
                member.instance_id,
                group.group_id,
            )
            self.timer.cancel(_rebalance_timer(group.group_id, member.member_id))
            away = member.with_member_epoch(LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={})
            return CoordinatorResult(
                [records.current_assignment_record(group.group_id, away)], response
            )
        fenced = self.fence(group, [member], "left the group")
        return CoordinatorResult(fenced.records, response, replay_records=fenced.replay_records)

    def fence(
        self, group: ConsumerGroup, members: list[ConsumerGroupMember], reason: str
    ) -> CoordinatorResult[None]:
        """The records that remove members, and a new group epoch so that the others
        take over their partitions; or, where the last consumer-protocol member leaves
        classic members behind (and the policy allows), the records that turn the group
        into a classic group, which takes the shard's place at once (not by replay)."""
        leaving = {m.member_id for m in members}
        for member in members:
            log.info("Member %s of consumer group %s %s", member.member_id, group.group_id, reason)
            for key in self.timer_keys(group.group_id, member.member_id):
                self.timer.cancel(key)
        downgraded = downgrade(self, group, leaving)
        if downgraded is not None and self.on_downgrade is not None:
            written, value = downgraded
            self.on_downgrade(group, value)
            return CoordinatorResult(written, None, replay_records=False)
        written = []
        for member_id in leaving:
            written += records.removal_records(group.group_id, member_id)
        remaining = [m for m in group.members.values() if m.member_id not in leaving]
        resolved = self._resolve_regexes(group, remaining, written)
        metadata_hash = self.metadata_hash(subscribed_names(remaining, resolved))
        written.append(
            records.group_epoch_record(group.group_id, group.group_epoch + 1, metadata_hash)
        )
        self._count_rebalance()
        return CoordinatorResult(written, None)

    def fence_operation(
        self, group_id: str, member_id: str, reason: str
    ) -> CoordinatorResult[None]:
        """A timer's: fence the member if it is still one."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return CoordinatorResult([], None)
        return self.fence(group, [member], reason)

    def timer_keys(self, group_id: str, member_id: str) -> list[str]:
        return [
            _session_timer(group_id, member_id),
            _rebalance_timer(group_id, member_id),
            join_timer(group_id, member_id),
            sync_timer(group_id, member_id),
        ]

    def schedule_session(self, group_id: str, member_id: str, timeout_ms: int) -> None:
        self.timer.schedule(
            _session_timer(group_id, member_id),
            timeout_ms,
            lambda: self.fence_operation(
                group_id, member_id, f"expired after its session timeout of {timeout_ms} ms"
            ),
        )

    def topic_id_assignment(self, by_name: Mapping[str, Iterable[int]]) -> Assignment:
        """Partitions by topic name as partitions by topic id (unknown topics left out)."""
        ids = self._topic_ids(by_name)
        return {
            ids[name]: frozenset(parts) for name, parts in by_name.items() if name in ids and parts
        }

    def topic_name_assignment(self, assignment: Assignment) -> dict[str, list[int]]:
        names: dict[str, list[int]] = {}
        for topic_id, parts in assignment.items():
            topic = self.topics.get_by_id(topic_id) if self.topics is not None else None
            if topic is not None:
                names[topic.name] = sorted(parts)
        return names

    def _count_rebalance(self) -> None:
        if self.stats is not None:
            self.stats.consumer_rebalances += 1

    def _schedule_timers(
        self, group_id: str, member: ConsumerGroupMember, assignment_changed: bool = True
    ) -> None:
        """The session starts again; the rebalance timeout starts when the member is told
        to revoke partitions (not again at each heartbeat while it has not), and ends
        when it has."""
        self.schedule_session(group_id, member.member_id, self.session_timeout_ms(group_id))
        if not assignment_changed:
            return
        rebalance = _rebalance_timer(group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            self.timer.schedule(
                rebalance,
                max(member.rebalance_timeout_ms, 0),
                lambda: self._rebalance_expired(group_id, member.member_id, member.member_epoch),
            )
        else:
            self.timer.cancel(rebalance)

    def _rebalance_expired(
        self, group_id: str, member_id: str, epoch: int
    ) -> CoordinatorResult[None]:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return CoordinatorResult([], None)
        if member.state is not MemberState.UNREVOKED_PARTITIONS or member.member_epoch != epoch:
            return CoordinatorResult([], None)
        reason = (
            f"did not revoke its partitions within its rebalance timeout of"
            f" {member.rebalance_timeout_ms} ms"
        )
        return self.fence(group, [member], reason)

    def on_loaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                if member.classic is not None:
                    timeout = member.classic.session_timeout_ms
                    self.schedule_session(group.group_id, member.member_id, timeout)
                else:
                    self._schedule_timers(group.group_id, member)

    # --- offsets ----------------------------------------------------------------------------

    def validate_commit(
        self,
        group: ConsumerGroup,
        member_id: str,
        instance_id: str | None,
        member_epoch: int,
        api_version: int,
        transactional: bool,
        partitions: Iterable[tuple[str, int]] = (),
    ) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit, with Kafka 4.3's assignment epochs
        (KIP-1251): a member may commit with an epoch older than its own, from the one
        each committed partition was assigned to it at."""
        if member_epoch < 0 and not group.members:
            return ErrorCode.none
        if transactional and member_epoch < 0 and not member_id and instance_id is None:
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member.classic is not None:  # its generation is its member epoch
            if member_epoch != member.member_epoch:
                return ErrorCode.illegal_generation
            return ErrorCode.none
        if not transactional and api_version < 9:
            return ErrorCode.unsupported_version
        if member_epoch == member.member_epoch:
            return ErrorCode.none
        if member_epoch > member.member_epoch:
            return ErrorCode.stale_member_epoch
        committed = list(partitions)
        ids = self._topic_ids(topic for topic, _ in committed)
        for topic, partition in committed:
            topic_id = ids.get(topic)
            since = member.assignment_epoch(topic_id, partition) if topic_id else None
            if since is None or since > member_epoch:
                return ErrorCode.stale_member_epoch
        return ErrorCode.none

    def validate_fetch(
        self, group: ConsumerGroup, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch (OffsetFetch v9+)."""
        if member_id is None and member_epoch < 0:
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.member_epoch:
            return (
                ErrorCode.illegal_generation
                if member.classic is not None
                else ErrorCode.stale_member_epoch
            )
        return ErrorCode.none

    # --- admin -----------------------------------------------------------------------------

    def delete(self, group: ConsumerGroup) -> list[CoordinatorRecord]:
        """An empty group's tombstones (its offsets' are the caller's)."""
        written = [records.regex_tombstone(group.group_id, r) for r in group.resolved_regexes]
        written.append(records.target_epoch_tombstone(group.group_id))
        written.append(records.group_epoch_tombstone(group.group_id))
        return written


def _internal(groups: ConsumerGroups, name: str) -> bool:
    topic = groups.topics.get(name) if groups.topics is not None else None
    return topic is not None and topic.internal


def _check_epoch(member: ConsumerGroupMember, request: HeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: an epoch ahead of the member's
    is fenced; one behind is accepted only as the previous epoch, with owned partitions
    the member still has (the response that bumped it may have been lost)."""
    received = request.member_epoch
    if received > member.member_epoch:
        raise _error(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a greater member epoch ({received}) than the one"
            f" known by the group coordinator ({member.member_epoch}). The member must abandon"
            " all its partitions and rejoin.",
        )
    if received < member.member_epoch:
        owned = request.owned
        if (
            received == member.previous_member_epoch
            and owned is not None
            and all(
                parts <= member.assigned.get(topic, frozenset()) for topic, parts in owned.items()
            )
        ):
            return
        raise _error(
            ErrorCode.fenced_member_epoch,
            f"The consumer group member has a smaller member epoch ({received}) than the one"
            f" known by the group coordinator ({member.member_epoch}). The member must abandon"
            " all its partitions and rejoin.",
        )
