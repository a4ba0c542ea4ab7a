"""The share-group admin requests (KIP-932) at a group's coordinator, found with
FindCoordinator and found again while it moves or loads: ShareGroupDescribe (v1),
DescribeShareGroupOffsets (v1), AlterShareGroupOffsets (v0) and DeleteShareGroupOffsets
(v0). Listing and deleting share groups are ListGroups and DeleteGroups (groups.py)."""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from ..wire_client import ApiError, KafkaCluster, Node, by_topic

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ShareMemberDescription:
    member_id: str
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ShareGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: tuple[ShareMemberDescription, ...]
    coordinator: Node


@dataclass(frozen=True)
class SharePartitionOffset:
    start_offset: int  # -1: no state
    lag: int  # -1: not known


def share_group_describe(cluster: KafkaCluster, group_id: str) -> ShareGroupDescription | None:
    """The share group at its coordinator, or None when there is none (or the id is
    another kind of group's: GROUP_ID_NOT_FOUND)."""
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest

    node, response = cluster.at_coordinator(
        group_id,
        ShareGroupDescribeRequest(
            group_ids=(GroupId(group_id),), include_authorized_operations=False
        ),
        lambda answer: answer.groups[0].error_code if answer.groups else ErrorCode.none,
    )
    (group,) = response.groups
    if group.error_code == ErrorCode.group_id_not_found:
        return None
    if group.error_code != ErrorCode.none:
        raise ApiError(group.error_code, group.error_message)
    return ShareGroupDescription(
        group_id=group.group_id,
        state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        members=tuple(
            ShareMemberDescription(
                member_id=m.member_id,
                client_id=m.client_id,
                host=m.client_host,
                member_epoch=m.member_epoch,
                assignment=tuple(
                    sorted(
                        (topic.topic_name, index)
                        for topic in m.assignment.topic_partitions
                        for index in topic.partitions
                    )
                ),
            )
            for m in group.members
        ),
        coordinator=node,
    )


def describe_share_group_offsets(
    cluster: KafkaCluster, group_id: str
) -> dict[TopicPartition, SharePartitionOffset]:
    """Every partition the group reads: its start offset and lag."""
    from kio.schema.describe_share_group_offsets.v1 import request as describe1

    _, response = cluster.at_coordinator(
        group_id,
        describe1.DescribeShareGroupOffsetsRequest(
            groups=(
                describe1.DescribeShareGroupOffsetsRequestGroup(
                    group_id=GroupId(group_id), topics=None
                ),
            )
        ),
        lambda answer: answer.groups[0].error_code,
    )
    (group,) = response.groups
    if group.error_code != ErrorCode.none:
        raise ApiError(group.error_code, group.error_message)
    return {
        (topic.topic_name, partition.partition_index): SharePartitionOffset(
            int(partition.start_offset), int(partition.lag)
        )
        for topic in group.topics
        for partition in topic.partitions
    }


def alter_share_group_offsets(
    cluster: KafkaCluster, group_id: str, offsets: dict[TopicPartition, int]
) -> dict[TopicPartition, ErrorCode]:
    """Set an empty share group's start offsets; each partition's error."""
    from kio.schema.alter_share_group_offsets.v0 import request as alter0

    request = alter0.AlterShareGroupOffsetsRequest(
        group_id=GroupId(group_id),
        topics=tuple(
            alter0.AlterShareGroupOffsetsRequestTopic(
                topic_name=TopicName(topic),
                partitions=tuple(
                    alter0.AlterShareGroupOffsetsRequestPartition(
                        partition_index=i32(index), start_offset=i64(offsets[(topic, index)])
                    )
                    for index in indexes
                ),
            )
            for topic, indexes in by_topic(offsets).items()
        ),
    )
    _, response = cluster.at_coordinator(group_id, request)
    if response.error_code != ErrorCode.none:
        raise ApiError(response.error_code, response.error_message)
    return {
        (topic.topic_name, partition.partition_index): ErrorCode(partition.error_code)
        for topic in response.responses
        for partition in topic.partitions
    }


def delete_share_group_offsets(
    cluster: KafkaCluster, group_id: str, topics: list[str]
) -> dict[str, tuple[ErrorCode, str | None]]:
    """Make an empty share group forget topics; each topic's error and message."""
    from kio.schema.delete_share_group_offsets.v0 import request as delete0

    _, response = cluster.at_coordinator(
        group_id,
        delete0.DeleteShareGroupOffsetsRequest(
            group_id=GroupId(group_id),
            topics=tuple(
                delete0.DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(topic))
                for topic in topics
            ),
        ),
    )
    if response.error_code != ErrorCode.none:
        raise ApiError(response.error_code, response.error_message)
    return {
        topic.topic_name: (ErrorCode(topic.error_code), topic.error_message)
        for topic in response.responses
    }
