"""Brook serves a log dir Apache Kafka wrote. Kafka 4 (KRaft, one broker) takes a data
set from confluent-kafka: every codec with keys and headers, idempotent producers,
transactions committed and aborted, a compacted topic its cleaner has cleaned; it stops
cleanly, and a Brook broker started on a copy of its log dir (with Kafka's node id as its
broker.id, as Kafka itself would demand) serves every record at its offset with its
timestamp, read_uncommitted and read_committed alike, and answers a retried batch of an
inherited idempotent producer as the duplicate it is; a consumer group of Kafka 4's
protocol (KIP-848) that Kafka left with live members is loaded from Kafka's records as
Kafka described it, with its committed offsets; `brook audit` reads Kafka's dir and
finds nothing wrong with it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import KafkaBroker
from brook.broker.testing import BrokerThread, free_port, wait_until
from brook.protocol.record_batch import split_batches
from brook.storage.reader import SegmentReader
from tests.integration.groups import (
    GroupView,
    MemberProcess,
    broker_committed,
    consumer_group_view,
)
from tests.integration.raw_client import RawClient, produce_request

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
        lambda: len(_read(bootstrap, "compacted", 1, "read_uncommitted")) < rounds * KEYS,
        "Kafka's cleaner to compact the topic",
        120,
        tick=another_round,
        interval=0.2,
    )


def _read_topics(bootstrap: str, topics: dict[str, int], isolation: str) -> dict[str, list[Row]]:
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


def _read(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[Row]:
    return _read_topics(bootstrap, {topic: partitions}, isolation)[topic]


def _all_rows(bootstrap: str, topics: dict[str, int]) -> dict[tuple[str, str], list[Row]]:
    rows: dict[tuple[str, str], list[Row]] = {}
    for isolation in ("read_uncommitted", "read_committed"):
        for topic, found in _read_topics(bootstrap, topics, isolation).items():
            rows[(topic, isolation)] = found
    return rows


@pytest.fixture(scope="module")
def kafka_written(
    tmp_path_factory: pytest.TempPathFactory, apache_kafka_jars: Path
) -> Iterator[KafkaWritten]:
    home = tmp_path_factory.mktemp("apache-kafka")
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
        rows = _all_rows(kafka.bootstrap, topics)
        members = _consumer_group(kafka)
        group = consumer_group_view(kafka.port, GROUP)
        assert group is not None
        group_offsets = broker_committed(kafka.port, GROUP)
    finally:
        kafka.stop()
        for member in members:
            member.kill()
    yield KafkaWritten(kafka.log_dir, rows, group, group_offsets)


@pytest.fixture
def brook_on_a_copy(kafka_written: KafkaWritten, tmp_path: Path) -> Iterator[BrokerThread]:
    copy = tmp_path / "copy"
    shutil.copytree(kafka_written.data_dir, copy)
    broker = BrokerThread(copy, {"broker.id": KAFKA_NODE_ID}).start()
    try:
        yield broker
    finally:
        broker.stop()


def test_every_record_is_served_at_its_offset_with_its_timestamp(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    topics = {topic: 2 if topic.startswith("codec-") else 1 for topic, _ in kafka_written.rows}
    served = _all_rows(brook_on_a_copy.bootstrap, topics)
    for key, rows in kafka_written.rows.items():
        if key[0] == "compacted":
            # Kafka's cleaner may run again between the read and the stop: what Brook serves
            # is then a subset of what was read, with every key's last value kept.
            assert set(served[key]) <= set(rows), key
            assert _last_values(served[key]) == _last_values(rows), key
        else:
            assert served[key] == rows, key
    # The data set is what it claims to be: aborted records hidden from read_committed,
    # compacted keys.
    txn = {isolation: [row[4] for row in served[("txn", isolation)]] for _, isolation in served}
    assert b"aborted 0" in txn["read_uncommitted"]
    assert b"aborted 0" not in txn["read_committed"] and b"kept 4" in txn["read_committed"]
    compacted = served[("compacted", "read_uncommitted")]
    assert len({row[3] for row in compacted}) == KEYS < len(compacted) < compacted[-1][1] + 1


def _last_values(rows: list[Row]) -> dict[bytes | None, bytes | None]:
    return {row[3]: row[4] for row in sorted(rows, key=lambda row: row[1])}


def test_a_consumer_group_of_kip_848_is_loaded_as_kafka_left_it(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    """Kafka's consumer group records (its epoch, members, target and current
    assignments) replayed by Brook: the same group, members and assignments, and the
    same committed offsets."""
    assert consumer_group_view(brook_on_a_copy.port, GROUP) == kafka_written.group
    assert broker_committed(brook_on_a_copy.port, GROUP) == kafka_written.group_offsets
    assert sorted(kafka_written.group.members) == [f"{GROUP}-a", f"{GROUP}-b"]


def test_kafkas_own_metadata_log_is_not_a_topic(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    names = brook_on_a_copy.call(lambda: {t.name for t in brook_on_a_copy.broker.metadata.topics()})
    assert "__cluster_metadata" not in names
    assert {"txn", "compacted", "codec-zstd"} <= names


def test_a_retried_batch_of_an_inherited_producer_is_a_duplicate(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    """The last batch Kafka appended for an idempotent producer, sent again as its
    producer would retry it: Brook answers with the offset Kafka gave it, and appends
    nothing (the producer's state came from Kafka's snapshot and log)."""
    partition_dir = brook_on_a_copy.data_dir / "codec-none-0"
    segment = sorted(partition_dir.glob("*.log"))[-1]
    with SegmentReader(segment) as reader:
        last = [batch for batch in reader.batches() if batch.header.producer_id >= 0][-1]
    raw = bytes(last.data)
    (header,) = split_batches(raw)
    end_before = len(_read(brook_on_a_copy.bootstrap, "codec-none", 2, "read_uncommitted"))
    with RawClient(brook_on_a_copy.port) as client:
        response = client.request(produce_request("codec-none", 0, raw))
    answer: Any = response.responses[0].partition_responses[0]
    assert answer.error_code == 0
    assert answer.base_offset == header.base_offset
    assert len(_read(brook_on_a_copy.bootstrap, "codec-none", 2, "read_uncommitted")) == end_before


@dataclass
class SparkReads:
    rows: dict[str, list[list[Any]]]  # "topic/isolation" -> the data source's rows
    audit_exit_status: int
    audit_dir: Path


@pytest.fixture(scope="module")
def spark_reads(
    kafka_written: KafkaWritten, tmp_path_factory: pytest.TempPathFactory
) -> SparkReads:
    """Brook's Spark data source and `brook audit` over Kafka's own log dir, in one Spark
    process (tests/apache_kafka/spark_reads.py)."""
    out = tmp_path_factory.mktemp("spark-reads")
    topics = sorted({topic for topic, _ in kafka_written.rows})
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.apache_kafka.spark_reads",
            str(kafka_written.data_dir),
            ",".join(topics),
            str(out / "rows.json"),
            str(out / "audit"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads((out / "rows.json").read_text())
    return SparkReads(read["rows"], read["audit_exit_status"], out / "audit")


# Whichever test comes first waits for the Spark process that serves both (its own limit
# is 600 s): on a loaded machine it outlasted the suite's 300 s per test.
@pytest.mark.timeout(720)
def test_brook_audit_reads_the_kafka_written_dir(
    kafka_written: KafkaWritten, spark_reads: SparkReads
) -> None:
    """`brook audit` (Spark, through the kafka-segments data source) over Kafka's own log
    dir: no finding against it, every record counted where a consumer read it, the
    transactions as they ended."""
    assert spark_reads.audit_exit_status == 0
    summary = json.loads((spark_reads.audit_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["integrity_failures"] == 0
    for (topic, isolation), rows in kafka_written.rows.items():
        if isolation == "read_uncommitted" and topic != "compacted":  # see above
            assert summary["topics"][topic]["records"] == len(rows), topic
    transactions = summary["totals"]["transactions"]
    assert (transactions["committed"], transactions["aborted"], transactions["open"]) == (2, 1, 0)


def _as_row(found: list[Any]) -> Row:
    """A data-source row (hex for bytes, nulls as null) in the consumer's Row form."""
    partition, offset, timestamp, key, value, headers = found

    def raw(text: str | None) -> bytes | None:
        return None if text is None else bytes.fromhex(text)

    return (
        partition,
        offset,
        timestamp,
        raw(key),
        raw(value),
        tuple((name, raw(data)) for name, data in headers),
    )


@pytest.mark.timeout(720)  # (as the test above: it may be the one that waits for Spark)
def test_the_spark_data_source_reads_the_kafka_written_dir(
    kafka_written: KafkaWritten, spark_reads: SparkReads
) -> None:
    """Brook's `kafka-segments` data source over Kafka's own files gives, at each isolation
    level, exactly the records a consumer of Kafka was given: offsets, timestamps, keys,
    values and headers, aborted records left out of read_committed."""
    read = spark_reads.rows
    for (topic, isolation), rows in kafka_written.rows.items():
        found = sorted(_as_row(row) for row in read[f"{topic}/{isolation}"])
        if topic == "compacted":
            # Kafka's cleaner may have run again after the consumer's read (see above).
            assert set(found) <= set(rows) and _last_values(found) == _last_values(rows)
        else:
            assert found == rows, (topic, isolation)
    assert len(read["txn/read_uncommitted"]) == 35 and len(read["txn/read_committed"]) == 25
