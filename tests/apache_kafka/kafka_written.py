"""A log dir Apache Kafka wrote, written once per test run and read by Brook's broker
(test_kafka_written_log_dir.py) and by Brook's Spark jobs (tests/spark/
test_kafka_written_dir.py), in whichever xdist workers those run.

Kafka 4 (KRaft, one broker) takes a data set from confluent-kafka: every codec with keys
and headers, idempotent producers, transactions committed and aborted, a compacted topic
its cleaner has cleaned, and a consumer group of Kafka 4's protocol (KIP-848) left with
live members; it stops cleanly. What a consumer read from Kafka, at each isolation level,
and the group as Kafka described it are kept beside the dir (a pickle: written and read
by this module only, in one run).
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import KafkaBroker, file_lock, kafka_jars
from brook.broker.testing import free_port, wait_until
from tests.integration.groups import (
    GroupView,
    MemberProcess,
    broker_committed,
    consumer_group_view,
)

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KAFKA_NODE_ID = 1
# Kafka 4 refuses segments under 1 MiB (Brook takes smaller ones): its segments roll by
# time here, every 100 ms, while rounds of every key go on until its cleaner has run.
COMPACTED = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "segment.ms": "100",
}
KEYS = 20
Row = tuple[int, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@dataclass
class KafkaWritten:
    data_dir: Path
    # Per topic, per isolation level: every row a consumer read from Kafka.
    rows: dict[tuple[str, str], list[Row]]
    # The KIP-848 group as Kafka described it (ConsumerGroupDescribe) and its offsets.
    group: GroupView
    group_offsets: dict[tuple[str, int], tuple[int, str]]


GROUP = "kip848"


def _consumer_group(kafka: KafkaBroker) -> list[MemberProcess]:
    """Two members of a consumer group of Kafka 4's protocol, in processes of their own
    (killed once Kafka has stopped: Kafka's records keep them as members), which read
    codec-none and commit as they go until the commits reach its end."""
    members = [
        MemberProcess(
            "confluent",
            {
                "bootstrap.servers": kafka.bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "client.id": f"{GROUP}-{name}",
                "auto.offset.reset": "earliest",
                "auto.commit.interval.ms": 100,
            },
            ["codec-none"],
        )
        for name in ("a", "b")
    ]
    ends = {("codec-none", 0): 200, ("codec-none", 1): 200}

    def settled() -> bool:
        view = consumer_group_view(kafka.port, GROUP)
        committed = {tp: offset for tp, (offset, _) in broker_committed(kafka.port, GROUP).items()}
        return (
            view is not None
            and view.state == "Stable"
            and sorted(len(parts) for parts in view.members.values()) == [1, 1]
            and committed == ends
        )

    wait_until(settled, "the group to share codec-none and commit its end", 60)
    return members


def _create(bootstrap: str) -> dict[str, int]:
    topics = {f"codec-{codec}": 2 for codec in CODECS} | {"txn": 1, "compacted": 1}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic(name, partitions, 1, config=COMPACTED if name == "compacted" else {})
            for name, partitions in topics.items()
        ]
    )
    for future in futures.values():
        future.result(30)
    return topics


def _produce(bootstrap: str) -> None:
    for codec in CODECS:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "compression.type": codec,
                "linger.ms": 5,
            }
        )
        for number in range(400):
            producer.produce(
                f"codec-{codec}",
                key=None if number % 7 == 0 else b"key-%d" % number,
                value=None if number % 11 == 0 else b"value %d " % number + b"x" * (number % 50),
                headers=[("n", b"%d" % number), ("empty", None)] if number % 3 else None,
                partition=number % 2,
            )
        assert producer.flush(30) == 0
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "kafka-written"})
    producer.init_transactions(30)
    for count, commit in ((20, True), (10, False), (5, True)):
        producer.begin_transaction()
        for number in range(count):
            producer.produce("txn", value=b"%s %d" % (b"kept" if commit else b"aborted", number))
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def _compact(bootstrap: str) -> None:
    """Rounds of every key into the compacted topic until Kafka's cleaner has removed
    some superseded values (fewer records than were written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    rounds = 0

    def another_round() -> None:
        nonlocal rounds
        for key in range(KEYS):
            producer.produce("compacted", key=b"k%02d" % key, value=b"r%d" % rounds + b"y" * 80)
        assert producer.flush(30) == 0
        rounds += 1

    wait_until(
        lambda: len(read(bootstrap, "compacted", 1, "read_uncommitted")) < rounds * KEYS,
        "Kafka's cleaner to compact the topic",
        120,
        tick=another_round,
        interval=0.2,
    )


def read_topics(bootstrap: str, topics: dict[str, int], isolation: str) -> dict[str, list[Row]]:
    """Every record of the topics now (topic -> partitions), from each log's start, by
    one consumer assigned them all."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "enable.partition.eof": True,
        }
    )
    assigned = [
        TopicPartition(topic, p, 0)
        for topic, partitions in topics.items()
        for p in range(partitions)
    ]
    rows: dict[str, list[Row]] = {topic: [] for topic in topics}
    ended: set[tuple[str, int]] = set()
    try:
        consumer.assign(assigned)

        def poll() -> bool:
            for message in consumer.consume(500, 0.5):
                error = message.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error
                    ended.add((message.topic(), message.partition()))
                    continue
                rows[message.topic()].append(
                    (
                        message.partition(),
                        message.offset(),
                        message.timestamp()[1],
                        message.key(),
                        message.value(),
                        tuple(message.headers() or ()),
                    )
                )
            return len(ended) == len(assigned)

        wait_until(poll, f"the end of every partition of {sorted(topics)}", 60)
    finally:
        consumer.close()
    return {topic: sorted(found) for topic, found in rows.items()}


def read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[Row]:
    return read_topics(bootstrap, {topic: partitions}, isolation)[topic]


def all_rows(bootstrap: str, topics: dict[str, int]) -> dict[tuple[str, str], list[Row]]:
    rows: dict[tuple[str, str], list[Row]] = {}
    for isolation in ("read_uncommitted", "read_committed"):
        for topic, found in read_topics(bootstrap, topics, isolation).items():
            rows[(topic, isolation)] = found
    return rows


def shared_kafka_written(root: Path) -> KafkaWritten:
    """Kafka's log dir and what was read from it, made under `root` by whichever process
    asks first (the others wait for it) and read by the rest. Nobody writes into the
    dir: a test that serves it serves a copy."""
    facts = root / "written.pickle"
    with file_lock(root / "lock"):
        if not facts.exists():
            facts.write_bytes(pickle.dumps(_write(root / "kafka")))
    written: KafkaWritten = pickle.loads(facts.read_bytes())
    return written


def _write(home: Path) -> KafkaWritten:
    kafka_jars()  # fetched first, if this machine has no cache of them yet
    kafka = KafkaBroker(
        home,
        free_port(),
        free_port(),
        {"node.id": str(KAFKA_NODE_ID), "log.cleaner.backoff.ms": "100"},
        heap="512m",
        jvm_flags=["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"],
    ).start()
    members: list[MemberProcess] = []
    try:
        topics = _create(kafka.bootstrap)
        _produce(kafka.bootstrap)
        _compact(kafka.bootstrap)
        rows = all_rows(kafka.bootstrap, topics)
        members = _consumer_group(kafka)
        group = consumer_group_view(kafka.port, GROUP)
        assert group is not None
        group_offsets = broker_committed(kafka.port, GROUP)
    finally:
        kafka.stop()
        for member in members:
            member.kill()
    return KafkaWritten(kafka.log_dir, rows, group, group_offsets)


def last_values(rows: list[Row]) -> dict[bytes | None, bytes | None]:
    """Each key's last value, in offset order (what compaction must keep)."""
    return {row[3]: row[4] for row in sorted(rows, key=lambda row: row[1])}
