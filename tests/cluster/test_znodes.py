"""Kafka's znode JSON, both ways: what Kafka brokers of each version wrote decodes, and
what Brook writes is what Kafka writes."""

from __future__ import annotations

import json

import pytest

from brook.broker.metadata.records import BrokerEndpoint, RegisterBrokerRecord
from brook.broker.zookeeper import znodes
from brook.broker.zookeeper.connect_string import parse_connect_string

# Kafka's documented examples (kafka.zk.BrokerIdZNode), one per registration version.
KAFKA_REGISTRATIONS = {
    1: b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}',
    2: b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
    b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"]}',
    3: b'{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
    b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"],"rack":"dc1"}',
    4: b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
    b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],'
    b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},"rack":"dc1"}',
    5: b'{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
    b'"endpoints":["CLIENT://host1:9092","REPLICATION://[::1]:9093"],'
    b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
    b'"rack":"dc1","features":{"feature":{"min_version":1,"max_version":3}}}',
}


def test_every_registration_version_kafka_wrote_decodes():
    assert znodes.decode_broker(7, KAFKA_REGISTRATIONS[1]) == RegisterBrokerRecord(
        7, (BrokerEndpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),)
    )
    assert znodes.decode_broker(7, KAFKA_REGISTRATIONS[2]) == RegisterBrokerRecord(
        7,
        (
            BrokerEndpoint("PLAINTEXT", "host1", 9092, "PLAINTEXT"),
            BrokerEndpoint("SSL", "host1", 9093, "SSL"),
        ),
    )
    assert znodes.decode_broker(7, KAFKA_REGISTRATIONS[3]).rack == "dc1"
    assert znodes.decode_broker(7, KAFKA_REGISTRATIONS[4]) == RegisterBrokerRecord(
        7,
        (
            BrokerEndpoint("CLIENT", "host1", 9092, "SSL"),
            BrokerEndpoint("REPLICATION", "host1", 9093, "PLAINTEXT"),
        ),
        "dc1",
    )
    assert znodes.decode_broker(7, KAFKA_REGISTRATIONS[5]).endpoints[1] == BrokerEndpoint(
        "REPLICATION", "::1", 9093, "PLAINTEXT"
    )


@pytest.mark.parametrize(
    "data",
    [b"", b"not json", b"[]", b'{"version":0}', b'{"version":4,"endpoints":["nonsense"]}'],
)
def test_a_registration_no_kafka_wrote_is_refused_with_kafkas_words(data):
    with pytest.raises(ValueError, match="Failed to parse ZooKeeper registration for broker 3"):
        znodes.decode_broker(3, data)


def test_brook_writes_what_kafka_reads_back():
    broker = RegisterBrokerRecord(
        2,
        (
            BrokerEndpoint("INTERNAL", "brook-2", 29092, "PLAINTEXT"),
            BrokerEndpoint("V6", "::1", 9094, "PLAINTEXT"),
        ),
        "r1",
    )
    data = znodes.encode_broker(broker, 1_700_000_000_000, {"transaction.version": (0, 2)})
    written = json.loads(data)
    assert written["endpoints"] == ["INTERNAL://brook-2:29092", "V6://[::1]:9094"]
    # The first PLAINTEXT endpoint on top, for clients older than listener names.
    assert (written["host"], written["port"], written["version"]) == ("brook-2", 29092, 5)
    assert written["timestamp"] == "1700000000000"
    assert znodes.decode_broker(2, data) == broker
    assert "rack" not in json.loads(
        znodes.encode_broker(RegisterBrokerRecord(2, broker.endpoints), 1)
    )
    assert znodes.decode_controller(znodes.encode_controller(4, 5)) == 4
    assert znodes.encode_controller_epoch(12) == b"12"
    assert znodes.decode_cluster_id(znodes.encode_cluster_id("abc")) == "abc"
    with pytest.raises(ValueError):
        znodes.decode_cluster_id(b'{"version":"1"}')


def test_paths_are_kafkas():
    assert znodes.broker_id_path(3) == "/brokers/ids/3"
    assert znodes.topic_path("t") == "/brokers/topics/t"
    assert znodes.topic_partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert znodes.config_entity_path("topics", "t") == "/config/topics/t"
    assert znodes.delete_topic_path("t") == "/admin/delete_topics/t"
    assert znodes.PRODUCER_ID_BLOCK == "/latest_producer_id_block"


def test_connect_strings_parse_as_zookeeper_parses_them():
    parsed = parse_connect_string("zk1:2182,zk2,[::1]:2183/kafka/prod")
    assert parsed.hosts == (("zk1", 2182), ("zk2", 2181), ("::1", 2183))
    assert parsed.chroot == "/kafka/prod"
    assert parsed.servers == "zk1:2182,zk2:2181,[::1]:2183"
    assert parse_connect_string("zk:2181/").chroot is None


def test_a_broker_in_controlled_shutdown_says_so_only_then():
    """The flag every leader reads (KIP-841's rule) is a field of Brook's own, written only
    while the broker stops: a registration otherwise is Kafka's to the byte."""
    broker = RegisterBrokerRecord(2, (BrokerEndpoint("PLAINTEXT", "h", 9092, "PLAINTEXT"),))
    plain = znodes.encode_broker(broker, 1)
    assert b"controlled" not in plain
    assert znodes.decode_broker(2, plain).in_controlled_shutdown is False
    stopping = znodes.encode_broker(broker._replace(in_controlled_shutdown=True), 1)
    assert json.loads(stopping)["in_controlled_shutdown"] is True
    assert znodes.decode_broker(2, stopping) == broker._replace(in_controlled_shutdown=True)
