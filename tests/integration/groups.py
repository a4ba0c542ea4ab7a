"""Helpers of the consumer-group tests, shared by every client's file: the group as the
broker sees it, members in processes of their own (to SIGKILL), and waiting."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kio.index import load_request_schema

from brook.broker.groups.consumer_protocol import assigned_partitions
from brook.protocol import consumer_group_records as cgr
from brook.protocol import coordinator_records as cr
from brook.protocol.api_table import ApiKey
from brook.protocol.record_batch import iter_records

from .clients import produce
from .raw_client import RawClient

T = TypeVar("T")

MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")


@dataclass
class GroupView:
    """DescribeGroups as the broker answers it."""

    state: str
    protocol: str
    # client id -> the partitions the broker holds as that member's assignment
    members: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    member_ids: dict[str, str] = field(default_factory=dict)  # client id -> member id
    instance_ids: dict[str, str | None] = field(default_factory=dict)


def broker_view(port: int, group: str) -> GroupView:
    """DescribeGroups' answer; for a consumer group (KIP-848), which DescribeGroups
    describes as Dead, ConsumerGroupDescribe's, its assignor as the protocol."""
    request_type = load_request_schema(ApiKey.DESCRIBE_GROUPS, 5)
    with RawClient(port) as client:
        response = client.request(
            request_type(groups=(group,), include_authorized_operations=False)
        )
    [described] = response.groups
    if described.group_state == "Dead":
        consumer_view = consumer_group_view(port, group)
        if consumer_view is not None:
            return consumer_view
    view = GroupView(described.group_state, described.protocol_data)
    for member in described.members:
        view.members[member.client_id] = {
            (topic, partition)
            for topic, partitions in assigned_partitions(member.member_assignment).items()
            for partition in partitions
        }
        view.member_ids[member.client_id] = member.member_id
        view.instance_ids[member.client_id] = member.group_instance_id
    return view


def consumer_group_view(port: int, group: str) -> GroupView | None:
    """ConsumerGroupDescribe's answer as a GroupView, or None for no consumer group."""
    request_type = load_request_schema(ApiKey.CONSUMER_GROUP_DESCRIBE, 1)
    with RawClient(port) as client:
        response = client.request(
            request_type(group_ids=(group,), include_authorized_operations=False)
        )
    [described] = response.groups
    if described.error_code:
        return None
    view = GroupView(described.group_state, described.assignor_name)
    for member in described.members:
        view.members[member.client_id] = {
            (topic.topic_name, partition)
            for topic in member.assignment.topic_partitions
            for partition in topic.partitions
        }
        view.member_ids[member.client_id] = member.member_id
        view.instance_ids[member.client_id] = member.instance_id
    return view


def broker_committed(port: int, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The group's committed (offset, metadata) per partition, as OffsetFetch answers."""
    request_type = load_request_schema(ApiKey.OFFSET_FETCH, 7)
    with RawClient(port) as client:
        response = client.request(request_type(group_id=group, topics=None, require_stable=False))
    assert response.error_code == 0, response.error_code
    return {
        (topic.name, p.partition_index): (p.committed_offset, p.metadata)
        for topic in response.topics
        for p in topic.partitions
        if p.error_code == 0 and p.committed_offset >= 0
    }


def generation(brook_broker: Any, group: str) -> int:
    """The group's generation (a consumer group's epoch) as the coordinator of an
    in-process broker holds it."""

    def read() -> int:
        groups = brook_broker.broker.groups
        consumer_group = groups.consumer_group(group)
        if consumer_group is not None:
            return int(consumer_group.group_epoch)
        return int(groups.groups[group].generation_id)

    return int(brook_broker.call(read))


def stored_generation(data_dir: Path, group: str) -> int:
    """The generation of the group's last GroupMetadata record in __consumer_offsets (a
    consumer group's last epoch record), what a restarted coordinator loads, read from the
    segment files."""
    partition = cr.group_partition(group, 50)
    generation = -1
    for segment in sorted((data_dir / f"__consumer_offsets-{partition}").glob("*.log")):
        for record in iter_records(segment.read_bytes()):
            key = cr.decode_key(record.key)
            if isinstance(key, cr.GroupMetadataKey) and key.group == group:
                value = cr.decode_value(key, record.value)
                if isinstance(value, cr.GroupMetadataValue):
                    generation = value.generation
            elif isinstance(key, cr.UnknownRecord) and key.version in cgr.RECORD_TYPES:
                # A consumer group's (KIP-848) epoch record.
                decoded = cgr.decode(key.version, record.key, record.value)
                if (
                    decoded is not None
                    and isinstance(decoded[1], cgr.ConsumerGroupMetadataValue)
                    and decoded[0].group_id == group
                ):
                    generation = decoded[1].epoch
    return generation


def split_evenly(owned: list[set[Any]], total: int) -> bool:
    """Every partition owned by exactly one of the members, as evenly as can be."""
    union = set().union(*owned)
    sizes = sorted(len(partitions) for partitions in owned)
    return (
        len(union) == total == sum(sizes)
        and sizes[-1] - sizes[0] <= 1
        and all(size > 0 for size in sizes)
    )


def produce_spread(
    bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = ""
) -> list[bytes]:
    """`per_partition` records into each partition; returns every value sent."""
    values = []
    for partition in range(partitions):
        batch = [(None, f"{tag}{partition}-{i}".encode()) for i in range(per_partition)]
        produce(bootstrap, topic, batch, partition=partition)
        values += [value for _, value in batch]
    return values


class MemberProcess:
    """A group member in its own process (group_member.py), reporting its assignments."""

    def __init__(self, client: str, config: dict[str, Any], topics: list[str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), client, json.dumps(config), *topics],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.assignments: list[set[tuple[str, int]]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.assignments.append({(topic, p) for topic, p in json.loads(line)})

    @property
    def assignment(self) -> set[tuple[str, int]]:
        return self.assignments[-1] if self.assignments else set()

    def kill(self) -> None:
        """SIGKILL: the member vanishes without a word to the broker."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def __enter__(self) -> MemberProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
