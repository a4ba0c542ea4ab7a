"""`__consumer_offsets` and `__transaction_state` decoded as their coordinators load them.

A partition of either topic is replayed in offset order, as Kafka's group and
transaction coordinators replay it when they become its leader:

- `__consumer_offsets`: the last offset commit of each (group, topic, partition) and
  the last metadata of each classic group, a tombstone (null value) removing either.
  Offset commits inside a transaction (TxnOffsetCommit) wait for their producer's
  marker: a COMMIT applies them, an ABORT drops them, and those still waiting at the
  end are reported as pending. Record types of newer group protocols (KIP-848 and
  later) are counted, not decoded.
- `__transaction_state`: the last state of each transactional id.

The replay is the broker's own (brook.coordinator_state: the same rules, the same
schemas). A record that does not parse becomes a finding, and the replay goes on.
"""

from __future__ import annotations

from typing import Any

from brook.coordinator_state.consumer_offsets import ConsumerOffsetsReplay
from brook.coordinator_state.offsets import CommittedOffset
from brook.coordinator_state.transaction_log import TransactionLogReplay
from brook.protocol.consumer_group_records import ConsumerGroupKey, ConsumerGroupValue
from brook.protocol.coordinator_records import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorRecordError,
    GroupMetadataValue,
    Key,
    OffsetCommitKey,
)
from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.protocol.share_group_records import ShareGroupKey, ShareGroupValue
from brook.storage.end_transaction_marker import COMMIT, read_end_txn_marker
from brook.storage.reader import Batch

from .findings import FindingLimiter

INTERNAL_TOPICS = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)

Row = dict[str, Any]


class CoordinatorReplay:
    """One partition of an internal topic, fed its valid batches in log order, replayed
    by the coordinators' own rules (brook.coordinator_state)."""

    def __init__(self, topic: str, partition: int, found: FindingLimiter) -> None:
        self.topic = topic
        self.partition = partition
        self.found = found
        # What the replay left: each entry with the log offset of the record that made it.
        self.offsets: dict[OffsetCommitKey, tuple[CommittedOffset, int]] = {}
        self.groups: dict[str, tuple[GroupMetadataValue, int]] = {}
        self.other_records = 0  # record types or value versions this replay does not decode
        self._consumer_offsets = ConsumerOffsetsReplay(self)
        self._transaction_log = TransactionLogReplay(self.skipped)

    def batch(self, batch: Batch, segment: int) -> None:
        header = batch.header
        if header.is_control:
            self._marker(batch)
            return
        try:
            records = batch.records()
        except (CorruptRecordError, InvalidRecordError):
            return  # the integrity checks report it
        for record in records:
            if record.key is None:
                self._undecodable(record.offset, segment, batch, "a record with no key")
                continue
            try:
                if self.topic == TRANSACTION_STATE_TOPIC:
                    self._transaction_log.replay(record.offset, record.key, record.value)
                else:
                    self._consumer_offsets.replay(
                        record.offset, header.producer_id, record.key, record.value
                    )
            except CoordinatorRecordError as exc:
                self._undecodable(record.offset, segment, batch, str(exc))

    def _undecodable(self, offset: int, segment: int, batch: Batch, reason: str) -> None:
        self.found.add(
            "undecodable_coordinator_record",
            f"the {self.topic} record at offset {offset} does not decode: {reason}",
            segment=segment,
            position=batch.position,
            offset=offset,
        )

    def _marker(self, batch: Batch) -> None:
        try:
            marker = read_end_txn_marker(batch.data, batch.header)
        except (CorruptRecordError, InvalidRecordError):
            return  # the integrity checks report it
        if marker is None:
            return
        self._consumer_offsets.replay_end_transaction_marker(
            batch.header.producer_id, marker.control_type == COMMIT
        )

    # --- what the replay changes (ConsumerOffsetsState) --------------------------------

    def offset_changed(
        self, key: OffsetCommitKey, committed: CommittedOffset | None, offset: int
    ) -> None:
        if committed is None:
            self.offsets.pop(key, None)
        else:
            self.offsets[key] = (committed, offset)

    def group_changed(self, group: str, value: GroupMetadataValue | None, offset: int) -> None:
        if value is None:
            self.groups.pop(group, None)
        else:
            self.groups[group] = (value, offset)

    def consumer_group_changed(
        self, key: ConsumerGroupKey, value: ConsumerGroupValue | None, offset: int
    ) -> None:
        # Kafka 4's consumer groups: decoded, so known good, but not one of the tables.
        self.other_records += 1

    def share_group_changed(
        self, key: ShareGroupKey, value: ShareGroupValue | None, offset: int
    ) -> None:
        # Share groups (KIP-932): decoded, so known good, but not one of the tables.
        self.other_records += 1

    def skipped(self, offset: int, key: Key, value_version: int | None) -> None:
        self.other_records += 1

    # --- the tables ----------------------------------------------------------------

    def offset_rows(self) -> list[Row]:
        rows = [
            _offset_row(key, value, offset, self.partition, None)
            for key, (value, offset) in self.offsets.items()
        ]
        for producer_id, key, pending, offset in self._consumer_offsets.offsets.pending():
            if pending is not None:
                rows.append(_offset_row(key, pending, offset, self.partition, producer_id))
        return rows

    def group_rows(self) -> list[Row]:
        return [
            {
                "group": group,
                "protocol_type": value.protocol_type,
                "generation": value.generation,
                "protocol": value.protocol,
                "leader": value.leader,
                "members": len(value.members),
                "member_ids": [member.member_id for member in value.members],
                "client_ids": sorted({member.client_id for member in value.members}),
                "current_state_timestamp": _time(value.current_state_timestamp),
                "coordinator_partition": self.partition,
                "log_offset": offset,
            }
            for group, (value, offset) in self.groups.items()
        ]

    def transaction_rows(self) -> list[Row]:
        return [
            {
                "transactional_id": transactional_id,
                "producer_id": metadata.producer_id,
                "producer_epoch": metadata.producer_epoch,
                "status": metadata.state.name,
                "timeout_ms": metadata.txn_timeout_ms,
                "partitions": [
                    f"{topic}-{number}" for topic, number in sorted(metadata.partitions)
                ],
                "last_update_timestamp": _time(metadata.txn_last_update_timestamp),
                "start_timestamp": _time(metadata.txn_start_timestamp),
                "coordinator_partition": self.partition,
                "log_offset": self._transaction_log.record_offsets[transactional_id],
            }
            for transactional_id, metadata in self._transaction_log.transactions.items()
        ]


def _time(millis: int) -> int | None:
    """Milliseconds since the epoch, None for Kafka's -1."""
    return None if millis < 0 else millis


def _offset_row(
    key: OffsetCommitKey,
    value: CommittedOffset,
    offset: int,
    coordinator_partition: int,
    pending_producer_id: int | None,
) -> Row:
    return {
        "group": key.group,
        "topic": key.topic,
        "partition": key.partition,
        "committed_offset": value.offset,
        "leader_epoch": None if value.leader_epoch < 0 else value.leader_epoch,
        "metadata": value.metadata,
        "commit_timestamp": _time(value.commit_timestamp),
        "expire_timestamp": _time(value.expire_timestamp),
        # Set while the commit waits for its transaction's marker.
        "pending_producer_id": pending_producer_id,
        "coordinator_partition": coordinator_partition,
        "log_offset": offset,
    }
