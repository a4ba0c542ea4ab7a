"""Spark's own Kafka source and sink (spark-sql-kafka-0-10, jvm/spark-kafka/pom.xml) against
a live Brook broker: a batch read with offsets, keys, headers and read_committed; a
structured-streaming query from one topic into another through the Kafka sink with a
checkpoint, stopped, fed more, and started again from its checkpoint, so that every input
record is in the output exactly once; then `brook audit` of the broker's log dir passes.

The connector is the release of the installed PySpark (the test extra pins PySpark to the
newest release whose connector Maven Central serves); the first test checks the two match."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import spark_kafka_jars, spark_version
from brook.broker.testing import BrokerThread

from .conftest import _audit

WAIT_S = 120.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    # One partition each for the offsets and transaction-state topics: the audit at the
    # end reads every partition of the dir, and 50 empty ones cost it time, not checks.
    started = BrokerThread(
        tmp_path_factory.mktemp("spark-kafka") / "data",
        {"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1},
    ).start()
    try:
        yield started
    finally:
        started.stop()


def _create(broker: BrokerThread, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(15)


def _produce(broker: BrokerThread, topic: str, values: list[str], **config: Any) -> None:
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, **config}
    )
    for value in values:
        producer.produce(topic, key=value.split("-")[0], value=value, headers={"source": "test"})
    assert producer.flush(30) == 0


def _read(broker: BrokerThread, topic: str, count: int) -> list[str]:
    """`count` values of the topic, read_committed, by confluent-kafka."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"reader-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + 30
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(bytes(message.value() or b"").decode())
        # Anything beyond `count` would be a duplicate: read a moment longer.
        extra = consumer.poll(2)
        if extra is not None and extra.error() is None:
            values.append(bytes(extra.value() or b"").decode())
    finally:
        consumer.close()
    return values


def _end_offsets(broker: BrokerThread, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "offsets"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def test_the_connector_is_the_running_sparks_release(spark: Any) -> None:
    """A connector of another release than the Spark it runs in is unsupported: Spark builds
    each against its own internals."""
    connector = [jar.name for jar in spark_kafka_jars() if jar.name.startswith("spark-sql-kafka")]
    assert connector == [f"spark-sql-kafka-0-10_2.13-{spark.version}.jar"]
    assert spark.version == spark_version()


def test_a_batch_read_with_offsets_keys_and_headers(spark: Any, broker: BrokerThread) -> None:
    topic = "spark-batch"
    _create(broker, topic, 3)
    values = [f"k{i % 7}-v{i}" for i in range(300)]
    _produce(broker, topic, values)
    frame = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    rows = frame.selectExpr(
        "CAST(key AS STRING) AS key",
        "CAST(value AS STRING) AS value",
        "partition",
        "offset",
        "headers",
    ).collect()
    assert sorted(r.value for r in rows) == sorted(values)
    assert all(r.key == r.value.split("-")[0] for r in rows)
    assert all([(h.key, bytes(h.value)) for h in r.headers] == [("source", b"test")] for r in rows)
    ends = _end_offsets(broker, topic, 3)
    for partition, end in ends.items():
        offsets = sorted(r.offset for r in rows if r.partition == partition)
        assert offsets == list(range(end))
    # A range of offsets, per partition, as Spark's option names them.
    ranged = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 10, "1": 0, "2": -2}}))
        .option("endingOffsets", json.dumps({topic: {"0": 20, "1": 5, "2": -1}}))
        .load()
        .groupBy("partition")
        .count()
        .collect()
    )
    assert {r.partition: r["count"] for r in ranged} == {0: 10, 1: 5, 2: ends[2]}


def test_read_committed_leaves_out_aborted_records(spark: Any, broker: BrokerThread) -> None:
    topic = "spark-transactions"
    _create(broker, topic, 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "spark-txn"})
    producer.init_transactions(15)
    for batch, commit in (("committed", True), ("aborted", False), ("again", True)):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=f"{batch}-{i}")
        # Written before the abort (librdkafka drops what it has not sent yet).
        assert producer.flush(15) == 0
        if commit:
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)

    def values(isolation: str) -> list[str]:
        frame = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", topic)
            .option("kafka.isolation.level", isolation)
            .load()
            .selectExpr("CAST(value AS STRING) AS value", "offset")
            .orderBy("offset")
        )
        return [r.value for r in frame.collect()]

    committed = values("read_committed")
    assert committed == [f"committed-{i}" for i in range(10)] + [f"again-{i}" for i in range(10)]
    assert len(values("read_uncommitted")) == 30


def _wait_idle(query: Any, processed: Callable[[], int], expected: int) -> None:
    """Until the output holds `expected` records and the query has no batch under way
    (stopping it then leaves nothing half-written to be written again)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        status = query.status
        if (
            processed() >= expected
            and not status["isTriggerActive"]
            and not status["isDataAvailable"]
        ):
            return
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, (
            f"the query reached {processed()} of {expected}: {status}"
        )
        time.sleep(0.3)


def test_a_stream_through_the_kafka_sink_resumes_from_its_checkpoint(
    spark: Any, broker: BrokerThread, tmp_path: Path
) -> None:
    source, sink = "spark-stream-in", "spark-stream-out"
    _create(broker, source, 2)
    _create(broker, sink, 2)
    checkpoint = tmp_path / "checkpoint"

    def start() -> Any:
        lines = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
        )
        return (
            lines.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
            .writeStream.format("kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="500 milliseconds")
            .start()
        )

    def written() -> int:
        return sum(_end_offsets(broker, sink, 2).values())

    _produce(broker, source, [f"k{i % 5}-first-{i}" for i in range(200)])
    query = start()
    _wait_idle(query, written, 200)
    query.stop()
    _produce(broker, source, [f"k{i % 5}-second-{i}" for i in range(200)])
    query = start()
    try:
        _wait_idle(query, written, 400)
    finally:
        query.stop()
    expected = [f"K{i % 5}-FIRST-{i}" for i in range(200)] + [
        f"K{i % 5}-SECOND-{i}" for i in range(200)
    ]
    assert Counter(_read(broker, sink, 400)) == Counter(expected)
    assert written() == 400


def test_the_log_dir_spark_wrote_into_audits_clean(
    spark: Any, broker: BrokerThread, tmp_path: Path
) -> None:
    """Last in the module: the broker stops, and `brook audit` reads what the producers
    and Spark's sink wrote."""
    data_dir = broker.data_dir
    broker.stop()
    data, _ = _audit(spark, data_dir, tmp_path / "report")
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert data.exit_status == 0, summary
    assert summary["status"] == "ok"
    assert summary["findings_by_severity"]["error"] == 0
