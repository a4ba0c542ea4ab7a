"""One consumer-group member in a process of its own, so that a test can SIGKILL it: no
LeaveGroup reaches the broker, and only the session timeout removes the member.

    python group_member.py CLIENT CONFIG_JSON TOPIC...

CLIENT is confluent, kafka-python or aiokafka; CONFIG_JSON holds the client's own
settings. Each assignment the member receives is printed as one JSON line,
[[topic, partition], ...], and the member polls until it is killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable
from typing import Any


def report(partitions: Iterable[tuple[str, int]]) -> None:
    print(json.dumps(sorted([topic, partition] for topic, partition in partitions)), flush=True)


def run_confluent(config: dict[str, Any], topics: list[str]) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(config)
    owned: set[tuple[str, int]] = set()

    # The whole assignment after each change: the consumer protocol (KIP-848) hands out
    # and takes back partitions a few at a time, the classic one all at once.
    def assigned(_: Any, partitions: list[Any]) -> None:
        owned.update((p.topic, p.partition) for p in partitions)
        report(owned)

    def revoked(_: Any, partitions: list[Any]) -> None:
        owned.difference_update((p.topic, p.partition) for p in partitions)

    consumer.subscribe(topics, on_assign=assigned, on_revoke=revoked, on_lost=revoked)
    while True:
        consumer.poll(0.1)


def reporter(listener_type: type) -> Any:
    """A rebalance listener of kafka-python or aiokafka (each wants its own base class)
    that reports each assignment."""

    class Reporter(listener_type):  # type: ignore[misc, valid-type]
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            report((tp.topic, tp.partition) for tp in assigned)

    return Reporter()


def run_kafka_python(config: dict[str, Any], topics: list[str]) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer

    consumer = KafkaConsumer(**config)
    consumer.subscribe(topics=topics, listener=reporter(ConsumerRebalanceListener))
    while True:
        consumer.poll(timeout_ms=100)


async def run_aiokafka(config: dict[str, Any], topics: list[str]) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener

    consumer = AIOKafkaConsumer(**config)
    consumer.subscribe(topics=topics, listener=reporter(ConsumerRebalanceListener))
    await consumer.start()
    while True:
        await consumer.getmany(timeout_ms=100)


def main() -> None:
    client, config, topics = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    if client == "confluent":
        run_confluent(config, topics)
    elif client == "kafka-python":
        run_kafka_python(config, topics)
    elif client == "aiokafka":
        asyncio.run(run_aiokafka(config, topics))
    else:
        raise SystemExit(f"unknown client {client!r}")


if __name__ == "__main__":
    main()
