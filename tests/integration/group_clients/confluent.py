"""confluent-kafka (librdkafka) behind the group scenarios' interface."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec
from kio.schema.errors import ErrorCode

from ..groups import MemberProcess
from .base import TP, Described, GroupAdmin, JoinOptions, Received, ThreadClient, ThreadMember

SESSION_MS = 1500

# librdkafka's names of the group states, and Kafka's.
STATES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
# Consumer errors that say the broker is away for a while, which the client rides out.
PASSING = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}


def settings(bootstrap: str, group: str, client_id: str, options: JoinOptions) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": options.session_ms or SESSION_MS,
        "heartbeat.interval.ms": 100,
        "fetch.wait.max.ms": 50,
        # An event at each partition's end: how a member knows it has read all there is.
        "enable.partition.eof": True,
    }
    if options.instance_id is not None:
        config["group.instance.id"] = options.instance_id
    if options.cooperative:
        config["partition.assignment.strategy"] = "cooperative-sticky"
    if options.metadata_refresh_ms is not None:
        config["topic.metadata.refresh.interval.ms"] = options.metadata_refresh_ms
    return config


def consumer_protocol_settings(
    bootstrap: str, group: str, client_id: str, options: JoinOptions
) -> dict[str, Any]:
    """The settings of a member of Kafka 4's consumer protocol (KIP-848): the session,
    the heartbeat and the assignor are the broker's (the tests' broker sets short ones),
    so the classic protocol's own settings are left out."""
    config = settings(bootstrap, group, client_id, options)
    for classic_only in ("session.timeout.ms", "heartbeat.interval.ms"):
        del config[classic_only]
    config.pop("partition.assignment.strategy", None)
    config["group.protocol"] = "consumer"
    return config


def partitions_of(partitions: list[TopicPartition]) -> set[TP]:
    return {(tp.topic, tp.partition) for tp in partitions}


class ConfluentMember(ThreadMember):
    def __init__(self, config: dict[str, Any], client_id: str, options: JoinOptions) -> None:
        super().__init__(client_id)
        self.commit_each = options.commit_each
        self.consumer = Consumer(config)
        # librdkafka takes a topic starting with ^ as a regex.
        topics = [options.pattern] if options.pattern is not None else list(options.topics)
        # Positions come from what arrived since a partition was assigned: a record, or
        # the end-of-partition event (whose offset is the end).
        self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked)
        self._thread.start()

    def _assigned(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalanced("assign", partitions_of(partitions))

    def _revoked(self, _: Consumer, partitions: list[TopicPartition]) -> None:
        self._rebalanced("revoke", partitions_of(partitions))

    def _rebalanced(self, kind: str, partitions: set[TP]) -> None:
        for tp in partitions:  # (re)assigned: it starts from its committed offset
            self._positions.pop(tp, None)
        self.events.append((kind, partitions))

    def _poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is None:
            return
        tp = (message.topic(), message.partition())
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                self._positions[tp] = message.offset()
            elif message.error().code() not in PASSING:
                raise KafkaException(message.error())
            return
        self.received.append(
            Received(message.topic(), message.partition(), message.offset(), message.value())
        )
        if self.commit_each:  # after processing: what is committed was processed
            self.consumer.commit(message=message, asynchronous=False)
        self._positions[tp] = message.offset() + 1

    def _owned(self) -> set[TP]:
        return partitions_of(self.consumer.assignment())

    def _close(self) -> None:
        self.consumer.close()

    def commit(self, offsets: Mapping[TP, tuple[int, str]]) -> None:
        listed = [TopicPartition(t, p, o, metadata=m) for (t, p), (o, m) in offsets.items()]
        self.call(lambda: self.consumer.commit(offsets=listed, asynchronous=False))

    def committed(self, partitions: list[TP]) -> dict[TP, int]:
        asked = [TopicPartition(t, p) for t, p in partitions]
        answer = self.call(lambda: self.consumer.committed(asked, timeout=10))
        return {(tp.topic, tp.partition): tp.offset for tp in answer}

    def member_id(self) -> str | None:
        return self.call(self.consumer.memberid)


class ConfluentAdmin(GroupAdmin):
    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def list_groups(self, states: set[str] | None = None) -> list[str]:
        asked = {} if states is None else {"states": {s for s in STATES if STATES[s] in states}}
        listed = self.admin.list_consumer_groups(**asked).result(15)
        assert not listed.errors, listed.errors
        return sorted(g.group_id for g in listed.valid)

    def describe(self, group: str) -> Described:
        described = self.admin.describe_consumer_groups([group])[group].result(15)
        return Described(
            STATES[described.state],
            # librdkafka tells only whether the protocol type is empty.
            "" if described.is_simple_consumer_group else "consumer",
            described.partition_assignor,
            {m.client_id: partitions_of(m.assignment.topic_partitions) for m in described.members},
            {m.member_id for m in described.members},
        )

    def committed(self, group: str) -> dict[TP, tuple[int, str]]:
        request = ConsumerGroupTopicPartitions(group)
        result = self.admin.list_consumer_group_offsets([request])[group].result(15)
        return {
            (tp.topic, tp.partition): (tp.offset, tp.metadata)
            for tp in result.topic_partitions
            if tp.offset >= 0
        }

    def end_offsets(self, partitions: list[TP]) -> dict[TP, int]:
        latest = self.admin.list_offsets(
            {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
        )
        return {(tp.topic, tp.partition): f.result(15).offset for tp, f in latest.items()}

    def delete(self, group: str) -> ErrorCode:
        try:
            self.admin.delete_consumer_groups([group])[group].result(15)
        except KafkaException as exc:
            return ErrorCode(exc.args[0].code())
        return ErrorCode.none


class ConfluentClient(ThreadClient):
    name = "confluent"
    default_protocol = "range"  # partition.assignment.strategy: range,roundrobin
    session_ms = SESSION_MS
    lacks: dict[str, str] = {}

    def _join(
        self, bootstrap: str, group: str, client_id: str, options: JoinOptions
    ) -> ConfluentMember:
        return ConfluentMember(settings(bootstrap, group, client_id, options), client_id, options)

    def killable(self, bootstrap: str, group: str, client_id: str, topic: str) -> MemberProcess:
        config = settings(bootstrap, group, client_id, JoinOptions())
        return MemberProcess("confluent", config, [topic])

    @contextmanager
    def admin(self, bootstrap: str) -> Iterator[ConfluentAdmin]:
        yield ConfluentAdmin(bootstrap)


class ConfluentConsumerProtocolClient(ConfluentClient):
    """confluent-kafka with group.protocol=consumer: Kafka 4's consumer group protocol
    (KIP-848), the assignment computed by the broker's assignor."""

    name = "confluent-kip848"
    default_protocol = "uniform"  # the broker's group.consumer.assignors, first
    cooperative_protocol = "uniform"  # the protocol's reassignment is incremental by itself

    def _join(
        self, bootstrap: str, group: str, client_id: str, options: JoinOptions
    ) -> ConfluentMember:
        config = consumer_protocol_settings(bootstrap, group, client_id, options)
        return ConfluentMember(config, client_id, options)

    def killable(self, bootstrap: str, group: str, client_id: str, topic: str) -> MemberProcess:
        config = consumer_protocol_settings(bootstrap, group, client_id, JoinOptions())
        return MemberProcess("confluent", config, [topic])
