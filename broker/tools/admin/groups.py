"""The consumer-group admin requests: ListGroups (v5) at every broker; DescribeGroups
(v4), ConsumerGroupDescribe (v1, Kafka 4's consumer groups), OffsetFetch (v5),
OffsetCommit (v5), DeleteGroups (v1) and OffsetDelete (v0) at the group's coordinator,
found with FindCoordinator and found again while it moves or loads."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64

from ..common import ToolError
from ..wire_client import RETRIABLE, ApiError, KafkaCluster, Node, by_topic

TopicPartition = tuple[str, int]
OUTSIDE_GENERATION = -1  # an OffsetCommit from outside the group (an admin's)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str  # Kafka's name: Stable, Empty, PreparingRebalance, Reconciling, ...
    group_type: str = "classic"  # classic, consumer (KIP-848), share, streams


@dataclass(frozen=True)
class ConsumerMemberDescription:
    """A member of a consumer group (KIP-848), partitions by topic name."""

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    member_epoch: int
    assignment: tuple[TopicPartition, ...]
    target_assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ConsumerGroupDescription:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberDescription, ...]
    coordinator: Node


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: bytes  # the consumer protocol's Assignment, for a "consumer" group


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str  # the assignor of a consumer group
    members: tuple[MemberDescription, ...]
    coordinator: Node


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    leader_epoch: int  # -1: unknown


def list_groups(
    cluster: KafkaCluster, states: Iterable[str] = (), with_types: bool = False
) -> tuple[list[GroupListing], list[str]]:
    """The groups every broker coordinates (only those in `states`, if given), and why
    each broker that could not list its own failed. `with_types` asks with v5 (Kafka
    3.7+), which names each group's type; v4 leaves it "classic"."""
    from kio.schema.list_groups.v4.request import ListGroupsRequest as ListGroupsV4
    from kio.schema.list_groups.v5.request import ListGroupsRequest as ListGroupsV5

    request: Any = (
        ListGroupsV5(states_filter=tuple(states), types_filter=())
        if with_types
        else ListGroupsV4(states_filter=tuple(states))
    )

    def listed(node: Node) -> Any:
        response = cluster.request(node, request)
        if response.error_code != ErrorCode.none:
            raise ApiError(response.error_code)
        return response

    listings: dict[str, GroupListing] = {}
    failures: list[str] = []
    for _, node in sorted(cluster.metadata(topics=()).brokers.items()):
        try:
            response = cluster.retrying(functools.partial(listed, node))
        except ToolError as exc:
            failures.append(str(exc))
            continue
        for group in response.groups:
            listings[group.group_id] = GroupListing(
                group.group_id,
                group.protocol_type,
                group.group_state,
                getattr(group, "group_type", "classic"),
            )
    return sorted(listings.values(), key=lambda listing: listing.group_id), failures


def describe_group(cluster: KafkaCluster, group_id: str) -> GroupDescription:
    """One group at its coordinator; its `error` is the group's (GROUP_ID_NOT_FOUND, ...),
    and a group the coordinator does not know is described as Dead, as Kafka does."""
    from kio.schema.describe_groups.v4.request import DescribeGroupsRequest

    node, response = cluster.at_coordinator(
        group_id,
        DescribeGroupsRequest(groups=(GroupId(group_id),), include_authorized_operations=False),
        lambda answer: answer.groups[0].error_code if answer.groups else ErrorCode.none,
    )
    (group,) = response.groups
    return GroupDescription(
        group_id=group.group_id,
        error=group.error_code,
        state=group.group_state,
        protocol_type=group.protocol_type,
        protocol=group.protocol_data,
        members=tuple(
            MemberDescription(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_assignment
            )
            for m in group.members
        ),
        coordinator=node,
    )


def consumer_group_describe(
    cluster: KafkaCluster, group_id: str
) -> ConsumerGroupDescription | None:
    """A consumer group of Kafka 4's protocol at its coordinator, or None when the group
    is not one (GROUP_ID_NOT_FOUND: a classic group, or none)."""
    from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest

    node, response = cluster.at_coordinator(
        group_id,
        ConsumerGroupDescribeRequest(
            group_ids=(GroupId(group_id),), include_authorized_operations=False
        ),
        lambda answer: answer.groups[0].error_code if answer.groups else ErrorCode.none,
    )
    (group,) = response.groups
    if group.error_code == ErrorCode.group_id_not_found:
        return None
    if group.error_code != ErrorCode.none:
        raise ApiError(group.error_code)

    def partitions(assignment: Any) -> tuple[TopicPartition, ...]:
        return tuple(
            sorted(
                (topic.topic_name, index)
                for topic in assignment.topic_partitions
                for index in topic.partitions
            )
        )

    return ConsumerGroupDescription(
        group_id=group.group_id,
        state=group.group_state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.assignor_name,
        members=tuple(
            ConsumerMemberDescription(
                member_id=m.member_id,
                instance_id=m.instance_id,
                client_id=m.client_id,
                host=m.client_host,
                member_epoch=m.member_epoch,
                assignment=partitions(m.assignment),
                target_assignment=partitions(m.target_assignment),
            )
            for m in group.members
        ),
        coordinator=node,
    )


def offset_fetch(cluster: KafkaCluster, group_id: str) -> dict[TopicPartition, CommittedOffset]:
    """Every committed offset of the group (partitions without one left out)."""
    from kio.schema.offset_fetch.v5.request import OffsetFetchRequest

    _, response = cluster.at_coordinator(
        group_id, OffsetFetchRequest(group_id=GroupId(group_id), topics=None)
    )
    if response.error_code != ErrorCode.none:
        raise ApiError(response.error_code)
    return {
        (topic.name, p.partition_index): CommittedOffset(
            p.committed_offset, p.committed_leader_epoch
        )
        for topic in response.topics
        for p in topic.partitions
        if p.error_code == ErrorCode.none and p.committed_offset >= 0
    }


def offset_commit(
    cluster: KafkaCluster, group_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, ErrorCode]:
    """Commit `offsets` as an outside client (generation -1, no member id), which the
    coordinator accepts only while the group has no members; each partition's error."""
    from kio.schema.offset_commit.v5 import request as commit5

    request = commit5.OffsetCommitRequest(
        group_id=GroupId(group_id),
        generation_id_or_member_epoch=i32(OUTSIDE_GENERATION),
        member_id="",
        topics=tuple(
            commit5.OffsetCommitRequestTopic(
                name=TopicName(topic),
                partitions=tuple(
                    commit5.OffsetCommitRequestPartition(
                        partition_index=i32(index),
                        committed_offset=i64(offsets[(topic, index)]),
                        committed_metadata="",
                    )
                    for index in indexes
                ),
            )
            for topic, indexes in by_topic(offsets).items()
        ),
    )

    def first_error(response: Any) -> ErrorCode:
        codes = [p.error_code for t in response.topics for p in t.partitions]
        return next((code for code in codes if code in RETRIABLE), ErrorCode.none)

    _, response = cluster.at_coordinator(group_id, request, first_error)
    return {
        (topic.name, p.partition_index): p.error_code
        for topic in response.topics
        for p in topic.partitions
    }


def delete_groups(cluster: KafkaCluster, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
    """Delete each group at its coordinator: each one's error."""
    from kio.schema.delete_groups.v1.request import DeleteGroupsRequest

    results: dict[str, ErrorCode] = {}
    for group_id in dict.fromkeys(group_ids):
        _, response = cluster.at_coordinator(
            group_id,
            DeleteGroupsRequest(groups_names=(GroupId(group_id),)),
            lambda answer: answer.results[0].error_code if answer.results else ErrorCode.none,
        )
        for result in response.results:
            results[result.group_id] = result.error_code
    return results


def offset_delete(
    cluster: KafkaCluster, group_id: str, partitions: Iterable[TopicPartition]
) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
    """Delete the group's committed offsets of `partitions`: the group-level error and one
    per partition."""
    from kio.schema.offset_delete.v0 import request as delete0

    request = delete0.OffsetDeleteRequest(
        group_id=GroupId(group_id),
        topics=tuple(
            delete0.OffsetDeleteRequestTopic(
                name=TopicName(topic),
                partitions=tuple(
                    delete0.OffsetDeleteRequestPartition(partition_index=i32(index))
                    for index in indexes
                ),
            )
            for topic, indexes in by_topic(partitions).items()
        ),
    )
    try:
        _, response = cluster.at_coordinator(group_id, request)
    except ApiError as exc:  # the coordinator could not be found, or stayed busy
        return exc.code, {}
    if response.error_code != ErrorCode.none:
        return response.error_code, {}
    return ErrorCode.none, {
        (topic.name, p.partition_index): p.error_code
        for topic in response.topics
        for p in topic.partitions
    }
