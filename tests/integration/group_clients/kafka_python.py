"""kafka-python behind the group scenarios' interface.

kafka-python (3.0.12) joins inside poll(), and mishandles a join that completes after the
poll that started it timed out: it joins again, or, for a leader that rejoined because
the topics changed, never applies the assignment nor heartbeats again. So each member
polls in a thread of its own, with polls far longer than a join takes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import kafka.errors
from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, OffsetSpec
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.structs import OffsetAndMetadata
from kio.schema.errors import ErrorCode

from ..groups import MemberProcess
from .base import (
    TP,
    Described,
    GroupAdmin,
    GroupMember,
    JoinOptions,
    Received,
    ThreadClient,
    ThreadMember,
)

SESSION_MS = 1500
POLL_MS = 500


def python_client_settings(
    bootstrap: str, group: str, client_id: str, options: JoinOptions
) -> dict[str, Any]:
    """Group consumer settings of kafka-python and aiokafka (they share the names): short
    timeouts so rebalances and expiries happen within a test, commits by hand."""
    config: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "client_id": client_id,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": options.session_ms or SESSION_MS,
        "heartbeat_interval_ms": 100,
        "fetch_max_wait_ms": 50,
        "request_timeout_ms": 15_000,
    }
    if options.instance_id is not None:
        config["group_instance_id"] = options.instance_id
    if options.metadata_refresh_ms is not None:
        config["metadata_max_age_ms"] = options.metadata_refresh_ms
    if options.max_poll_records is not None:
        config["max_poll_records"] = options.max_poll_records
    return config


def tps(partitions: Any) -> set[TP]:
    return {(tp.topic, tp.partition) for tp in partitions}


class Recorder(ConsumerRebalanceListener):
    """Records the rebalance callbacks as the member's events."""

    def __init__(self, member: GroupMember) -> None:
        self.member = member

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.member.events.append(("revoke", tps(revoked)))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.member.events.append(("assign", tps(assigned)))


class KafkaPythonMember(ThreadMember):
    def __init__(self, config: dict[str, Any], client_id: str, options: JoinOptions) -> None:
        super().__init__(client_id)
        self.commit_each = options.commit_each
        self.consumer = KafkaConsumer(**config)
        if options.pattern is not None:
            self.consumer.subscribe(pattern=options.pattern, listener=Recorder(self))
        else:
            self.consumer.subscribe(topics=list(options.topics), listener=Recorder(self))
        self._thread.start()

    def _poll(self) -> None:
        try:
            polled = self.consumer.poll(timeout_ms=POLL_MS)
            for tp, records in polled.items():
                for record in records:
                    self.received.append(
                        Received(record.topic, record.partition, record.offset, record.value)
                    )
                    if self.commit_each:  # after processing, record by record
                        self.consumer.commit({tp: OffsetAndMetadata(record.offset + 1, "", -1)})
            # timeout_ms=0: the positions known, without waiting on the coordinator
            owned = self.consumer.assignment()
            positions = {tp: self.consumer.position(tp, timeout_ms=0) for tp in owned}
        except kafka.errors.KafkaConnectionError:
            return  # the broker is away for a while (restarting): poll on, as applications do
        self._positions = {
            (tp.topic, tp.partition): offset
            for tp, offset in positions.items()
            if offset is not None
        }

    def _owned(self) -> set[TP]:
        return tps(self.consumer.assignment())

    def _close(self) -> None:
        self.consumer.close(autocommit=False)

    def commit(self, offsets: Mapping[TP, tuple[int, str]]) -> None:
        listed = {
            TopicPartition(t, p): OffsetAndMetadata(o, m, -1) for (t, p), (o, m) in offsets.items()
        }
        self.call(lambda: self.consumer.commit(listed))

    def committed(self, partitions: list[TP]) -> dict[TP, int]:
        return self.call(
            lambda: {(t, p): self.consumer.committed(TopicPartition(t, p)) for t, p in partitions}
        )


class KafkaPythonAdmin(GroupAdmin):
    def __init__(self, bootstrap: str) -> None:
        self.admin = KafkaAdminClient(bootstrap_servers=bootstrap)

    def list_groups(self, states: set[str] | None = None) -> list[str]:
        listed = self.admin.list_groups(states_filter=None if states is None else sorted(states))
        assert all(g["protocol_type"] == "consumer" for g in listed), listed
        return sorted(g["group_id"] for g in listed)

    def describe(self, group: str) -> Described:
        described = self.admin.describe_groups([group])[group]
        return Described(
            described["group_state"],
            described["protocol_type"],
            described["protocol_data"],
            {
                m["client_id"]: {
                    (t["topic"], p)
                    for t in m["member_assignment"]["assigned_partitions"]
                    for p in t["partitions"]
                }
                for m in described["members"]
            },
            {m["member_id"] for m in described["members"]},
        )

    def committed(self, group: str) -> dict[TP, tuple[int, str]]:
        offsets = self.admin.list_group_offsets({group: None})[group]
        return {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()}

    def end_offsets(self, partitions: list[TP]) -> dict[TP, int]:
        specs = {TopicPartition(t, p): OffsetSpec.LATEST for t, p in partitions}
        found = self.admin.list_partition_offsets(specs)
        return {(tp.topic, tp.partition): o.offset for tp, o in found.items()}

    def delete(self, group: str) -> ErrorCode:
        # kafka-python answers with the name of its error class, or "OK".
        outcome = self.admin.delete_groups([group])[group]
        return (
            ErrorCode.none if outcome == "OK" else ErrorCode(getattr(kafka.errors, outcome).errno)
        )

    def close(self) -> None:
        self.admin.close()


class KafkaPythonClient(ThreadClient):
    name = "kafka-python"
    default_protocol = "range"  # partition_assignment_strategy: range, roundrobin
    session_ms = SESSION_MS
    lacks: dict[str, str] = {}

    def _join(
        self, bootstrap: str, group: str, client_id: str, options: JoinOptions
    ) -> KafkaPythonMember:
        config = python_client_settings(bootstrap, group, client_id, options)
        if options.cooperative:
            config["partition_assignment_strategy"] = [CooperativeStickyAssignor]
        return KafkaPythonMember(config, client_id, options)

    def killable(self, bootstrap: str, group: str, client_id: str, topic: str) -> MemberProcess:
        config = python_client_settings(bootstrap, group, client_id, JoinOptions())
        return MemberProcess("kafka-python", config, [topic])

    @contextmanager
    def admin(self, bootstrap: str) -> Iterator[KafkaPythonAdmin]:
        admin = KafkaPythonAdmin(bootstrap)
        try:
            yield admin
        finally:
            admin.close()
