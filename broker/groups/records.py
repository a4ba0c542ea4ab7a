"""A classic group and its committed offsets as `__consumer_offsets` records.

Kafka's schemas (protocol/coordinator_records.py): an offset commit per (group, topic,
partition), and a group's metadata (generation, protocol, leader, members with their
subscriptions and assignments). The last record of a key wins; a null value (tombstone)
deletes it.
"""

from __future__ import annotations

from collections.abc import Iterable

from brook.coordinator_state.offsets import CommittedOffset
from brook.protocol import coordinator_records as cr

from ..coordinator.records import CoordinatorRecord
from .group import Group, GroupState, Member


def offset_commit_record(
    group_id: str, key: tuple[str, int], committed: CommittedOffset
) -> CoordinatorRecord:
    topic, partition = key
    return CoordinatorRecord(
        cr.encode_key(cr.OffsetCommitKey(group_id, topic, partition)),
        cr.encode_value(
            cr.OffsetCommitValue(
                offset=committed.offset,
                leader_epoch=committed.leader_epoch,
                metadata=committed.metadata,
                commit_timestamp=committed.commit_timestamp,
                expire_timestamp=committed.expire_timestamp,
            )
        ),
    )


def offset_tombstones(group_id: str, keys: Iterable[tuple[str, int]]) -> list[CoordinatorRecord]:
    return [
        CoordinatorRecord(cr.encode_key(cr.OffsetCommitKey(group_id, topic, partition)), None)
        for topic, partition in keys
    ]


def group_tombstone(group_id: str) -> CoordinatorRecord:
    return CoordinatorRecord(cr.encode_key(cr.GroupMetadataKey(group_id)), None)


def group_metadata_record(
    group: Group, assignments: dict[str, bytes] | None = None
) -> CoordinatorRecord:
    """The group as it stands, with `assignments` in place of the members' own when
    the record is written before the group takes them (SyncGroup's leader)."""
    protocol = group.protocol_name
    members = [
        cr.MemberMetadata(
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            client_id=member.client_id,
            client_host=member.client_host,
            rebalance_timeout=member.rebalance_timeout_ms,
            session_timeout=member.session_timeout_ms,
            subscription=member.metadata_for(protocol) if protocol else b"",
            assignment=(
                assignments.get(member.member_id, b"")
                if assignments is not None
                else member.assignment
            ),
        )
        for member in group.members.values()
    ]
    value = cr.GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=protocol,
        leader=group.leader_id,
        current_state_timestamp=group.state_timestamp,
        members=members,
    )
    return CoordinatorRecord(
        cr.encode_key(cr.GroupMetadataKey(group.group_id)), cr.encode_value(value)
    )


def restore_group(group: Group, value: cr.GroupMetadataValue, now_ms: int) -> None:
    """Members and generation of a group as its last GroupMetadata record left it."""
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    for stored in value.members:
        member = Member(
            member_id=stored.member_id,
            group_instance_id=stored.group_instance_id,
            client_id=stored.client_id,
            client_host=stored.client_host,
            rebalance_timeout_ms=stored.rebalance_timeout,
            session_timeout_ms=stored.session_timeout,
            protocol_type=group.protocol_type or "",
            protocols=[(group.protocol_name or "", stored.subscription)],
            assignment=stored.assignment,
            is_new=False,
        )
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
    group.transition(
        GroupState.STABLE if group.members else GroupState.EMPTY,
        value.current_state_timestamp if value.current_state_timestamp > 0 else now_ms,
    )
