"""Consumer groups end to end with confluent-kafka: the first checks of the coordinator."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, TopicPartition

from .clients import create_topic, produce


def _consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            **extra,
        }
    )


def _drain(consumers: list[Consumer], expected: int, timeout: float = 30) -> list:
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < expected and time.monotonic() < deadline:
        for consumer in consumers:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message)
                consumer.commit(message=message, asynchronous=False)
    return got


def test_group_splits_partitions_and_commits_survive(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    for partition in range(6):
        produce(
            bootstrap,
            topic_name,
            [(None, b"%d-%d" % (partition, i)) for i in range(5)],
            partition=partition,
        )
    consumers = [_consumer(bootstrap, "g1") for _ in range(3)]
    for consumer in consumers:
        consumer.subscribe([topic_name])
    try:
        got = _drain(consumers, 30)
        assert sorted(m.value() for m in got) == sorted(
            b"%d-%d" % (p, i) for p in range(6) for i in range(5)
        )
        owners = {}
        for index, consumer in enumerate(consumers):
            for tp in consumer.assignment():
                owners[tp.partition] = index
        assert sorted(owners) == list(range(6))
        assert len(set(owners.values())) == 3
        committed = consumers[0].committed(
            [TopicPartition(topic_name, p) for p in range(6)], timeout=10
        )
        assert [tp.offset for tp in committed] == [5] * 6
    finally:
        for consumer in consumers:
            consumer.close()
