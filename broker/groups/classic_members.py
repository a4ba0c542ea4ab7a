"""Classic-protocol members inside a consumer group (KIP-848), as Kafka 4 serves them.

A consumer of the classic protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) can be a
member of a consumer group: the coordinator assigns it with the rest, from the
subscription inside its JoinGroup's protocol metadata, and it reconciles through the
classic requests. Its generation is its member epoch. JoinGroup answers at once (no
leader, no member list: the assignment is the coordinator's), with the epoch the member
reached; SyncGroup answers the partitions it may consume now (those it must give up are
left out); Heartbeat answers REBALANCE_IN_PROGRESS while it is behind its target, so that
it joins again, then reporting in its subscription what it still owns. Its own session
timeout applies; a member that does not join again, or sync, within its rebalance
timeout is fenced.

Online conversion (`group.consumer.migration.policy`, bidirectional by default): a
consumer-protocol member joining a classic group that has members turns it into a
consumer group whose members keep their generation as their epoch and their assignment
(`upgrade`); when the last consumer-protocol member leaves a group of classic members,
it turns back into a classic group, which rebalances (`downgrade`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from brook.protocol import consumer_group_records as cgr
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode, KafkaError

from ..coordinator.records import CoordinatorRecord
from ..coordinator.shard import CoordinatorResult
from . import consumer_records as records
from .consumer_group import (
    ClassicMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    new_member_id,
)
from .consumer_protocol import assigned_partitions, encode_assignment, subscription
from .group import Group, JoinRequest, JoinResult, SyncRequest
from .records import group_tombstone

if TYPE_CHECKING:
    from .consumer_groups import ConsumerGroups

log = logging.getLogger("brook.groups")

PROTOCOL_TYPE = "consumer"
SyncAnswer = tuple[ErrorCode, bytes]


def join_timer(group_id: str, member_id: str) -> str:
    return f"consumer-join-{group_id}-{member_id}"


def sync_timer(group_id: str, member_id: str) -> str:
    return f"consumer-sync-{group_id}-{member_id}"


def migration_allows(policy: str, direction: str) -> bool:
    """Whether group.consumer.migration.policy allows converting a group with members
    (`direction`: upgrade or downgrade)."""
    return policy.lower() in ("bidirectional", direction)


class ClassicMembers:
    """The classic requests of the members of one shard's consumer groups."""

    def __init__(self, consumer: ConsumerGroups) -> None:
        self.consumer = consumer

    # --- JoinGroup ------------------------------------------------------------------------

    def join(self, group: ConsumerGroup, request: JoinRequest) -> CoordinatorResult[JoinResult]:
        try:
            return self._join(group, request)
        except KafkaError as exc:
            log.info(
                "JoinGroup of %s into consumer group %s refused: %s: %s",
                request.member_id or request.client_id,
                group.group_id,
                exc.error_code.name.upper(),
                exc.message,
            )
            return CoordinatorResult([], JoinResult(exc.error_code, member_id=request.member_id))

    def _join(self, group: ConsumerGroup, request: JoinRequest) -> CoordinatorResult[JoinResult]:
        consumer = self.consumer
        unknown = not request.member_id
        member_id = request.member_id or new_member_id()
        max_size = consumer.config["group.consumer.max.size"]
        if (
            member_id not in group.members
            and request.instance_id not in group.static_members
            and len(group.members) >= max_size
        ):
            raise KafkaError.with_code(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )
        if not supports_classic_protocols(group, request.protocol_type, request.protocols):
            raise KafkaError.with_code(
                ErrorCode.inconsistent_group_protocol,
                f"Member {member_id}'s protocols are not supported.",
            )
        if unknown and request.instance_id is None and request.require_known_member_id:
            # KIP-394, as for a classic group: the member comes back with this id.
            return CoordinatorResult(
                [], JoinResult(ErrorCode.member_id_required, member_id=member_id)
            )
        written: list[CoordinatorRecord] = []
        old = self._member_to_join(group, request, member_id, unknown, written)
        name, metadata = request.protocols[0]
        subscribed = subscription(metadata)
        if subscribed is None:
            raise KafkaError.with_code(
                ErrorCode.unknown_server_error,
                f"The subscription of member {member_id} (protocol {name}) does not parse.",
            )
        base = old if old is not None else ConsumerGroupMember(member_id)
        member = replace(
            base,
            member_id=member_id,
            instance_id=request.instance_id,
            rack_id=subscribed.rack_id or base.rack_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscribed.topics))),
            subscribed_topic_regex=None,
            server_assignor=None,
            classic=ClassicMetadata(request.session_timeout_ms, tuple(request.protocols)),
        )
        owned = consumer.topic_id_assignment(subscribed.owned)
        reconciled, group_epoch, _ = consumer.apply_member(group, old, member, owned, written)
        timer = consumer.timer
        timer.cancel(join_timer(group.group_id, member_id))
        consumer.schedule_session(group.group_id, member_id, request.session_timeout_ms)
        timer.schedule(
            sync_timer(group.group_id, member_id),
            request.rebalance_timeout_ms,
            lambda: consumer.fence_operation(
                group.group_id, member_id, "did not sync within its rebalance timeout"
            ),
        )
        if old is None or old.member_id != member_id:
            log.info(
                "Classic member %s joined consumer group %s at group epoch %d",
                member_id,
                group.group_id,
                group_epoch,
            )
        return CoordinatorResult(
            written,
            JoinResult(
                generation_id=reconciled.member_epoch,
                protocol_type=PROTOCOL_TYPE,
                protocol_name=name,
                leader_id="",
                member_id=member_id,
            ),
        )

    def _member_to_join(
        self,
        group: ConsumerGroup,
        request: JoinRequest,
        member_id: str,
        unknown: bool,
        written: list[CoordinatorRecord],
    ) -> ConsumerGroupMember | None:
        """The member a JoinGroup updates: a known one, none (a new member), or the old
        incarnation a static member replaces (whose records are then deleted)."""
        instance_id = request.instance_id
        if instance_id is None:
            return group.members.get(member_id)
        known_id = group.static_members.get(instance_id)
        if unknown:
            if known_id is None:
                return None
            known = group.members[known_id]
            for key in self.consumer.timer_keys(group.group_id, known_id):
                self.consumer.timer.cancel(key)
            written.extend(records.removal_records(group.group_id, known_id))
            return replace(known, member_epoch=0, previous_member_epoch=0)
        if known_id is None:
            raise KafkaError.with_code(
                ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown."
            )
        if known_id != member_id:
            raise KafkaError.with_code(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by"
                f" member {known_id}.",
            )
        return group.members[known_id]

    # --- SyncGroup ------------------------------------------------------------------------

    def sync(self, group: ConsumerGroup, request: SyncRequest) -> CoordinatorResult[SyncAnswer]:
        try:
            member = self._classic_member(group, request.member_id, request.instance_id)
        except KafkaError as exc:
            return CoordinatorResult([], (exc.error_code, b""))
        assert member.classic is not None
        if request.generation_id != member.member_epoch:
            return CoordinatorResult([], (ErrorCode.illegal_generation, b""))
        if request.protocol_type not in (None, PROTOCOL_TYPE) or request.protocol_name not in (
            None,
            member.classic.protocol_name,
        ):
            return CoordinatorResult([], (ErrorCode.inconsistent_group_protocol, b""))
        if (
            group.group_epoch > member.member_epoch
            and member.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._schedule_join_timeout(group, member)
            return CoordinatorResult([], (ErrorCode.rebalance_in_progress, b""))
        self.consumer.timer.cancel(sync_timer(group.group_id, member.member_id))
        self.consumer.schedule_session(
            group.group_id, member.member_id, member.classic.session_timeout_ms
        )
        # Only what it may consume now: partitions it gives up, or waits for, are left out.
        names = self.consumer.topic_name_assignment(member.assigned)
        version = _version_of(member.classic.protocols[0][1])
        return CoordinatorResult([], (ErrorCode.none, encode_assignment(names, version)))

    # --- Heartbeat ------------------------------------------------------------------------

    def heartbeat(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        try:
            member = self._classic_member(group, member_id, instance_id)
        except KafkaError as exc:
            return exc.error_code
        assert member.classic is not None
        if generation_id != member.member_epoch:
            return ErrorCode.illegal_generation
        self.consumer.schedule_session(group.group_id, member_id, member.classic.session_timeout_ms)
        behind = (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not _waits_on_unreleased(group, member)
            )
        )
        if behind:
            # It joins again, telling what it still owns, and is reconciled then.
            self._schedule_join_timeout(group, member)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # --- LeaveGroup -----------------------------------------------------------------------

    def leave(
        self, group: ConsumerGroup, members: Iterable[tuple[str, str | None]]
    ) -> CoordinatorResult[tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]]:
        results: list[tuple[str, str | None, ErrorCode]] = []
        leaving: list[ConsumerGroupMember] = []
        for member_id, instance_id in members:
            if instance_id is not None:
                known_id = group.static_members.get(instance_id)
                if known_id is None:
                    results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                    continue
                if member_id and member_id != known_id:
                    results.append((member_id, instance_id, ErrorCode.fenced_instance_id))
                    continue
                member_id = known_id
            member = group.members.get(member_id)
            if member is None:
                results.append((member_id, instance_id, ErrorCode.unknown_member_id))
                continue
            results.append((member_id, instance_id, ErrorCode.none))
            if member not in leaving:
                leaving.append(member)
        if not leaving:
            return CoordinatorResult([], (ErrorCode.none, results))
        fenced = self.consumer.fence(group, leaving, "left the group")
        return CoordinatorResult(
            fenced.records,
            (ErrorCode.none, results),
            replay_records=fenced.replay_records,
        )

    # --- shared ------------------------------------------------------------------------------

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember:
        if instance_id is not None:
            known_id = group.static_members.get(instance_id)
            if known_id is None:
                raise KafkaError.with_code(ErrorCode.unknown_member_id)
            if known_id != member_id:
                raise KafkaError.with_code(ErrorCode.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            # A consumer-protocol member does not use the classic requests.
            raise KafkaError.with_code(ErrorCode.unknown_member_id)
        return member

    def _schedule_join_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
        key = join_timer(group.group_id, member.member_id)
        if self.consumer.timer.is_scheduled(key):
            return
        group_id, member_id = group.group_id, member.member_id
        self.consumer.timer.schedule(
            key,
            max(member.rebalance_timeout_ms, 0),
            lambda: self.consumer.fence_operation(
                group_id, member_id, "did not join again within its rebalance timeout"
            ),
        )


def supports_classic_protocols(
    group: ConsumerGroup, protocol_type: str, protocols: list[tuple[str, bytes]]
) -> bool:
    """Kafka's check of a classic member joining a consumer group: the consumer protocol
    type, and a protocol every classic member supports (any, with none there yet)."""
    if protocol_type != PROTOCOL_TYPE or not protocols:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    names = {name for name, _ in protocols}
    return all(names & {name for name, _ in c.protocols} for c in classic)


def _waits_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Whether a partition of its target that it lacks is still another member's."""
    target = group.target_assignment.get(member.member_id, {})
    for topic, partitions in target.items():
        for partition in partitions - member.assigned.get(topic, frozenset()):
            if group.partition_epoch(topic, partition) != -1:
                return True
    return False


def _version_of(metadata: bytes) -> int:
    return int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0


# --- online conversion --------------------------------------------------------------------


def upgrade_records(
    consumer: ConsumerGroups, classic: Group
) -> tuple[list[CoordinatorRecord], ConsumerGroup]:
    """A classic group with members as a consumer group: the records that delete it and
    make the consumer group (each member at its generation with its assignment), and
    the consumer group they make (not yet the shard's: the records' replay makes it)."""
    group_id = classic.group_id
    generation = classic.generation_id
    members = []
    for member in classic.members.values():
        chosen = member.metadata_for(classic.protocol_name or "")
        subscribed = subscription(chosen) if chosen else None
        assigned = consumer.topic_id_assignment(assigned_partitions(member.assignment))
        members.append(
            ConsumerGroupMember(
                member.member_id,
                instance_id=member.group_instance_id,
                rack_id=subscribed.rack_id if subscribed else None,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout_ms=member.rebalance_timeout_ms,
                subscribed_topic_names=tuple(sorted(set(subscribed.topics))) if subscribed else (),
                classic=ClassicMetadata(member.session_timeout_ms, tuple(member.protocols)),
                member_epoch=generation,
                previous_member_epoch=generation,
                state=MemberState.STABLE,
                assigned=assigned,
            )
        )
    names = {name for m in members for name in m.subscribed_topic_names}
    written = [group_tombstone(group_id)]
    written += [records.member_record(group_id, m) for m in members]
    written.append(records.group_epoch_record(group_id, generation, consumer.metadata_hash(names)))
    written += [records.target_member_record(group_id, m.member_id, m.assigned) for m in members]
    written.append(records.target_epoch_record(group_id, generation))
    written += [records.current_assignment_record(group_id, m) for m in members]
    scratch: dict[str, ConsumerGroup] = {}
    for record in written[1:]:
        decoded = cgr.decode(int.from_bytes(record.key[:2], "big"), record.key, record.value)
        assert decoded is not None
        records.replay(scratch, {}, decoded[0], decoded[1], consumer.clock())
    # What waits on the classic group is told to join again.
    for waiting in classic.members.values():
        if waiting.join_waiter is not None and not waiting.join_waiter.done():
            waiting.join_waiter.set_result(
                JoinResult(ErrorCode.rebalance_in_progress, member_id=waiting.member_id)
            )
        if waiting.sync_waiter is not None and not waiting.sync_waiter.done():
            waiting.sync_waiter.set_result((ErrorCode.rebalance_in_progress, b""))
    for converted in members:
        assert converted.classic is not None
        timeout = converted.classic.session_timeout_ms
        consumer.schedule_session(group_id, converted.member_id, timeout)
    log.info(
        "Classic group %s becomes a consumer group (KIP-848) with its %d member(s) at epoch %d",
        group_id,
        len(members),
        generation,
    )
    return written, scratch[group_id]


def downgrade(
    consumer: ConsumerGroups, group: ConsumerGroup, leaving: set[str]
) -> tuple[list[CoordinatorRecord], cr.GroupMetadataValue] | None:
    """The records that turn a consumer group whose remaining members are all classic
    into a classic group, and the classic group's value; None when the policy or the
    group does not allow it (Kafka's validateOnlineDowngrade)."""
    remaining = [m for m in group.members.values() if m.member_id not in leaving]
    if not remaining or any(m.classic is None for m in remaining):
        return None
    if not any(group.members[m].classic is None for m in leaving if m in group.members):
        return None  # only the leave of a consumer-protocol member turns a group back
    if not migration_allows(consumer.config["group.consumer.migration.policy"], "downgrade"):
        return None
    if len(remaining) > consumer.config["group.max.size"]:
        return None
    protocol = _select_protocol(remaining)
    if protocol is None:
        return None
    group_id = group.group_id
    written: list[CoordinatorRecord] = []
    for member in group.members.values():
        written += records.removal_records(group_id, member.member_id)
    written += [records.regex_tombstone(group_id, regex) for regex in group.resolved_regexes]
    written.append(records.target_epoch_tombstone(group_id))
    written.append(records.group_epoch_tombstone(group_id))
    members = []
    for member in remaining:
        assert member.classic is not None
        metadata = dict(member.classic.protocols)[protocol]
        target = group.target_assignment.get(member.member_id, {})
        members.append(
            cr.MemberMetadata(
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout=member.rebalance_timeout_ms,
                session_timeout=member.classic.session_timeout_ms,
                subscription=metadata,
                assignment=encode_assignment(
                    consumer.topic_name_assignment(target), _version_of(metadata)
                ),
            )
        )
    value = cr.GroupMetadataValue(
        protocol_type=PROTOCOL_TYPE,
        generation=group.group_epoch,
        protocol=protocol,
        leader=members[0].member_id,
        current_state_timestamp=consumer.clock(),
        members=members,
    )
    written.append(
        CoordinatorRecord(
            cr.encode_key(cr.GroupMetadataKey(group_id)),
            cr.encode_value(value, cr.DEFAULT_GROUP_METADATA_VALUE_VERSION),
        )
    )
    log.info(
        "Consumer group %s becomes a classic group: its %d remaining member(s) use the"
        " classic protocol",
        group_id,
        len(remaining),
    )
    return written, value


def _select_protocol(members: list[ConsumerGroupMember]) -> str | None:
    """The classic group's protocol: each member votes for its first protocol that every
    member supports (Kafka's vote)."""
    common: set[str] | None = None
    for member in members:
        assert member.classic is not None
        names = {name for name, _ in member.classic.protocols}
        common = names if common is None else common & names
    if not common:
        return None
    votes: Counter[str] = Counter()
    for member in members:
        assert member.classic is not None
        votes[next(name for name, _ in member.classic.protocols if name in common)] += 1
    return votes.most_common(1)[0][0]
