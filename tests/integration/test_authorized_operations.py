"""Authorized operations, asked for by clients as Kafka's tools ask (kafka-topics.sh
--describe, kafka-consumer-groups.sh --describe, AdminClient.describeCluster): with no
authorizer, Kafka allows every operation a resource type supports, and Brook answers the
same bitfields; not asked for, the field stays "not provided".
"""

from __future__ import annotations

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient
from kafka import KafkaAdminClient

from .clients import create_topic

TOPIC_OPERATIONS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
GROUP_OPERATIONS = {
    AclOperation.READ,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPERATIONS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


def test_topic_and_cluster_operations_through_metadata(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": brook_broker.bootstrap})
    topics = TopicCollection([topic_name])
    described = admin.describe_topics(topics, include_authorized_operations=True)
    topic = described[topic_name].result(15)
    assert set(topic.authorized_operations) == TOPIC_OPERATIONS
    cluster = admin.describe_cluster(include_authorized_operations=True).result(15)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    # Not asked for: none given (Kafka's Int.MinValue, which the client reads as None).
    plain = admin.describe_topics(topics)[topic_name].result(15)
    assert plain.authorized_operations is None
    assert admin.describe_cluster().result(15).authorized_operations is None


def test_group_operations_through_describe_groups(brook_broker, topic_name):
    admin = AdminClient({"bootstrap.servers": brook_broker.bootstrap})
    described = admin.describe_consumer_groups(
        ["no-such-group"], include_authorized_operations=True
    )
    group = described["no-such-group"].result(15)
    assert set(group.authorized_operations) == GROUP_OPERATIONS
    plain = admin.describe_consumer_groups(["no-such-group"])["no-such-group"].result(15)
    assert plain.authorized_operations is None


def test_group_operations_as_kafka_python_reads_them(brook_broker):
    """kafka-python asks with DescribeGroups v3+ and names each operation of the bitfield."""
    admin = KafkaAdminClient(bootstrap_servers=brook_broker.bootstrap)
    try:
        described = admin.describe_groups(["g"], include_authorized_operations=True)
    finally:
        admin.close()
    assert set(described["g"]["authorized_operations"]) == {op.name for op in GROUP_OPERATIONS}
