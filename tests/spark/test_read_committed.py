"""The data source's isolation.level against a real consumer's: a Brook broker started on
a copy of the audit's log dir (an aborted transaction then a committed one, a transaction
left open, committed ones, plain idempotent batches) serves confluent-kafka consumers of
both isolation levels, and the data source reads the same records from the files; each
record's transaction_outcome says what became of its transaction."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from brook.broker.testing import BrokerThread

from .audit_logs import BROKER, ORDERS_PARTITIONS

pytestmark = pytest.mark.timeout(900)

TOPICS = {"aborted": 1, "open": 1, "txn": 1, "orders": ORDERS_PARTITIONS}
Offsets = set[tuple[str, int, int]]


def consume(bootstrap: str, isolation: str) -> Offsets:
    """Every record a consumer of `isolation` is given, to the end of each partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{isolation}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    assigned = [TopicPartition(t, p, 0) for t, count in TOPICS.items() for p in range(count)]
    consumer.assign(assigned)
    records: Offsets = set()
    ended: set[tuple[str, int]] = set()
    try:
        while len(ended) < len(assigned):
            for message in consumer.consume(500, timeout=10):
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    ended.add((message.topic(), message.partition()))
                    continue
                assert error is None, error
                records.add((message.topic(), message.partition(), message.offset()))
    finally:
        consumer.close()
    return records


@pytest.fixture(scope="module")
def consumed(audit_log: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Offsets]:
    copy = tmp_path_factory.mktemp("read-committed") / "data"
    shutil.copytree(audit_log.data, copy)
    # The open transaction stays open while the consumers read: no timeout aborts it.
    config = {**BROKER, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 3_600_000}
    broker = BrokerThread(copy, config).start()
    try:
        return {
            level: consume(broker.bootstrap, level)
            for level in ("read_uncommitted", "read_committed")
        }
    finally:
        broker.stop()


def read(spark: Any, log_dir: Any, isolation: str | None, mode: str = "records") -> list[Any]:
    reader = spark.read.format("kafka-segments").option("topics", ",".join(TOPICS))
    if isolation is not None:
        reader = reader.option("isolation.level", isolation)
    return reader.option("mode", mode).load(str(log_dir)).collect()


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_the_rows_are_the_records_a_consumer_of_that_isolation_reads(
    spark, audit_log, consumed, isolation
):
    rows = read(spark, audit_log.data, isolation)
    data = {(r.topic, r.partition, r.offset) for r in rows if not r.is_control}
    assert data == consumed[isolation]
    if isolation == "read_committed":
        assert {r.transaction_outcome for r in rows} == {"committed", "none"}
        # The open transaction holds the last stable offset at 0: nothing of open-0.
        assert not [r for r in rows if r.topic == "open"]


def test_each_record_says_what_became_of_its_transaction(spark, audit_log, consumed):
    rows = read(spark, audit_log.data, None)  # read_uncommitted, the default
    outcomes: dict[tuple[str, str], set[int]] = {}
    for r in rows:
        outcomes.setdefault((r.topic, r.transaction_outcome), set()).add(r.offset)
    aborted = {o for t, p, o in consumed["read_uncommitted"] - consumed["read_committed"]}
    assert outcomes[("aborted", "aborted")] | outcomes[("open", "open")] == aborted
    assert outcomes[("aborted", "aborted")] == set(range(10))
    assert outcomes[("aborted", "committed")] == set(range(11, 16))
    assert outcomes[("open", "open")] == set(range(7))
    assert ("txn", "aborted") not in outcomes and ("txn", "open") not in outcomes
    assert {outcome for topic, outcome in outcomes if topic == "orders"} == {"none"}
    # The markers themselves are no transaction's data.
    assert {r.transaction_outcome for r in rows if r.is_control} == {"none"}

    batches = read(spark, audit_log.data, "read_committed", mode="batches")
    assert {b.transaction_outcome for b in batches} == {"committed", "none"}
    assert sum(b.record_count for b in batches if not b.is_control) == len(
        consumed["read_committed"]
    )


def test_an_unknown_isolation_level_is_an_error_that_says_so(spark, audit_log):
    with pytest.raises(Exception, match=r"isolation\.level=.read_all. is not one of"):
        read(spark, audit_log.data, "read_all")
