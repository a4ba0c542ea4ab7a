"""Many clients at once, of every kind, against one broker; and long-poll wake-ups.

Timing checks here are functional, never tight: a parked fetch that is woken by new
data answers in milliseconds, one that is not answers only when its max wait runs out,
so the bounds sit far from both and stay true on a loaded two-core machine.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from aiokafka import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import TopicPartition as KafkaPythonTopicPartition
from kio.schema.fetch.v11.response import FetchResponse

from brook.broker.testing import wait_until
from brook.protocol.client_wire import decode_response, encode_request, frame_size
from brook.protocol.record_batch import iter_records

from .clients import (
    aiokafka_consumer,
    aiokafka_poll,
    aiokafka_producer,
    consume_all,
    create_topic,
    kafka_python_consumer,
    kafka_python_poll,
    kafka_python_producer,
)
from .raw_client import fetch_request

CLIENTS = ["confluent-kafka", "kafka-python", "aiokafka"]
Record = tuple[int, bytes]  # (offset, value)


# Producing and consuming one partition with each client, blocking (for threads).


def produce_with(
    client: str, bootstrap: str, topic: str, partition: int, values: list[bytes]
) -> None:
    """Send values in order to one partition and wait until all are acknowledged."""
    if client == "confluent-kafka":
        errors: list[Any] = []
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "acks": "all"})
        for value in values:
            producer.produce(
                topic, value=value, partition=partition, on_delivery=lambda e, _: errors.append(e)
            )
            producer.poll(0)
        assert producer.flush(60) == 0
        assert not any(errors), errors
    elif client == "kafka-python":
        producer = kafka_python_producer(bootstrap, acks=1)
        try:
            futures = [producer.send(topic, value=v, partition=partition) for v in values]
            for future in futures:
                future.get(60)
        finally:
            producer.close(10)
    else:

        async def run() -> None:
            async with aiokafka_producer(bootstrap, acks="all", linger_ms=2) as producer:
                futures = [await producer.send(topic, value=v, partition=partition) for v in values]
                await asyncio.gather(*futures)

        asyncio.run(run())


def consume_with(
    client: str, bootstrap: str, topic: str, partition: int, count: int, timeout: float = 60
) -> list[Record]:
    """Read `count` records of one partition from offset 0."""
    if client == "confluent-kafka":
        messages = consume_all(bootstrap, topic, count, partition=partition, timeout=timeout)
        return [(m.offset(), m.value()) for m in messages]
    if client == "kafka-python":
        consumer = kafka_python_consumer(bootstrap)
        try:
            tp = KafkaPythonTopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            return [(r.offset, r.value) for r in kafka_python_poll(consumer, count, timeout)]
        finally:
            consumer.close()

    async def run() -> list[Record]:
        async with aiokafka_consumer(bootstrap) as consumer:
            tp = AioTopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            return [(r.offset, r.value) for r in await aiokafka_poll(consumer, count, timeout)]

    return asyncio.run(run())


def run_all(tasks: list[Callable[[], Any]]) -> list[Any]:
    """Run every task on its own thread, released together; re-raise the first error."""
    barrier = threading.Barrier(len(tasks))

    def released(task: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            barrier.wait(30)
            return task()

        return run

    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        futures = [pool.submit(released(task)) for task in tasks]
        return [future.result(timeout=120) for future in futures]


def test_many_producers_and_consumers_at_once(brook_broker, topic_name):
    """20 producers (three client libraries) write to 4 partitions while 8 consumers read
    them: every record lands exactly once, offsets are dense, and each producer's records
    keep their order within the partition."""
    bootstrap = brook_broker.bootstrap
    partitions, producers, per_producer = 4, 20, 150
    create_topic(bootstrap, topic_name, partitions=partitions)

    def values_of(producer: int) -> list[bytes]:
        return [b"%d:%d" % (producer, i) for i in range(per_producer)]

    def partition_of(producer: int) -> int:
        return producer % partitions

    per_partition = producers * per_producer // partitions
    producing = [
        (
            lambda p=p: produce_with(
                CLIENTS[p % 3], bootstrap, topic_name, partition_of(p), values_of(p)
            )
        )
        for p in range(producers)
    ]
    # Two readers of different kinds per partition, started with the producers.
    readers = [(CLIENTS[(p + k) % 3], p) for p in range(partitions) for k in (0, 1)]
    consuming = [
        (lambda c=c, p=p: consume_with(c, bootstrap, topic_name, p, per_partition))
        for c, p in readers
    ]
    results = run_all(consuming + producing)[: len(consuming)]

    expected_values = {
        p: sorted(v for q in range(producers) if partition_of(q) == p for v in values_of(q))
        for p in range(partitions)
    }
    for (client, partition), records in zip(readers, results, strict=True):
        label = f"{client} on partition {partition}"
        assert [offset for offset, _ in records] == list(range(per_partition)), label
        assert sorted(value for _, value in records) == expected_values[partition], label
        for producer in range(partition, producers, partitions):
            mine = [v for _, v in records if v.startswith(b"%d:" % producer)]
            assert mine == values_of(producer), label
    # Both readers of a partition saw the very same log.
    for p in range(partitions):
        assert results[2 * p] == results[2 * p + 1]


def test_concurrent_create_of_one_topic_succeeds_once(brook_broker, topic_name):
    """Ten admins race to create the same topic: one wins, the rest get
    TOPIC_ALREADY_EXISTS, and the topic has the winner's partition count."""
    bootstrap = brook_broker.bootstrap

    def create(partitions: int) -> KafkaError | None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.create_topics([NewTopic(topic_name, partitions, 1)])[topic_name].result(30)
        except KafkaException as exc:
            return exc.args[0]
        return None

    outcomes = run_all([lambda n=n: create(n) for n in range(1, 11)])
    winners = [n + 1 for n, error in enumerate(outcomes) if error is None]
    assert len(winners) == 1, outcomes
    assert {e.code() for e in outcomes if e is not None} == {KafkaError.TOPIC_ALREADY_EXISTS}
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic_name, timeout=10)
    assert len(metadata.topics[topic_name].partitions) == winners[0]


# Long polling.

LONG_WAIT_MS = 20_000  # a fetch that is not woken answers only after this
WOKEN_WITHIN_S = 10.0  # far above a wake-up (ms), far below LONG_WAIT_MS


PARKED_TIMEOUT_S = LONG_WAIT_MS / 1000 + 20  # how long a parked consumer keeps polling


def _first_record_confluent(bootstrap: str, topic: str, ready: threading.Event) -> bytes | None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": LONG_WAIT_MS,
            "socket.timeout.ms": LONG_WAIT_MS + 30_000,
        }
    )
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        ready.set()
        deadline = time.monotonic() + PARKED_TIMEOUT_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                return message.value()
        return None
    finally:
        consumer.close()


def _first_record_kafka_python(bootstrap: str, topic: str, ready: threading.Event) -> bytes | None:
    consumer = kafka_python_consumer(
        bootstrap, fetch_max_wait_ms=LONG_WAIT_MS, request_timeout_ms=LONG_WAIT_MS + 30_000
    )
    try:
        tp = KafkaPythonTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        ready.set()
        records = kafka_python_poll(consumer, 1, timeout=PARKED_TIMEOUT_S)
        return records[0].value if records else None
    finally:
        consumer.close()


def _first_record_aiokafka(bootstrap: str, topic: str, ready: threading.Event) -> bytes | None:
    async def run() -> bytes | None:
        async with aiokafka_consumer(
            bootstrap, fetch_max_wait_ms=LONG_WAIT_MS, request_timeout_ms=LONG_WAIT_MS + 30_000
        ) as consumer:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            ready.set()
            records = await aiokafka_poll(consumer, 1, timeout=PARKED_TIMEOUT_S)
            return records[0].value if records else None

    return asyncio.run(run())


FIRST_RECORD = {
    "confluent-kafka": _first_record_confluent,
    "kafka-python": _first_record_kafka_python,
    "aiokafka": _first_record_aiokafka,
}


def _delay_of_record_produced_while_parked(client: str, brook_broker: Any, topic: str) -> float:
    """Start a consumer with a long fetch wait, produce once the broker holds its fetch in
    a long poll, and return how long after the produce the record reached the consumer."""
    bootstrap = brook_broker.bootstrap
    ready = threading.Event()

    def consume() -> tuple[bytes | None, float]:
        value = FIRST_RECORD[client](bootstrap, topic, ready)
        return value, time.monotonic()

    with ThreadPoolExecutor(max_workers=1) as pool:
        received = pool.submit(consume)
        assert ready.wait(30)
        # Produced only once the broker holds the consumer's fetch: a record that came
        # before the fetch would be answered at once, and the wake-up not exercised.
        _wait_until_parked(brook_broker, 1)
        produced_at = time.monotonic()
        produce_with("confluent-kafka", bootstrap, topic, 0, [b"wake up"])
        value, arrived_at = received.result(timeout=PARKED_TIMEOUT_S + 20)
    assert value == b"wake up"
    return arrived_at - produced_at


@pytest.mark.parametrize("client", CLIENTS)
def test_parked_consumer_gets_new_record_without_waiting_out_max_wait(
    brook_broker, topic_name, client
):
    create_topic(brook_broker.bootstrap, topic_name)
    delay = _delay_of_record_produced_while_parked(client, brook_broker, topic_name)
    assert delay < WOKEN_WITHIN_S, f"record took {delay:.1f} s: the parked fetch was not woken"


def _fetch_request(topic: str, offset: int, max_wait_ms: int, correlation_id: int) -> bytes:
    """A Fetch v11 frame for partition 0, outside any fetch session."""
    request = fetch_request(topic, offset=offset, max_wait_ms=max_wait_ms, max_bytes=1 << 20)
    return encode_request(request, correlation_id, "long-poll-test")


def _read_fetch_response(sock: socket.socket) -> tuple[int, int, list[bytes | None]]:
    """(correlation id, error code, values of the records) for partition 0."""

    def exactly(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            assert chunk, "broker closed the connection"
            data += chunk
        return data

    answer = decode_response(exactly(frame_size(exactly(4))), FetchResponse)
    correlation_id, response = answer.correlation_id, answer.body
    [topic] = response.responses
    [partition] = topic.partitions
    values = [record.value for record in iter_records(partition.records or b"")]
    return correlation_id, partition.error_code.value, values


def _parked_sockets(
    bootstrap: str, topic: str, count: int, max_wait_ms: int
) -> list[socket.socket]:
    host, port = bootstrap.split(":")
    sockets = []
    for i in range(count):
        sock = socket.create_connection((host, int(port)), timeout=max_wait_ms / 1000 + 30)
        sock.sendall(_fetch_request(topic, 0, max_wait_ms, correlation_id=100 + i))
        sockets.append(sock)
    return sockets


def _wait_until_parked(brook_broker, count: int, timeout: float = 30) -> None:
    """Until the broker itself holds `count` fetches in long polls."""
    wait_until(
        lambda: brook_broker.call(lambda: len(brook_broker.broker.parked_fetches)) >= count,
        f"{count} fetches parked",
        timeout,
    )


def test_empty_fetch_is_held_for_max_wait(brook_broker, topic_name):
    """With nothing to return and min_bytes=1, the broker holds the fetch until max_wait
    (a lower bound, which load can only make longer), then answers empty."""
    create_topic(brook_broker.bootstrap, topic_name)
    started = time.monotonic()
    [sock] = _parked_sockets(brook_broker.bootstrap, topic_name, 1, max_wait_ms=1_500)
    with sock:
        assert _read_fetch_response(sock) == (100, 0, [])
    assert time.monotonic() - started >= 1.2


def test_one_produce_wakes_every_parked_fetch(brook_broker, topic_name):
    """Twelve connections park a fetch on one partition; a single produce answers all of
    them with the record, long before their max wait."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    sockets = _parked_sockets(bootstrap, topic_name, 12, max_wait_ms=LONG_WAIT_MS)
    try:
        _wait_until_parked(brook_broker, 12)
        produced_at = time.monotonic()
        produce_with("kafka-python", bootstrap, topic_name, 0, [b"for everyone"])
        answers = [_read_fetch_response(sock) for sock in sockets]
        elapsed = time.monotonic() - produced_at
    finally:
        for sock in sockets:
            sock.close()
    assert answers == [(100 + i, 0, [b"for everyone"]) for i in range(12)]
    assert elapsed < WOKEN_WITHIN_S, f"fetches answered {elapsed:.1f} s after the produce"


def test_deleting_a_topic_answers_fetches_parked_on_it(brook_broker, topic_name):
    """A fetch parked on a partition that is deleted does not sit out its max wait: it is
    answered with UNKNOWN_TOPIC_OR_PARTITION, and the broker goes on serving."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    [sock] = _parked_sockets(bootstrap, topic_name, 1, max_wait_ms=LONG_WAIT_MS)
    with sock:
        _wait_until_parked(brook_broker, 1)
        deleted_at = time.monotonic()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.delete_topics([topic_name])[topic_name].result(15)
        assert _read_fetch_response(sock) == (100, 3, [])  # UNKNOWN_TOPIC_OR_PARTITION
        elapsed = time.monotonic() - deleted_at
    assert elapsed < WOKEN_WITHIN_S, f"the parked fetch was answered after {elapsed:.1f} s"
    create_topic(bootstrap, topic_name + "-after")
    produce_with("aiokafka", bootstrap, topic_name + "-after", 0, [b"still serving"])
    assert consume_with("kafka-python", bootstrap, topic_name + "-after", 0, 1) == [
        (0, b"still serving")
    ]
