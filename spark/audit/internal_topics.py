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

The records are decoded by brook.protocol.coordinator_records (the broker's own
schemas). A record that does not parse becomes a finding, and the replay goes on.
"""

from __future__ import annotations

from typing import Any

from brook.protocol.coordinator_records import (
    CONSUMER_OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    CoordinatorRecordError,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    TransactionLogKey,
    TransactionLogValue,
    TransactionStatus,
    UnknownRecord,
    decode_key,
    decode_value,
)
from brook.protocol.errors import CorruptRecordError, InvalidRecordError
from brook.storage.end_transaction_marker import COMMIT, read_end_txn_marker
from brook.storage.reader import Batch

from .findings import FindingLimiter

INTERNAL_TOPICS = (CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)
NO_PRODUCER_ID = -1

Row = dict[str, Any]


class CoordinatorReplay:
    """One partition of an internal topic, fed its valid batches in log order."""

    def __init__(self, topic: str, partition: int, found: FindingLimiter) -> None:
        self.topic = topic
        self.partition = partition
        self.found = found
        self.offsets: dict[OffsetCommitKey, tuple[OffsetCommitValue, int]] = {}
        self.groups: dict[str, tuple[GroupMetadataValue, int]] = {}
        self.transactions: dict[str, tuple[TransactionLogValue, int]] = {}
        # Transactional offset commits waiting for their producer's marker.
        self.pending: dict[int, dict[OffsetCommitKey, tuple[OffsetCommitValue | None, int]]] = {}
        self.other_records = 0  # record types this replay does not decode

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
                key = decode_key(record.key, self.topic)
                value = decode_value(key, record.value)
            except CoordinatorRecordError as exc:
                self._undecodable(record.offset, segment, batch, str(exc))
                continue
            self._apply(key, value, record.offset, header.producer_id, header.is_transactional)

    def _undecodable(self, offset: int, segment: int, batch: Batch, reason: str) -> None:
        self.found.add(
            "undecodable_coordinator_record",
            f"the {self.topic} record at offset {offset} does not decode: {reason}",
            segment=segment,
            position=batch.position,
            offset=offset,
        )

    def _apply(
        self, key: Any, value: Any, offset: int, producer_id: int, transactional: bool
    ) -> None:
        if isinstance(key, OffsetCommitKey):
            if value is not None and not isinstance(value, OffsetCommitValue):
                self.other_records += 1  # a value version newer than the schemas known
            elif transactional and producer_id != NO_PRODUCER_ID:
                self.pending.setdefault(producer_id, {})[key] = (value, offset)
            else:
                self._commit_offset(key, value, offset)
        elif isinstance(key, GroupMetadataKey):
            if value is None:
                self.groups.pop(key.group, None)
            elif isinstance(value, GroupMetadataValue):
                self.groups[key.group] = (value, offset)
            else:
                self.other_records += 1
        elif isinstance(key, TransactionLogKey):
            if value is None:
                self.transactions.pop(key.transactional_id, None)
            elif isinstance(value, TransactionLogValue):
                self.transactions[key.transactional_id] = (value, offset)
            else:
                self.other_records += 1
        elif isinstance(key, UnknownRecord):
            self.other_records += 1

    def _commit_offset(
        self, key: OffsetCommitKey, value: OffsetCommitValue | None, offset: int
    ) -> None:
        if value is None:
            self.offsets.pop(key, None)
        else:
            self.offsets[key] = (value, offset)

    def _marker(self, batch: Batch) -> None:
        try:
            marker = read_end_txn_marker(batch.data, batch.header)
        except (CorruptRecordError, InvalidRecordError):
            return  # the integrity checks report it
        if marker is None:
            return
        waiting = self.pending.pop(batch.header.producer_id, {})
        if marker.control_type == COMMIT:
            for key, (value, offset) in waiting.items():
                self._commit_offset(key, value, offset)

    # --- the tables ----------------------------------------------------------------

    def offset_rows(self) -> list[Row]:
        rows = [
            _offset_row(key, value, offset, self.partition, None)
            for key, (value, offset) in self.offsets.items()
        ]
        for producer_id, waiting in self.pending.items():
            for key, (pending_value, offset) in waiting.items():
                if pending_value is not None:
                    rows.append(
                        _offset_row(key, pending_value, offset, self.partition, producer_id)
                    )
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
                "producer_id": value.producer_id,
                "producer_epoch": value.producer_epoch,
                "status": _status_name(value.transaction_status),
                "timeout_ms": value.transaction_timeout_ms,
                "partitions": [
                    f"{topic.topic}-{number}"
                    for topic in value.transaction_partitions or []
                    for number in topic.partition_ids
                ],
                "last_update_timestamp": _time(value.transaction_last_update_timestamp_ms),
                "start_timestamp": _time(value.transaction_start_timestamp_ms),
                "coordinator_partition": self.partition,
                "log_offset": offset,
            }
            for transactional_id, (value, offset) in self.transactions.items()
        ]


def _time(millis: int) -> int | None:
    """Milliseconds since the epoch, None for Kafka's -1."""
    return None if millis < 0 else millis


def _status_name(status: int) -> str:
    try:
        return TransactionStatus(status).name
    except ValueError:
        return f"UNKNOWN({status})"


def _offset_row(
    key: OffsetCommitKey,
    value: OffsetCommitValue,
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
