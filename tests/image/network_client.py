"""A Kafka client that the image tests run in a container of its own, beside the broker's, on
a user-defined network: the image's own Python, with the tests' confluent-kafka mounted in
(test_image._client_library: the image holds no client library).

    python network_client.py BOOTSTRAP TOPIC PRODUCE EXPECT

It asks for the cluster's metadata, produces PRODUCE records (keys `inside-<n>`), then reads
the topic from the start in a consumer group until it has EXPECT records and commits. It
prints one JSON object: the brokers the metadata listed, the coordinator of the group, the
offsets the records were written at, the records read and the offsets committed. Errors go
to stderr with exit status 1.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

# Bounds on waiting for the broker, so that a broken set-up fails rather than hangs.
WAIT_S = 60.0


def main(bootstrap: str, topic: str, produce: int, expect: int) -> dict[str, Any]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    metadata = admin.list_topics(timeout=WAIT_S)
    brokers = sorted(f"{broker.host}:{broker.port}" for broker in metadata.brokers.values())

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    written: list[int] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            raise KafkaException(error)
        written.append(message.offset())

    for n in range(produce):
        producer.produce(
            topic, key=b"inside-%d" % n, value=b"from the network %d" % n, on_delivery=delivered
        )
        producer.poll(0)
    if producer.flush(WAIT_S) != 0:
        raise SystemExit(f"{produce} records not delivered in {WAIT_S} s")

    group = f"inside-{topic}"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe([topic])
        received: list[Message] = []
        deadline = time.monotonic() + WAIT_S
        while len(received) < expect:
            if time.monotonic() > deadline:
                raise SystemExit(f"read {len(received)} of {expect} records in {WAIT_S} s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            received.append(message)
        committed = consumer.commit(asynchronous=False) or []
    finally:
        consumer.close()

    # The group's coordinator, as FindCoordinator on this listener gave it.
    description = admin.describe_consumer_groups([group])[group].result(timeout=WAIT_S)
    coordinator = description.coordinator
    return {
        "brokers": brokers,
        "coordinator": f"{coordinator.host}:{coordinator.port}",
        "written": written,
        "received": [[m.key().decode(), m.value().decode()] for m in received],
        "committed": [[tp.topic, tp.partition, tp.offset] for tp in committed],
    }


if __name__ == "__main__":
    bootstrap, topic, produce, expect = sys.argv[1:]
    print(json.dumps(main(bootstrap, topic, int(produce), int(expect))))
