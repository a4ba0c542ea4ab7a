"""The kafka-segments data source on a log dir a real Brook broker wrote, checked against
what a confluent-kafka consumer reads from that broker: every record, every codec, both
timestamp types, transaction markers; and on damaged copies of it."""

from __future__ import annotations

import itertools
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brook.broker.testing import BrokerThread

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 2
PER_PARTITION = 60
# Small segments, so that every partition has several (one Spark input partition each).
TOPIC_CONFIG = {"segment.bytes": "3000"}
# A record's identity and content, as a consumer and as the data source give it.
Row = tuple[str, int, int, int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def produce(bootstrap: str, topic: str, codec: str, transactional: bool = False) -> None:
    config = {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": codec}
    if transactional:
        config["transactional.id"] = f"tx-{topic}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    failed: list[Any] = []
    for n in range(PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.produce(
                topic,
                partition=partition,
                # Null keys, null values and empty ones among them; bytes that are not UTF-8.
                key=None if n % 7 == 0 else b"key-%d-\xff" % n,
                value=None if n % 11 == 0 else (b"" if n % 13 == 0 else b"value %d " % n * 9),
                headers=[("n", b"%d" % n), ("empty", b""), ("none", None)] if n % 2 else None,
                on_delivery=lambda error, _: error and failed.append(error),
            )
        if n % 20 == 19:
            producer.flush(30)  # several batches per partition
    if transactional:
        producer.commit_transaction(30)
    assert producer.flush(30) == 0
    assert not failed, failed


def consume(bootstrap: str, topics: list[str]) -> list[Row]:
    """Every record of the topics through confluent-kafka (markers are not records to it)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "spark-tests", "enable.auto.commit": False}
    )
    assigned = [TopicPartition(t, p, 0) for t in topics for p in range(PARTITIONS)]
    consumer.assign(assigned)
    rows: list[Row] = []
    try:
        while len(rows) < len(assigned) * PER_PARTITION:
            for message in consumer.consume(500, timeout=10):
                assert message.error() is None, message.error()
                kind, timestamp = message.timestamp()
                rows.append(
                    (
                        message.topic(),
                        message.partition(),
                        message.offset(),
                        timestamp,
                        kind,
                        message.key(),
                        message.value(),
                        list(message.headers() or []),
                    )
                )
    finally:
        consumer.close()
    return sorted(rows, key=lambda row: row[:3])


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Row]]:
    """A log dir written by a Brook broker (stopped cleanly) and what a consumer read."""
    data = tmp_path_factory.mktemp("spark") / "data"
    broker = BrokerThread(data).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = {f"codec-{codec}": dict(TOPIC_CONFIG) for codec in CODECS}
        topics["appendtime"] = {**TOPIC_CONFIG, "message.timestamp.type": "LogAppendTime"}
        topics["txn"] = dict(TOPIC_CONFIG)
        created = admin.create_topics(
            [NewTopic(name, PARTITIONS, 1, config=config) for name, config in topics.items()]
        )
        for future in created.values():
            future.result(15)
        for codec in CODECS:
            produce(broker.bootstrap, f"codec-{codec}", codec)
        produce(broker.bootstrap, "appendtime", "lz4")
        produce(broker.bootstrap, "txn", "zstd", transactional=True)
        consumed = consume(broker.bootstrap, sorted(topics))
    finally:
        broker.stop()
    return data, consumed


def _millis(timestamp: datetime) -> int:
    # The session's time zone is UTC (conftest), so Spark's naive datetimes are UTC.
    return int(timestamp.replace(tzinfo=UTC).timestamp() * 1000)


def as_rows(df: Any) -> list[Row]:
    """Rows as the consumer's tuples, from a DataFrame or from collected rows."""
    kinds = {"CreateTime": 1, "LogAppendTime": 2}  # confluent-kafka's TIMESTAMP_* values
    rows = [
        (
            r.topic,
            r.partition,
            r.offset,
            None if r.timestamp is None else _millis(r.timestamp),
            kinds[r.timestamp_type],
            None if r.key is None else bytes(r.key),
            None if r.value is None else bytes(r.value),
            [(h.key, None if h.value is None else bytes(h.value)) for h in r.headers],
        )
        for r in (df if isinstance(df, list) else df.collect())
    ]
    return sorted(rows, key=lambda row: row[:3])


def read(spark: Any, path: Path | str, **options: str) -> Any:
    return spark.read.format("kafka-segments").options(**options).load(str(path))


TOPICS = ",".join([*(f"codec-{codec}" for codec in CODECS), "appendtime", "txn"])


def test_every_record_is_what_a_consumer_reads(spark, written):
    data, consumed = written
    df = read(spark, data, topics=TOPICS)
    segments = [p for p in data.glob("*-*/*.log") if not p.parent.name.startswith("__")]
    assert df.rdd.getNumPartitions() == len(segments) > 7 * PARTITIONS
    rows = df.collect()  # one pass; the checks below run on these rows

    assert [r for r in rows if r.error is not None or not r.batch_crc_valid] == []
    assert as_rows([r for r in rows if not r.is_control]) == consumed
    for codec in CODECS:
        assert {r.compression for r in rows if r.topic == f"codec-{codec}"} == {codec}
    assert {r.timestamp_type for r in rows if r.topic == "appendtime"} == {"LogAppendTime"}
    for r in rows:
        assert r.batch_base_offset <= r.offset <= r.batch_last_offset
        assert r.segment <= r.batch_base_offset

    # The transaction: its data batches are transactional, each partition ends with a
    # COMMIT marker that the consumer did not see as a record.
    txn = [r for r in rows if r.topic == "txn"]
    markers = [r for r in txn if r.is_control]
    assert sorted((m.partition, m.control_type) for m in markers) == [(0, "COMMIT"), (1, "COMMIT")]
    assert all(m.offset == PER_PARTITION and m.is_transactional for m in markers)
    data_rows = [r for r in txn if not r.is_control]
    assert all(r.is_transactional and r.producer_id >= 0 for r in data_rows)
    assert len(data_rows) == 2 * PER_PARTITION


def test_batches_mode_counts_batches_without_decoding(spark, written):
    data, consumed = written
    batches = read(spark, data, mode="batches", topics=TOPICS)
    assert "record_count" in batches.columns and "key" not in batches.columns
    rows = batches.collect()
    records = read(spark, data, topics=TOPICS).select("topic", "partition", "batch_base_offset")
    in_records = {tuple(r) for r in records.collect()}
    assert {(r.topic, r.partition, r.batch_base_offset) for r in rows} == in_records
    assert len(rows) == len(in_records) > len(CODECS) * PARTITIONS * 3
    assert sum(r.record_count for r in rows) == len(consumed) + 2  # and the two markers
    assert [r for r in rows if not r.batch_crc_valid or r.error is not None] == []
    # Within a segment, each batch starts where the one before it ends.
    by_segment: dict[tuple[str, int, int], list[Any]] = {}
    for r in rows:
        by_segment.setdefault((r.topic, r.partition, r.segment), []).append(r)
    for segment_rows in by_segment.values():
        segment_rows.sort(key=lambda r: r.position)
        assert segment_rows[0].position == 0
        for before, after in itertools.pairwise(segment_rows):
            assert after.position == before.position + before.size
            assert after.batch_base_offset == before.batch_last_offset + 1


def test_topics_and_partitions_options_and_paths(spark, written):
    data, consumed = written
    expected = [row for row in consumed if row[0] == "codec-lz4" and row[1] == 1]
    selected = read(spark, data, topics="codec-lz4, codec-none", partitions="1")
    assert {(r.topic, r.partition) for r in selected.select("topic", "partition").collect()} == {
        ("codec-lz4", 1),
        ("codec-none", 1),
    }
    assert as_rows(read(spark, data, topics="codec-lz4", partitions="1")) == expected
    assert as_rows(read(spark, data / "codec-lz4-1")) == expected  # a partition directory
    globbed = as_rows(read(spark, data / "codec-lz4-*"))  # a glob of partition directories
    assert globbed == [row for row in consumed if row[0] == "codec-lz4"]
    assert read(spark, data, topics="no-such-topic").count() == 0


def damaged_copy(data: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of one partition with a byte flipped inside its second batch's records, and
    the segment it is in."""
    copy = tmp_path / "codec-gzip-0"
    shutil.copytree(data / "codec-gzip-0", copy)
    segment = sorted(copy.glob("*.log"))[0]
    raw = bytearray(segment.read_bytes())
    second = 12 + int.from_bytes(raw[8:12], "big")  # where the second batch starts
    second_length = int.from_bytes(raw[second + 8 : second + 12], "big")
    raw[second + 61 + second_length // 2] ^= 0xFF
    segment.write_bytes(raw)
    return copy, segment


def test_a_flipped_byte_is_a_flagged_row_not_a_failed_job(spark, written, tmp_path):
    data, consumed = written
    copy, _ = damaged_copy(data, tmp_path)
    df = read(spark, copy)
    flagged = df.filter("error IS NOT NULL").collect()
    assert len(flagged) == 1
    bad = flagged[0]
    assert bad.batch_crc_valid is False and "fails its CRC" in bad.error
    assert bad.offset is None and bad.key is None and bad.headers == []
    # Every other record is read as the consumer read it.
    good = as_rows(df.filter("error IS NULL"))
    expected = [r for r in consumed if r[:2] == ("codec-gzip", 0)]
    skipped = [r for r in expected if bad.batch_base_offset <= r[2] <= bad.batch_last_offset]
    assert skipped and good == [r for r in expected if r not in skipped]

    batches = read(spark, copy, mode="batches")
    invalid = batches.filter("NOT batch_crc_valid").collect()
    assert [(b.batch_base_offset, b.position) for b in invalid] == [
        (bad.batch_base_offset, bad.position)
    ]
    assert "fails its CRC" in invalid[0].error


def test_a_torn_tail_is_a_flagged_row(spark, written, tmp_path):
    data, consumed = written
    copy = tmp_path / "codec-snappy-1"
    shutil.copytree(data / "codec-snappy-1", copy)
    last = sorted(copy.glob("*.log"))[-1]
    raw = last.read_bytes()
    last.write_bytes(raw[:-5])  # the last batch loses its end
    for mode in ("records", "batches"):
        flagged = read(spark, copy, mode=mode).filter("error IS NOT NULL").collect()
        assert len(flagged) == 1, mode
        assert "torn batch" in flagged[0].error
        assert flagged[0].batch_base_offset is None and flagged[0].position > 0
    expected = [r for r in consumed if r[:2] == ("codec-snappy", 1)]
    read_back = as_rows(read(spark, copy).filter("error IS NULL"))
    assert read_back == expected[: len(read_back)] and len(read_back) < len(expected)


def test_bad_options_and_paths_are_errors_that_say_what_is_wrong(spark, written, tmp_path):
    data, _ = written
    for options, message in [
        ({"mode": "rows"}, "option mode='rows' is not one of records, batches"),
        ({"partitions": "one"}, "option partitions='one' must be partition numbers"),
    ]:
        with pytest.raises(Exception, match=message):
            read(spark, data, **options).count()
    with pytest.raises(Exception, match="no directory matches"):
        read(spark, tmp_path / "nothing-*").count()
    with pytest.raises(Exception, match="is not a directory"):
        read(spark, tmp_path / "missing").count()
