"""Small helpers around the real clients, so each test reads as what it checks."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer

from brook.protocol.compression import Codec
from brook.protocol.record_batch import BatchHeader, split_batches

# Client codec names and the codec ids they are stored under.
CODECS = {
    "none": Codec.NONE,
    "gzip": Codec.GZIP,
    "snappy": Codec.SNAPPY,
    "lz4": Codec.LZ4,
    "zstd": Codec.ZSTD,
}

# kafka-python's and aiokafka's consumer settings (the same names) for a consumer that
# assigns its partitions itself and hears of new records within 100 ms.
OUTSIDE_GROUP: dict[str, Any] = {
    "group_id": None,
    "enable_auto_commit": False,
    "fetch_max_wait_ms": 100,
    "request_timeout_ms": 15_000,
}


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
    try:
        return poll_until(consumer, lambda out: len(out) >= count, timeout)
    finally:
        consumer.close()


def poll_until(
    consumer: Consumer, enough: Callable[[list[Any]], bool], timeout: float
) -> list[Any]:
    """A confluent-kafka consumer's messages, polled until `enough` says so or `timeout`
    passes (partition EOFs skipped, any other error raised)."""
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while not enough(out) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                continue
            raise AssertionError(error)
        out.append(message)
    return out


def stored_batches(data_dir: Path, topic: str, partition: int = 0) -> list[BatchHeader]:
    """The batch headers a partition holds on disk, in offset order.

    Read straight from the segment files so a test can check what the broker stored
    (codec, timestamp type) and not only what a client decoded.
    """
    headers: list[BatchHeader] = []
    for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        headers += split_batches(segment.read_bytes(), allow_partial_tail=True)
    return headers


def kafka_python_producer(bootstrap: str, **config: Any) -> KafkaProducer:
    """A kafka-python producer without idempotence, so that tests may pick any acks.

    kafka-python 3.x turns idempotence on by default (KIP-679), which demands acks=all;
    test_idempotence.py covers the default producer.
    """
    settings: dict[str, Any] = {"enable_idempotence": False, "linger_ms": 5}
    settings.update(config)
    return KafkaProducer(bootstrap_servers=bootstrap, **settings)


def kafka_python_consumer(bootstrap: str, **config: Any) -> KafkaConsumer:
    """A kafka-python consumer outside any group."""
    return KafkaConsumer(bootstrap_servers=bootstrap, **{**OUTSIDE_GROUP, **config})


def kafka_python_poll(consumer: KafkaConsumer, count: int, timeout: float = 20) -> list[Any]:
    """Poll until `count` records arrived or `timeout` passed; return them all."""
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            records += batch
    return records


@asynccontextmanager
async def aiokafka_producer(bootstrap: str, **config: Any) -> AsyncIterator[AIOKafkaProducer]:
    """A started aiokafka producer (non-idempotent, aiokafka's default), stopped on exit."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15_000, **config)
    await producer.start()
    try:
        yield producer
    finally:
        await producer.stop()


@asynccontextmanager
async def aiokafka_consumer(bootstrap: str, **config: Any) -> AsyncIterator[AIOKafkaConsumer]:
    """A started aiokafka consumer outside any group."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **{**OUTSIDE_GROUP, **config})
    await consumer.start()
    try:
        yield consumer
    finally:
        await consumer.stop()


async def aiokafka_poll(consumer: AIOKafkaConsumer, count: int, timeout: float = 20) -> list[Any]:
    """getmany() until `count` records arrived or `timeout` passed; return them all."""
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for batch in (await consumer.getmany(timeout_ms=200)).values():
            records += batch
    return records


def assert_consumed_as_placed(
    records: list[Any], placed: dict[tuple[bytes, bytes], Any], partitions: int
) -> None:
    """Each consumed record (kafka-python's or aiokafka's) sits at the partition and
    offset its send was acknowledged with, and within a partition the records come in
    the order they were sent (their values count up)."""
    assert len(records) == len(placed)
    for record in records:
        metadata = placed[(record.key, record.value)]
        assert (record.partition, record.offset) == (metadata.partition, metadata.offset)
    for partition in range(partitions):
        values = [int(r.value) for r in records if r.partition == partition]
        assert values == sorted(values)
