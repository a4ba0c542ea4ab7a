"""A single broker (no ZooKeeper) answers the cluster's election APIs as Kafka's only broker
would: ElectLeaders finds nothing to elect (each partition has one replica, which leads),
UNKNOWN_TOPIC_OR_PARTITION for what does not exist; ControlledShutdown of itself has
nothing to move, of another broker id BROKER_NOT_AVAILABLE. Its own stop sends none."""

from __future__ import annotations

from confluent_kafka import ElectionType, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from brook.protocol.controlled_shutdown_schema import ControlledShutdownRequestV3
from brook.protocol.errors import ErrorCode

from .clients import create_topic
from .raw_client import RawClient


def test_elect_leaders_on_a_single_broker(brook_broker, topic_name):
    broker = brook_broker
    create_topic(broker.bootstrap, topic_name, partitions=2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    asked = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 5)]
    results = admin.elect_leaders(ElectionType.PREFERRED, asked).result(timeout=30)
    codes = {
        (tp.topic, tp.partition): error.code() if isinstance(error, KafkaError) else error
        for tp, error in results.items()
    }
    assert codes == {
        (topic_name, 0): KafkaError.ELECTION_NOT_NEEDED,
        (topic_name, 5): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }
    assert admin.elect_leaders(ElectionType.UNCLEAN, None).result(timeout=30) == {}


def test_controlled_shutdown_on_a_single_broker(brook_broker):
    own_id = brook_broker.broker.broker_id
    with RawClient(brook_broker.port) as client:
        own = client.request(ControlledShutdownRequestV3(broker_id=own_id))
        other = client.request(ControlledShutdownRequestV3(broker_id=own_id + 7))
    assert (own.error_code, own.remaining_partitions) == (ErrorCode.none, ())
    assert other.error_code == ErrorCode.broker_not_available
