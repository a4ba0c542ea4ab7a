"""Committed offsets and group metadata in `__consumer_offsets`, in Kafka's schemas.

The topic is created on first use (FindCoordinator), as Kafka does; a group maps to
partition abs(hashCode(group id)) % offsets.topic.num.partitions, so that the records
are where Kafka's tools expect them. On start the coordinator replays every partition:
the last record of a key wins, and a null value (tombstone) deletes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from brook.protocol import coordinator_records as cr
from brook.protocol.record_batch import Record, build_batch, decode_records, split_batches
from brook.storage.clock import Clock
from brook.storage.log_validator import AppendOrigin

from .group import CommittedOffset, Group, GroupState, Member

if TYPE_CHECKING:
    from ..config import BrokerConfig
    from ..controller import Controller
    from ..metadata.cache import MetadataCache
    from ..replica_manager import ReplicaManager

log = logging.getLogger("brook.groups.offsets")

OFFSETS_TOPIC = "__consumer_offsets"
READ_CHUNK_BYTES = 8 * 1024 * 1024


class OffsetsStore:
    def __init__(
        self,
        metadata: MetadataCache,
        replicas: ReplicaManager,
        controller: Controller,
        config: Callable[[], BrokerConfig],
        clock: Clock,
    ) -> None:
        self._metadata = metadata
        self._replicas = replicas
        self._controller = controller
        self._config = config
        self._clock = clock

    @property
    def num_partitions(self) -> int:
        topic = self._metadata.get(OFFSETS_TOPIC)
        if topic is not None:
            return len(topic.partitions)
        return int(self._config()["offsets.topic.num.partitions"])

    def partition_for(self, group_id: str) -> int:
        return cr.group_partition(group_id, self.num_partitions)

    def ensure_topic(self) -> None:
        """Create `__consumer_offsets` the first time a client looks for a coordinator."""
        if self._metadata.get(OFFSETS_TOPIC) is not None:
            return
        config = self._config()
        self._controller.create(
            OFFSETS_TOPIC,
            config["offsets.topic.num.partitions"],
            config["offsets.topic.replication.factor"],
            {
                "cleanup.policy": "compact",
                "compression.type": "producer",
                "segment.bytes": str(config["offsets.topic.segment.bytes"]),
            },
            internal=True,
        )

    # --- writing ----------------------------------------------------------------------

    def _append(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> None:
        self.ensure_topic()
        partition = self._replicas.partition(OFFSETS_TOPIC, self.partition_for(group_id))
        now = self._clock()
        records = [Record(i, now, key, value) for i, (key, value) in enumerate(entries)]
        partition.append_records_as_leader(
            build_batch(records), AppendOrigin.COORDINATOR, required_acks=1, now_ms=now
        )

    def write_offsets(self, group: Group, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        self._append(
            group.group_id,
            [
                (
                    cr.encode_key(cr.OffsetCommitKey(group.group_id, topic, partition)),
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
                for (topic, partition), committed in offsets.items()
            ],
        )

    def write_group(self, group: Group) -> None:
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
                assignment=member.assignment,
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
        self._append(
            group.group_id,
            [(cr.encode_key(cr.GroupMetadataKey(group.group_id)), cr.encode_value(value))],
        )

    def delete_offsets(self, group: Group, keys: Iterable[tuple[str, int]]) -> None:
        self._append(
            group.group_id,
            [
                (cr.encode_key(cr.OffsetCommitKey(group.group_id, topic, partition)), None)
                for topic, partition in keys
            ],
        )

    def delete_group(self, group: Group) -> None:
        tombstones: list[tuple[bytes, bytes | None]] = [
            (cr.encode_key(cr.OffsetCommitKey(group.group_id, topic, partition)), None)
            for topic, partition in group.offsets
        ]
        tombstones.append((cr.encode_key(cr.GroupMetadataKey(group.group_id)), None))
        self._append(group.group_id, tombstones)

    # --- loading ----------------------------------------------------------------------

    def load(self) -> Iterator[tuple[str, Any, dict[tuple[str, int], CommittedOffset]]]:
        """Every group found in `__consumer_offsets`: (id, metadata or None, offsets)."""
        if self._metadata.get(OFFSETS_TOPIC) is None:
            return
        metadata: dict[str, Any] = {}
        offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        for partition in self._replicas.partitions_of(OFFSETS_TOPIC):
            for key_bytes, value_bytes in self._records(partition.log):
                key = cr.decode_key(key_bytes)
                if isinstance(key, cr.OffsetCommitKey):
                    group_offsets = offsets.setdefault(key.group, {})
                    value = cr.decode_value(key, value_bytes)
                    if isinstance(value, cr.UnknownValue):
                        log.warning(
                            "Skipping an offset commit of group %s in a value version"
                            " %d this broker does not know",
                            key.group,
                            value.version,
                        )
                    elif value is None:
                        group_offsets.pop((key.topic, key.partition), None)
                    else:
                        group_offsets[(key.topic, key.partition)] = CommittedOffset(
                            value.offset,
                            value.leader_epoch,
                            value.metadata,
                            value.commit_timestamp,
                            value.expire_timestamp,
                        )
                elif isinstance(key, cr.GroupMetadataKey):
                    value = cr.decode_value(key, value_bytes)
                    if isinstance(value, cr.UnknownValue):
                        log.warning(
                            "Skipping metadata of group %s in a value version %d this"
                            " broker does not know",
                            key.group,
                            value.version,
                        )
                    else:
                        metadata[key.group] = value
        for group_id in sorted(set(metadata) | set(offsets)):
            value = metadata.get(group_id)
            if value is None and not offsets.get(group_id):
                continue  # deleted
            yield group_id, value, offsets.get(group_id, {})

    @staticmethod
    def _records(log_: Any) -> Iterator[tuple[bytes, bytes | None]]:
        offset = log_.log_start_offset
        while offset < log_.log_end_offset:
            data = log_.read(offset, READ_CHUNK_BYTES, max_offset=None, min_one_message=True)
            records = bytes(data.records)
            batches = split_batches(records, allow_partial_tail=True)
            if not batches:
                break
            for header in batches:
                if not header.is_control:
                    for record in decode_records(records, header):
                        if record.key is not None:
                            yield record.key, record.value
                offset = header.next_offset

    def restore_group(self, group: Group, value: Any) -> None:
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
            )
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.transition(
            GroupState.STABLE if group.members else GroupState.EMPTY,
            value.current_state_timestamp if value.current_state_timestamp > 0 else self._clock(),
        )
