"""A consumer group's changes as `__consumer_offsets` records, and those records read back.

The records are Kafka's (protocol/consumer_group_records.py); this module turns a
member or an assignment into one and back. The last record of a key wins; a tombstone
deletes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from brook.protocol import consumer_group_records as cgr

from ..coordinator.records import CoordinatorRecord
from .assignors import Assignment, TopicId
from .consumer_group import ClassicMetadata, ConsumerGroup, ConsumerGroupMember, MemberState
from .group import Group


def _record(key: cgr.ConsumerGroupKey, value: cgr.ConsumerGroupValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(
        cgr.encode_key(key), cgr.encode_value(value) if value is not None else None
    )


def topic_partitions(
    assignment: Assignment, epochs: Mapping[tuple[TopicId, int], int] | None = None
) -> tuple[cgr.TopicPartitions, ...]:
    """An assignment as Kafka's records carry it; with `epochs`, each partition's
    assignment epoch beside it (a current assignment's, as Kafka 4.4 writes it)."""
    return tuple(
        cgr.TopicPartitions(
            topic_id=topic,
            partitions=tuple(sorted(parts)),
            assignment_epochs=tuple(epochs[(topic, p)] for p in sorted(parts))
            if epochs is not None
            else None,
        )
        for topic, parts in sorted(assignment.items(), key=lambda item: str(item[0]))
        if parts
    )


def assignment_of(partitions: tuple[cgr.TopicPartitions, ...]) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in partitions if tp.partitions}


def assignment_epochs_of(
    partitions: tuple[cgr.TopicPartitions, ...],
) -> dict[tuple[TopicId, int], int]:
    """The assignment epochs a record carries (Kafka 4.4 writes them; older ones not)."""
    epochs = {}
    for tp in partitions:
        if tp.assignment_epochs is not None and len(tp.assignment_epochs) == len(tp.partitions):
            epochs.update(
                {
                    (tp.topic_id, p): e
                    for p, e in zip(tp.partitions, tp.assignment_epochs, strict=True)
                }
            )
    return epochs


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupMetadataKey(group_id=group_id),
        cgr.ConsumerGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash),
    )


def group_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(cgr.ConsumerGroupMetadataKey(group_id=group_id), None)


def member_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member.member_id),
        cgr.ConsumerGroupMemberMetadataValue(
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex,
            rebalance_timeout_ms=member.rebalance_timeout_ms,
            server_assignor=member.server_assignor,
            classic_member_metadata=cgr.ClassicMemberMetadata(
                session_timeout_ms=member.classic.session_timeout_ms,
                supported_protocols=tuple(
                    cgr.ClassicProtocol(name=name, metadata=metadata)
                    for name, metadata in member.classic.protocols
                ),
            )
            if member.classic is not None
            else None,
        ),
    )


def member_of(member_id: str, value: cgr.ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        member_id=member_id,
        instance_id=value.instance_id or None,
        rack_id=value.rack_id or None,
        client_id=value.client_id,
        client_host=value.client_host,
        rebalance_timeout_ms=value.rebalance_timeout_ms,
        subscribed_topic_names=tuple(value.subscribed_topic_names),
        subscribed_topic_regex=value.subscribed_topic_regex or None,
        server_assignor=value.server_assignor or None,
        classic=ClassicMetadata(
            value.classic_member_metadata.session_timeout_ms,
            tuple((p.name, p.metadata) for p in value.classic_member_metadata.supported_protocols),
        )
        if value.classic_member_metadata is not None
        else None,
    )


def member_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(cgr.ConsumerGroupMemberMetadataKey(group_id=group_id, member_id=member_id), None)


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member.member_id),
        cgr.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=member.member_epoch,
            previous_member_epoch=member.previous_member_epoch,
            state=int(member.state),
            assigned_partitions=topic_partitions(member.assigned, _epochs_of(member)),
            partitions_pending_revocation=topic_partitions(
                member.pending_revocation, _epochs_of(member)
            ),
        ),
    )


def _epochs_of(member: ConsumerGroupMember) -> dict[tuple[TopicId, int], int]:
    """Every partition's assignment epoch, the member's epoch where none is known."""
    epochs = dict(member.assignment_epochs)
    for assignment in (member.assigned, member.pending_revocation):
        for topic, parts in assignment.items():
            for partition in parts:
                epochs.setdefault((topic, partition), member.member_epoch)
    return epochs


def current_assignment_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupCurrentMemberAssignmentKey(group_id=group_id, member_id=member_id), None
    )


def member_state(value: int) -> MemberState:
    try:
        return MemberState(value)
    except ValueError:
        return MemberState.UNKNOWN


def target_member_record(group_id: str, member_id: str, target: Assignment) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id),
        cgr.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=topic_partitions(target)),
    )


def target_member_tombstone(group_id: str, member_id: str) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupTargetAssignmentMemberKey(group_id=group_id, member_id=member_id), None
    )


def target_epoch_record(group_id: str, epoch: int) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id),
        cgr.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
    )


def target_epoch_tombstone(group_id: str) -> CoordinatorRecord:
    return _record(cgr.ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id), None)


def regex_record(
    group_id: str, regex: str, topics: frozenset[str], version: int, timestamp: int
) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex),
        cgr.ConsumerGroupRegularExpressionValue(
            topics=tuple(sorted(topics)), version=version, timestamp=timestamp
        ),
    )


def regex_tombstone(group_id: str, regex: str) -> CoordinatorRecord:
    return _record(
        cgr.ConsumerGroupRegularExpressionKey(group_id=group_id, regular_expression=regex), None
    )


def removal_records(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member leaving, in Kafka's order: its current assignment, its target, itself."""
    return [
        current_assignment_tombstone(group_id, member_id),
        target_member_tombstone(group_id, member_id),
        member_tombstone(group_id, member_id),
    ]


# --- replay ---------------------------------------------------------------------------------


def replay(
    groups: dict[str, ConsumerGroup],
    classic_groups: dict[str, Group],
    key: cgr.ConsumerGroupKey,
    value: cgr.ConsumerGroupValue | None,
    now_ms: int,
) -> None:
    """One consumer group record into the shard's groups. The first record of a group
    makes it; an empty classic group of the same id (offsets only) becomes it."""
    group_id = key.group_id
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return
        group = groups[group_id] = ConsumerGroup(group_id, now_ms)
        classic = classic_groups.pop(group_id, None)
        if classic is not None:
            group.offsets = classic.offsets
    if isinstance(key, cgr.ConsumerGroupMetadataKey):
        if value is None:
            _remove(groups, classic_groups, group, now_ms)
            return
        assert isinstance(value, cgr.ConsumerGroupMetadataValue)
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash
    elif isinstance(key, cgr.ConsumerGroupMemberMetadataKey):
        assert value is None or isinstance(value, cgr.ConsumerGroupMemberMetadataValue)
        group.replay_member(
            key.member_id, member_of(key.member_id, value) if value is not None else None
        )
    elif isinstance(key, cgr.ConsumerGroupCurrentMemberAssignmentKey):
        if value is None:
            group.replay_current_assignment_tombstone(key.member_id)
            return
        assert isinstance(value, cgr.ConsumerGroupCurrentMemberAssignmentValue)
        group.replay_current_assignment(
            key.member_id,
            value.member_epoch,
            value.previous_member_epoch,
            member_state(value.state),
            assignment_of(value.assigned_partitions),
            assignment_of(value.partitions_pending_revocation),
            assignment_epochs_of(value.assigned_partitions + value.partitions_pending_revocation),
        )
    elif isinstance(key, cgr.ConsumerGroupTargetAssignmentMemberKey):
        assert value is None or isinstance(value, cgr.ConsumerGroupTargetAssignmentMemberValue)
        group.replay_target_member(
            key.member_id,
            assignment_of(value.topic_partitions) if value is not None else None,
        )
    elif isinstance(key, cgr.ConsumerGroupTargetAssignmentMetadataKey):
        assert value is None or isinstance(value, cgr.ConsumerGroupTargetAssignmentMetadataValue)
        group.target_assignment_epoch = value.assignment_epoch if value is not None else 0
    elif isinstance(key, cgr.ConsumerGroupRegularExpressionKey):
        if value is None:
            group.resolved_regexes.pop(key.regular_expression, None)
        else:
            assert isinstance(value, cgr.ConsumerGroupRegularExpressionValue)
            group.resolved_regexes[key.regular_expression] = frozenset(value.topics)
    group.state_timestamp = now_ms


def _remove(
    groups: dict[str, ConsumerGroup],
    classic_groups: dict[str, Group],
    group: ConsumerGroup,
    now_ms: int,
) -> None:
    """The group's epoch tombstone: the group is gone; offsets left behind stay, as a
    simple group's."""
    group.dead = True
    del groups[group.group_id]
    if group.offsets:
        holder = classic_groups[group.group_id] = Group(group.group_id, now_ms)
        holder.offsets = group.offsets
