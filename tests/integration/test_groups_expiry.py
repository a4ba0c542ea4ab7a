"""Committed offsets expire once a group is empty for offsets.retention.minutes, and an
empty group without offsets goes, for good (a tombstone keeps it gone after a restart)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from brook.broker.testing import BrokerThread

from .clients import create_topic, produce
from .clocks import ManualClock

CONFIGS = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 100}


def _groups(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_groups().result(10)
    return {group.group_id for group in listed.valid}


def _committed(bootstrap: str, group: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    result = admin.list_consumer_group_offsets([request])[group].result(10)
    return result.topic_partitions[0].offset


def test_offsets_expire_and_the_empty_group_is_removed(tmp_path, topic_name):
    clock = ManualClock()
    broker = BrokerThread(tmp_path / "data", CONFIGS, clock=clock).start()
    try:
        create_topic(broker.bootstrap, topic_name)
        produce(broker.bootstrap, topic_name, [(None, b"v")] * 3)
        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "expiring",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic_name])
        consumed = 0
        deadline = time.monotonic() + 20
        while consumed < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                consumed += 1
                consumer.commit(message=message, asynchronous=False)
        consumer.close()
        assert _committed(broker.bootstrap, "expiring", topic_name) == 3
        time.sleep(0.5)  # several expiry checks while the retention has not passed
        assert "expiring" in _groups(broker.bootstrap)
        clock.now += 2 * 60_000
        deadline = time.monotonic() + 10
        while "expiring" in _groups(broker.bootstrap):
            assert time.monotonic() < deadline, "the group was not removed"
            time.sleep(0.1)
        assert _committed(broker.bootstrap, "expiring", topic_name) == -1001  # no offset
    finally:
        broker.stop()
    restarted = BrokerThread(tmp_path / "data", CONFIGS, clock=clock).start()
    try:
        assert "expiring" not in _groups(restarted.bootstrap)
    finally:
        restarted.stop()
