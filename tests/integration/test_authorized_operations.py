"""Authorized operations, asked for by clients as Kafka's tools ask (kafka-topics.sh
--describe, kafka-consumer-groups.sh --describe, AdminClient.describeCluster): with no
authorizer, Kafka allows every operation a resource type supports, and Brook answers the
same bitfields; not asked for, the field stays "not provided".
"""

from __future__ import annotations

from confluent_kafka import Consumer, ConsumerGroupType, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient
from kafka import KafkaAdminClient

from brook.broker.testing import wait_until

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


def test_group_operations_of_a_consumer_group_through_consumer_group_describe(
    brook_broker, topic_name
):
    """A consumer group of Kafka 4's protocol (KIP-848): librdkafka describes it with
    ConsumerGroupDescribe, whose authorized operations are a group's."""
    create_topic(brook_broker.bootstrap, topic_name)
    consumer = Consumer(
        {
            "bootstrap.servers": brook_broker.bootstrap,
            "group.id": "kip848-ops",
            "group.protocol": "consumer",
        }
    )
    consumer.subscribe([topic_name])
    try:
        wait_until(lambda: consumer.poll(0.1) is None and bool(consumer.assignment()), "a member")
        admin = AdminClient({"bootstrap.servers": brook_broker.bootstrap})
        described = admin.describe_consumer_groups(
            ["kip848-ops"], include_authorized_operations=True
        )["kip848-ops"].result(15)
        assert described.type == ConsumerGroupType.CONSUMER
        assert set(described.authorized_operations) == GROUP_OPERATIONS
        plain = admin.describe_consumer_groups(["kip848-ops"])["kip848-ops"].result(15)
        assert plain.authorized_operations is None
    finally:
        consumer.close()


def test_group_operations_as_kafka_python_reads_them(brook_broker):
    """kafka-python asks with DescribeGroups v3+ and names each operation of the bitfield."""
    admin = KafkaAdminClient(bootstrap_servers=brook_broker.bootstrap)
    try:
        described = admin.describe_groups(["g"], include_authorized_operations=True)
    finally:
        admin.close()
    assert set(described["g"]["authorized_operations"]) == {op.name for op in GROUP_OPERATIONS}


def test_an_empty_topic_name_is_invalid_and_asked_operations_still_come(brook_broker):
    """Metadata names "" (a fuzzer found it crashed the handler): INVALID_TOPIC_EXCEPTION
    for that topic, the others answered, the operations given to each as asked."""
    from kio.schema.metadata.v10 import request as metadata10

    from brook.protocol.errors import ErrorCode

    from .raw_client import RawClient

    with RawClient(brook_broker.port) as client:
        response = client.request(
            metadata10.MetadataRequest(
                topics=(
                    metadata10.MetadataRequestTopic(topic_id=None, name=""),
                    metadata10.MetadataRequestTopic(topic_id=None, name="auto-made"),
                ),
                allow_auto_topic_creation=True,
                include_cluster_authorized_operations=True,
                include_topic_authorized_operations=True,
            )
        )
    empty, made = response.topics
    assert (empty.name, empty.error_code) == ("", ErrorCode.invalid_topic_exception)
    assert (made.name, made.error_code) == ("auto-made", ErrorCode.none)
    assert made.topic_authorized_operations == 3576 == empty.topic_authorized_operations
    assert response.cluster_authorized_operations == 8096
