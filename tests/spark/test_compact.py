"""Compaction with Spark (brook.spark.compact, `brook compact`'s job) on a log dir a real
Brook broker wrote: a broker started on the output serves each key's latest record at
its original offset to confluent-kafka and kafka-python consumers, the idempotent
producer that wrote the input goes on without a sequence error, and the broker's own
cleaner, run on a copy of the same input, gives the same records at the same offsets.
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from brook.broker.testing import BrokerThread
from brook.broker.tools.compact import broker_config, topic_log_configs
from brook.spark.compact import CompactionError, PartitionTask, compact_log_dir, deal
from brook.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT_FILE
from brook.storage.log_config import LogConfig
from brook.storage.log_manager import CLEAN_SHUTDOWN_FILE

from .compact_source import (
    EVENTS,
    ORDERS,
    PARTITIONS,
    Source,
    active_segment_base,
    expected_after_compaction,
    orders_records,
    partition_batches,
    write_source,
)

TIMEOUT_S = 60


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return write_source(tmp_path_factory.mktemp("compact") / "data")


def log_configs(data: Path) -> Any:
    """Each topic's config as `brook compact` finds it: from the log dir itself."""
    return topic_log_configs(data, broker_config(data, None, []), None)


def fingerprint(directory: Path) -> dict[str, tuple[int, str]]:
    """Every file under `directory`: its size and a hash of its bytes. Not `.lock`:
    opening and closing it would drop the POSIX lock of a broker in this process."""
    return {
        str(path.relative_to(directory)): (
            path.stat().st_size,
            hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != ".lock"
    }


def consume_confluent(bootstrap: str, partition: int, end: int) -> list[tuple[int, Any, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(ORDERS, partition, 0)])
    seen: list[tuple[int, Any, Any]] = []
    try:
        while not seen or seen[-1][0] < end - 1:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, "no message in time"
            if message.error() is not None:
                assert message.error().code() == -191, message.error()  # partition EOF
                if seen and seen[-1][0] >= end - 1:
                    break
                continue
            seen.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()
    return seen


def consume_kafka_python(bootstrap: str, partition: int, end: int) -> list[tuple[int, Any, Any]]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    tp = KafkaTopicPartition(ORDERS, partition)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    seen: list[tuple[int, Any, Any]] = []
    try:
        for _ in range(TIMEOUT_S * 5):
            for records in consumer.poll(timeout_ms=200).values():
                seen += [(r.offset, r.key, r.value) for r in records]
            if seen and seen[-1][0] >= end - 1:
                break
    finally:
        consumer.close()
    return seen


def served_end(broker: BrokerThread, partition: int) -> int:
    return int(
        broker.call(lambda: broker.broker.log_manager.get_log(ORDERS, partition).log_end_offset)
    )


def test_a_broker_serves_the_compacted_dir_and_the_producer_goes_on(spark, source, tmp_path):
    before = fingerprint(source.data)
    out = tmp_path / "out"
    lines: list[str] = []
    summary = compact_log_dir(
        spark, source.data, out, log_configs(source.data), progress=lines.append
    )
    # The input is never written to.
    assert fingerprint(source.data) == before
    assert lines[0].startswith(f"Compacting {source.data} into {out}")
    assert "compacted topics: __consumer_offsets, __transaction_state, orders" in lines[0]
    assert lines[-1].startswith("Done in")
    by_partition = {(r.topic, r.partition): r for r in summary.results}
    assert by_partition[(ORDERS, 0)].compacted and not by_partition[(EVENTS, 0)].compacted
    assert summary.size_after < summary.size_before / 2
    assert (out / CLEAN_SHUTDOWN_FILE).exists()
    checkpoints = (out / CLEANER_OFFSET_CHECKPOINT_FILE).read_text().splitlines()
    active = {p: active_segment_base(out, ORDERS, p) for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        assert f"{ORDERS} {p} {active[p]}" in checkpoints

    # Served on the input's port, where the idempotent producer still looks for it.
    broker = BrokerThread(
        out,
        {
            "log.cleaner.enable": "false",
            "listeners": f"PLAINTEXT://127.0.0.1:{source.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{source.port}",
        },
    )
    broker.port = source.port
    broker.start()
    try:
        for p in range(PARTITIONS):
            expected = expected_after_compaction(source, p, active[p])
            end = served_end(broker, p)
            seen = consume_confluent(broker.bootstrap, p, end)
            assert seen == expected
            assert consume_kafka_python(broker.bootstrap, p, end) == expected
            # The last record of each key is the one written last, at its offset.
            last = {key: (offset, value) for offset, key, value in seen}
            assert last == {k: v for (q, k), v in source.latest.items() if q == p}
            # Far fewer records than were written.
            assert len(expected) < len(orders_records(source.data, p)) / 2

        # The producer's last batches were written over, yet kept (emptied) with its
        # sequence numbers: its next batch follows on, same producer id and epoch.
        pids = {
            b.header.producer_id
            for b in partition_batches(source.data, ORDERS, 0)
            if b.header.producer_id >= 0 and not b.header.is_transactional
        }
        assert len(pids) == 1
        (pid,) = pids

        def state(partition: int) -> tuple[int, int]:
            log = broker.broker.log_manager.get_log(ORDERS, partition)
            (entry,) = [e for e in log.active_producers() if e.producer_id == pid]
            return entry.producer_epoch, entry.last_sequence

        before_state = {p: broker.call(state, p) for p in range(PARTITIONS)}
        for p in range(PARTITIONS):
            source.idempotent.produce(
                ORDERS,
                key=b"key-00",
                value=b"after compaction",
                partition=p,
                on_delivery=lambda error, message: error and source.failures.append(error),
            )
        assert source.idempotent.flush(TIMEOUT_S) == 0
        assert not source.failures, source.failures
        for p in range(PARTITIONS):
            epoch, sequence = broker.call(state, p)
            assert (epoch, sequence) == (before_state[p][0], before_state[p][1] + 1)
            end = served_end(broker, p)
            assert consume_confluent(broker.bootstrap, p, end)[-1][1:] == (
                b"key-00",
                b"after compaction",
            )
    finally:
        broker.stop()


def records_and_batches(data: Path, topic: str, partition: int) -> tuple[list[Any], list[Any]]:
    """Every record (offset, key, value, timestamp, headers) and every batch's identity
    (offsets, producer fields, kind, count) of a partition; not the batches' base
    timestamps, which hold the delete horizon of the cleaning's own clock."""
    records, batches = [], []
    for batch in partition_batches(data, topic, partition):
        h = batch.header
        batches.append(
            (
                h.base_offset,
                h.last_offset,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence,
                h.is_transactional,
                h.is_control,
                h.record_count,
            )
        )
        records += [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in batch.records()]
    return records, batches


def test_the_broker_cleaner_gives_the_same_records_at_the_same_offsets(spark, source, tmp_path):
    by_broker = tmp_path / "by-broker"
    shutil.copytree(source.data, by_broker)
    broker = BrokerThread(by_broker, {"log.cleaner.backoff.ms": "20"}).start()
    try:

        def cleaned_to_active() -> bool:
            manager = broker.broker.log_cleaner
            for p in range(PARTITIONS):
                log = broker.broker.log_manager.get_log(ORDERS, p)
                checkpoint = manager.checkpoints(log.dir.parent).get(ORDERS, p)
                if checkpoint != log.active_segment.base_offset:
                    return False
            return True

        deadline = time.monotonic() + TIMEOUT_S
        while not broker.call(cleaned_to_active):
            assert time.monotonic() < deadline, "the broker's cleaner did not finish in time"
            time.sleep(0.02)
    finally:
        broker.stop()

    by_spark = tmp_path / "by-spark"
    compact_log_dir(spark, source.data, by_spark, log_configs(source.data), progress=lambda _: None)
    for p in range(PARTITIONS):
        spark_records, spark_batches = records_and_batches(by_spark, ORDERS, p)
        broker_records, broker_batches = records_and_batches(by_broker, ORDERS, p)
        assert spark_records == broker_records
        assert spark_batches == broker_batches
        assert len(spark_records) < len(orders_records(source.data, p)) / 2
    assert records_and_batches(by_spark, EVENTS, 0) == records_and_batches(by_broker, EVENTS, 0)


def test_topics_option_compacts_those_and_copies_the_others(spark, source, tmp_path):
    out = tmp_path / "out"
    summary = compact_log_dir(
        spark, source.data, out, log_configs(source.data), topics={ORDERS}, progress=lambda _: None
    )
    assert {(r.topic, r.compacted) for r in summary.results} == {
        (ORDERS, True),
        (EVENTS, False),
        ("__consumer_offsets", False),
        ("__transaction_state", False),
    }
    # A copied partition keeps its segments byte for byte.
    for name in ("events-0", "__consumer_offsets-0"):
        src = {p.name: p.read_bytes() for p in (source.data / name).glob("*.log")}
        copied = {p.name: p.read_bytes() for p in (out / name).glob("*.log")}
        if (source.data / name).exists():
            assert copied == src


@pytest.mark.parametrize(
    ("topics", "message"),
    [
        ({EVENTS}, "cleanup.policy of events does not include compact"),
        ({"nope"}, "No partition of nope in"),
    ],
)
def test_topics_that_cannot_be_compacted_are_refused(spark, source, tmp_path, topics, message):
    out = tmp_path / "out"
    with pytest.raises(CompactionError, match=message):
        compact_log_dir(spark, source.data, out, log_configs(source.data), topics=topics)
    # Nothing left behind.
    assert not out.exists()


def test_a_non_empty_output_dir_is_refused(spark, source, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep-me").write_text("mine")
    with pytest.raises(CompactionError, match="is not empty"):
        compact_log_dir(spark, source.data, out, log_configs(source.data))
    assert [p.name for p in out.iterdir()] == ["keep-me"]


def test_partitions_are_dealt_to_spark_tasks_by_size():
    def task(name: str, size: int) -> PartitionTask:
        return PartitionTask(
            name, 0, name, name, LogConfig(), False, size, True, 0, 0, None, None, 0, 1
        )

    big, *small = [task("big", 50_000_000)] + [task(f"s{n}", 1000) for n in range(60)]
    groups = deal([*small, big], 4)
    assert len(groups) == 4
    assert groups[0][0] is big and len(groups[0]) == 1  # alone with its 50 MB
    assert sorted(len(g) for g in groups[1:]) == [20, 20, 20]
    assert deal([big], 8) == [[big]]
