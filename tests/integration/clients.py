"""Small helpers around the real clients, so each test reads as what it checks."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])
    futures[name].result(15)


def produce(
    bootstrap: str,
    topic: str,
    messages: list[tuple[bytes | None, bytes | None]],
    partition: int = 0,
    **config: Any,
) -> list[Any]:
    """Produce with confluent-kafka and return the delivered messages (offsets set)."""
    delivered: list[Any] = []
    errors: list[Any] = []

    def on_delivery(error: Any, message: Any) -> None:
        (errors if error else delivered).append(error or message)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for key, value in messages:
        producer.produce(topic, key=key, value=value, partition=partition, on_delivery=on_delivery)
    remaining = producer.flush(30)
    assert remaining == 0, f"{remaining} messages not delivered"
    assert not errors, errors
    return delivered


def consume_all(
    bootstrap: str,
    topic: str,
    count: int,
    partition: int = 0,
    offset: int = 0,
    timeout: float = 20,
    **config: Any,
) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            **config,
        }
    )
    consumer.assign([TopicPartition(topic, partition, offset)])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(message.error())
            out.append(message)
    finally:
        consumer.close()
    return out
