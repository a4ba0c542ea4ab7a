"""A consume-transform-produce application with exactly-once semantics, run as its own
process by test_exactly_once.py (which SIGKILLs it at random points).

Reads `<topic>-in` as group `<topic>-group` (read_committed), writes each value with
"-done" appended to `<topic>-out`, and commits the input offsets in the same transaction.
Exits 0 once it has consumed up to the end of the input.

Usage: python eos_app.py BOOTSTRAP TOPIC
"""

from __future__ import annotations

import sys

from confluent_kafka import Consumer, Producer, TopicPartition


def main(bootstrap: str, topic: str) -> int:
    source, sink = f"{topic}-in", f"{topic}-out"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-app", "linger.ms": 2}
    )
    producer.init_transactions(60)
    consumer.assign([TopicPartition(source, 0)])
    # Start from the group's committed offset (committed in the transactions).
    committed = consumer.committed([TopicPartition(source, 0)], 30)[0].offset
    consumer.seek(TopicPartition(source, 0, max(committed, 0)))
    end = consumer.get_watermark_offsets(TopicPartition(source, 0), 30)[1]
    position = max(committed, 0)
    while position < end:
        messages = [m for m in consumer.consume(10, 1.0) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(sink, key=message.key(), value=message.value() + b"-done")
        position = messages[-1].offset() + 1
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, position)], consumer.consumer_group_metadata(), 60
        )
        producer.commit_transaction(60)
        print(f"committed {position}", flush=True)
    consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
