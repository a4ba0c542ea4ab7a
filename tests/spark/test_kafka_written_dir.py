"""Brook's Spark jobs over a log dir Apache Kafka wrote (tests/apache_kafka/
kafka_written.py): the `kafka-segments` data source gives, at each isolation level,
exactly the records a consumer of Kafka was given, and the audit finds nothing wrong
with Kafka's files. On the group's Spark session: one JVM for these and the group's
other tests."""

from __future__ import annotations

import io
import json
from typing import Any

from tests.apache_kafka.kafka_written import KafkaWritten, Row, last_values


def _as_row(found: Any) -> Row:
    """A data-source row (hex for bytes) in the consumer's Row form."""

    def raw(text: str | None) -> bytes | None:
        return None if text is None else bytes.fromhex(text)

    return (
        found.partition,
        found.offset,
        found.timestamp,
        raw(found.key),
        raw(found.value),
        tuple((name, raw(data)) for name, data in found.headers),
    )


def test_the_data_source_reads_what_kafkas_consumers_read(spark: Any, kafka_written: KafkaWritten):
    topics = sorted({topic for topic, _ in kafka_written.rows})
    for isolation in ("read_uncommitted", "read_committed"):
        frame = (
            spark.read.format("kafka-segments")
            .option("topics", ",".join(topics))
            .option("isolation.level", isolation)
            .load(str(kafka_written.data_dir))
            .filter("NOT is_control AND error IS NULL")
            .selectExpr(
                "topic",
                "partition",
                "offset",
                "unix_millis(timestamp) AS timestamp",
                "hex(key) AS key",
                "hex(value) AS value",
                "transform(headers, h -> array(h.key, hex(h.value))) AS headers",
            )
        )
        read: dict[str, list[Row]] = {topic: [] for topic in topics}
        for found in frame.collect():
            read[found.topic].append(_as_row(found))
        for topic in topics:
            rows = kafka_written.rows[(topic, isolation)]
            served = sorted(read[topic])
            if topic == "compacted":
                # Kafka's cleaner may run again between the consumer's read and the stop:
                # what the files hold is then a subset, with every key's last value kept.
                assert set(served) <= set(rows) and last_values(served) == last_values(rows)
            else:
                assert served == rows, (topic, isolation)


def test_the_audit_finds_nothing_wrong_with_kafkas_files(
    spark: Any, kafka_written: KafkaWritten, tmp_path
):
    """`brook audit`'s job over Kafka's own log dir: no finding against it, every record
    counted where a consumer read it, the transactions as they ended."""
    from brook.spark.audit import AuditOptions, run_audit

    out = tmp_path / "audit"
    data = run_audit(
        spark, AuditOptions(str(kafka_written.data_dir), str(out)), stream=io.StringIO()
    )
    assert data.exit_status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["integrity_failures"] == 0
    for (topic, isolation), rows in kafka_written.rows.items():
        if isolation == "read_uncommitted" and topic != "compacted":  # see above
            assert summary["topics"][topic]["records"] == len(rows), topic
    transactions = summary["totals"]["transactions"]
    assert (transactions["committed"], transactions["aborted"], transactions["open"]) == (2, 1, 0)
