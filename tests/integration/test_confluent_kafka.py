"""confluent-kafka (librdkafka, current release) against a real Brook broker."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from .clients import consume_all, create_topic, produce

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("acks", ["1", "all"])
def test_produce_and_consume_every_codec(brook_broker, topic_name, codec, acks):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    sent = [(f"k{i}".encode(), f"value-{i}-".encode() * (i % 7 + 1)) for i in range(300)]
    delivered = produce(bootstrap, topic_name, sent, **{"compression.type": codec, "acks": acks})
    assert [m.offset() for m in delivered] == list(range(300))
    received = consume_all(bootstrap, topic_name, 300)
    assert [(m.key(), m.value()) for m in received] == sent
    assert [m.offset() for m in received] == list(range(300))


def test_acks_zero_is_stored(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"fire-and-forget-%d" % i) for i in range(50)], acks="0")
    received = consume_all(bootstrap, topic_name, 50)
    assert [m.value() for m in received] == [b"fire-and-forget-%d" % i for i in range(50)]


def test_keys_headers_nulls(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic_name, key=None, value=b"no key", partition=0)
    producer.produce(topic_name, key=b"no value", value=None, partition=0)
    producer.produce(
        topic_name,
        key=b"h",
        value=b"with headers",
        partition=0,
        headers=[("a", b"1"), ("b", None), ("a", b"2")],
    )
    producer.produce(topic_name, key=b"", value=b"", partition=0)
    assert producer.flush(15) == 0
    messages = consume_all(bootstrap, topic_name, 4)
    assert (messages[0].key(), messages[0].value()) == (None, b"no key")
    assert (messages[1].key(), messages[1].value()) == (b"no value", None)
    assert messages[2].headers() == [("a", b"1"), ("b", None), ("a", b"2")]
    assert (messages[3].key(), messages[3].value()) == (b"", b"")


def test_consume_from_latest_and_offset_and_timestamp(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    base = int(time.time() * 1000) - 100_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(10):
        producer.produce(topic_name, value=b"m%d" % i, partition=0, timestamp=base + i * 1000)
        producer.flush(10)  # one batch each, so the time index has several entries
    from_offset = consume_all(bootstrap, topic_name, 3, offset=7)
    assert [m.value() for m in from_offset] == [b"m7", b"m8", b"m9"]
    latest = consume_all(bootstrap, topic_name, 1, offset=-1, timeout=2)
    assert latest == []
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ts"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 4500)], 10)
        assert found[0].offset == 5
        beyond = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 99_000)], 10)
        assert beyond[0].offset == -1
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), 10)
        assert (low, high) == (0, 10)
    finally:
        consumer.close()


def test_message_near_limit_accepted_and_over_limit_rejected(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"max.message.bytes": "20000"})
    produce(bootstrap, topic_name, [(None, b"x" * 19_800)])
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 1_000_000})
    producer.produce(
        topic_name,
        value=b"y" * 30_000,
        partition=0,
        on_delivery=lambda err, msg: errors.append(err),
    )
    producer.flush(15)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert [len(m.value()) for m in consume_all(bootstrap, topic_name, 1)] == [19_800]


def test_many_partitions(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=24)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in range(24):
        for i in range(5):
            producer.produce(topic_name, value=b"%d-%d" % (partition, i), partition=partition)
    assert producer.flush(20) == 0
    for partition in (0, 11, 23):
        values = [m.value() for m in consume_all(bootstrap, topic_name, 5, partition=partition)]
        assert values == [b"%d-%d" % (partition, i) for i in range(5)]


def test_admin_create_delete_and_partitions(brook_broker, topic_name):
    admin = AdminClient({"bootstrap.servers": brook_broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    with pytest.raises(KafkaException) as exists:
        admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(10)
    assert exists.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    with pytest.raises(KafkaException) as bad_rf:
        admin.create_topics([NewTopic(topic_name + "x", 1, 3)])[topic_name + "x"].result(10)
    assert bad_rf.value.args[0].code() == KafkaError.INVALID_REPLICATION_FACTOR
    with pytest.raises(KafkaException) as bad_name:
        admin.create_topics([NewTopic("bad name!", 1, 1)])["bad name!"].result(10)
    assert bad_name.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    admin.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(10)
    metadata = admin.list_topics(topic_name, timeout=10)
    assert len(metadata.topics[topic_name].partitions) == 5
    data_dir = brook_broker.data_dir
    assert (data_dir / f"{topic_name}-4").is_dir()
    admin.delete_topics([topic_name])[topic_name].result(10)
    assert topic_name not in admin.list_topics(timeout=10).topics
    assert not any(p.name.startswith(f"{topic_name}-") for p in data_dir.iterdir())


def test_acks_all_needs_min_insync_replicas(brook_broker, topic_name):
    """One broker is an ISR of one: min.insync.replicas=2 refuses acks=all, not acks=1."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"min.insync.replicas": "2"})
    errors = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "message.timeout.ms": 5000}
    )
    producer.produce(
        topic_name, value=b"needs two", partition=0, on_delivery=lambda err, msg: errors.append(err)
    )
    producer.flush(15)
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    produce(bootstrap, topic_name, [(None, b"one is enough")], acks="1")
    assert [m.value() for m in consume_all(bootstrap, topic_name, 1)] == [b"one is enough"]
