"""A share group's `__consumer_offsets` records: built from the group's model, and
replayed into it (protocol/share_group_records.py holds their bytes).

The coordinator changes a share group only by writing records, which the runtime replays
into the shard as the partition takes them; loading the partition on another broker
replays the same records into the same groups. Replay follows Kafka's
GroupMetadataManager.replay for the share-group types: a member's metadata record
makes the group if it is missing, its tombstone removes the member, and the group's
metadata tombstone removes the group.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from brook.protocol import share_group_records as sgr

from ..coordinator.records import CoordinatorRecord
from .share_group import ShareAssignment, ShareGroup, ShareGroupMember, StatePartitions


def _record(key: sgr.ShareGroupKey, value: sgr.ShareGroupValue | None) -> CoordinatorRecord:
    return CoordinatorRecord(
        sgr.encode_key(key), sgr.encode_value(value) if value is not None else None
    )


def _topic_partitions(assignment: ShareAssignment) -> tuple[sgr.TopicPartitions, ...]:
    return tuple(
        sgr.TopicPartitions(topic_id=topic_id, partitions=tuple(sorted(partitions)))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))
        if partitions
    )


def _assignment(topics: tuple[sgr.TopicPartitions, ...]) -> ShareAssignment:
    return {topic.topic_id: frozenset(topic.partitions) for topic in topics}


def member_metadata(group_id: str, member: ShareGroupMember) -> CoordinatorRecord:
    return _record(
        sgr.ShareGroupMemberMetadataKey(group_id, member.member_id),
        sgr.ShareGroupMemberMetadataValue(
            rack_id=member.rack_id,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=tuple(sorted(member.subscribed_topic_names)),
        ),
    )


def group_epoch(group_id: str, epoch: int, metadata_hash: int) -> CoordinatorRecord:
    return _record(
        sgr.ShareGroupMetadataKey(group_id),
        sgr.ShareGroupMetadataValue(epoch=epoch, metadata_hash=metadata_hash),
    )


def target_member(group_id: str, member_id: str, assignment: ShareAssignment) -> CoordinatorRecord:
    return _record(
        sgr.ShareGroupTargetAssignmentMemberKey(group_id, member_id),
        sgr.ShareGroupTargetAssignmentMemberValue(topic_partitions=_topic_partitions(assignment)),
    )


def target_epoch(group_id: str, epoch: int) -> CoordinatorRecord:
    return _record(
        sgr.ShareGroupTargetAssignmentMetadataKey(group_id),
        sgr.ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch),
    )


def current_assignment(
    group_id: str, member_id: str, epoch: int, previous_epoch: int, assignment: ShareAssignment
) -> CoordinatorRecord:
    return _record(
        sgr.ShareGroupCurrentMemberAssignmentKey(group_id, member_id),
        sgr.ShareGroupCurrentMemberAssignmentValue(
            member_epoch=epoch,
            previous_member_epoch=previous_epoch,
            assigned_partitions=_topic_partitions(assignment),
        ),
    )


def state_partitions(
    group_id: str, state: StatePartitions, names: Mapping[uuid.UUID, str]
) -> CoordinatorRecord:
    def infos(
        topics: Mapping[uuid.UUID, frozenset[int]],
    ) -> tuple[sgr.TopicPartitionsInfo, ...]:
        return tuple(
            sgr.TopicPartitionsInfo(
                topic_id=topic_id,
                topic_name=names.get(topic_id, ""),
                partitions=tuple(sorted(partitions)),
            )
            for topic_id, partitions in sorted(topics.items(), key=lambda item: str(item[0]))
        )

    return _record(
        sgr.ShareGroupStatePartitionMetadataKey(group_id),
        sgr.ShareGroupStatePartitionMetadataValue(
            initializing_topics=infos(state.initializing),
            initialized_topics=infos(state.initialized),
            deleting_topics=tuple(
                sgr.TopicInfo(topic_id=topic_id, topic_name=names.get(topic_id, ""))
                for topic_id in sorted(state.deleting, key=str)
            ),
        ),
    )


def member_tombstones(group_id: str, member_id: str) -> list[CoordinatorRecord]:
    """A member leaves: its current and target assignments, then its metadata, go."""
    return [
        _record(sgr.ShareGroupCurrentMemberAssignmentKey(group_id, member_id), None),
        _record(sgr.ShareGroupTargetAssignmentMemberKey(group_id, member_id), None),
        _record(sgr.ShareGroupMemberMetadataKey(group_id, member_id), None),
    ]


def group_tombstones(group: ShareGroup) -> list[CoordinatorRecord]:
    """DeleteGroups: the whole group, in Kafka's order."""
    group_id = group.group_id
    records = [
        _record(sgr.ShareGroupCurrentMemberAssignmentKey(group_id, m), None) for m in group.members
    ]
    records += [
        _record(sgr.ShareGroupTargetAssignmentMemberKey(group_id, m), None)
        for m in group.target_assignment
    ]
    records.append(_record(sgr.ShareGroupTargetAssignmentMetadataKey(group_id), None))
    records += [_record(sgr.ShareGroupMemberMetadataKey(group_id, m), None) for m in group.members]
    records.append(_record(sgr.ShareGroupStatePartitionMetadataKey(group_id), None))
    records.append(_record(sgr.ShareGroupMetadataKey(group_id), None))
    return records


def replay(
    groups: dict[str, ShareGroup], key: sgr.ShareGroupKey, value: sgr.ShareGroupValue | None
) -> None:
    """Apply one share-group record to the shard's share groups."""
    group_id = key.group_id
    group = groups.get(group_id)
    if group is None:
        if value is None:
            return
        group = groups[group_id] = ShareGroup(group_id)
    if isinstance(key, sgr.ShareGroupMemberMetadataKey):
        if value is None:
            group.members.pop(key.member_id, None)
            return
        assert isinstance(value, sgr.ShareGroupMemberMetadataValue)
        member = group.members.setdefault(key.member_id, ShareGroupMember(key.member_id))
        member.rack_id = value.rack_id
        member.client_id = value.client_id
        member.client_host = value.client_host
        member.subscribed_topic_names = tuple(value.subscribed_topic_names)
    elif isinstance(key, sgr.ShareGroupMetadataKey):
        if value is None:
            del groups[group_id]
            return
        assert isinstance(value, sgr.ShareGroupMetadataValue)
        group.group_epoch = value.epoch
        group.metadata_hash = value.metadata_hash
    elif isinstance(key, sgr.ShareGroupTargetAssignmentMetadataKey):
        if value is None:
            group.assignment_epoch = -1
            return
        assert isinstance(value, sgr.ShareGroupTargetAssignmentMetadataValue)
        group.assignment_epoch = value.assignment_epoch
    elif isinstance(key, sgr.ShareGroupTargetAssignmentMemberKey):
        if value is None:
            group.target_assignment.pop(key.member_id, None)
            return
        assert isinstance(value, sgr.ShareGroupTargetAssignmentMemberValue)
        group.target_assignment[key.member_id] = _assignment(value.topic_partitions)
    elif isinstance(key, sgr.ShareGroupCurrentMemberAssignmentKey):
        member_or_none = group.members.get(key.member_id)
        if value is None:
            if member_or_none is not None:
                member_or_none.member_epoch = -1
                member_or_none.assignment = {}
            return
        assert isinstance(value, sgr.ShareGroupCurrentMemberAssignmentValue)
        member = group.members.setdefault(key.member_id, ShareGroupMember(key.member_id))
        member.member_epoch = value.member_epoch
        member.previous_member_epoch = value.previous_member_epoch
        member.assignment = _assignment(value.assigned_partitions)
    else:
        if value is None:
            group.state_partitions = StatePartitions()
            return
        assert isinstance(value, sgr.ShareGroupStatePartitionMetadataValue)
        group.state_partitions = StatePartitions(
            initializing={t.topic_id: frozenset(t.partitions) for t in value.initializing_topics},
            initialized={t.topic_id: frozenset(t.partitions) for t in value.initialized_topics},
            deleting=frozenset(t.topic_id for t in value.deleting_topics),
        )
