"""AlterPartitionReassignments and ListPartitionReassignments on a single broker (no
ZooKeeper): every partition's only replica is this broker, so a move onto it is accepted
and changes nothing, anything else gets Kafka's per-partition errors, and nothing is ever
listed as moving."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from brook.protocol.errors import ErrorCode
from tests.cluster.reassign_requests import alter, ongoing


def test_single_broker_reassignments(brook_broker, topic_name):
    admin = AdminClient({"bootstrap.servers": brook_broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    own = brook_broker.config["broker.id"]
    top, results = alter(
        brook_broker.port,
        {
            (topic_name, 0): [own],
            (topic_name, 1): [own, own + 1],
            (topic_name, 5): [own],
            ("no-such-topic", 0): [own],
            (topic_name, 0 + 100): None,
        },
    )
    assert top == ErrorCode.none
    assert results == {
        (topic_name, 0): (ErrorCode.none, None),
        (topic_name, 1): (
            ErrorCode.invalid_replica_assignment,
            f"Replica assignment has brokers that are not alive. Replica list: List({own + 1}),"
            f" live broker list: Set({own})",
        ),
        (topic_name, 5): (ErrorCode.unknown_topic_or_partition, "The partition does not exist."),
        ("no-such-topic", 0): (
            ErrorCode.unknown_topic_or_partition,
            "The partition does not exist.",
        ),
        (topic_name, 100): (ErrorCode.no_reassignment_in_progress, None),
    }
    assert ongoing(brook_broker.port) == (ErrorCode.none, {})
    assert ongoing(brook_broker.port, [(topic_name, 0)]) == (ErrorCode.none, {})
    # Still serving, the partitions as they were.
    metadata = admin.list_topics(topic_name, timeout=10).topics[topic_name]
    assert {p: m.replicas for p, m in metadata.partitions.items()} == {0: [own], 1: [own]}
