"""Filter pushdown and split planning of the kafka-segments source, on a log dir a Brook
broker wrote: pushed-down filters give exactly the rows Spark's own filtering of a full
read gives, a narrow read plans only the segments and byte ranges it needs, and a large
segment is read by several tasks, every record once."""

from __future__ import annotations

import itertools
import re
import shutil
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from brook.broker.testing import BrokerThread
from brook.spark import FILTER_PUSHDOWN, register
from brook.spark.data_source import KafkaSegmentsDataSourceNoPushdown
from brook.spark.planning import plan_partition
from brook.spark.segment_rows import BatchBounds
from brook.storage.reader import Batch, SegmentReader, partition_files

BASE_TS = 1_700_000_000_000
PER_PARTITION = 1500
# Segments of ~20 KB with an offset-index entry every ~600 bytes; timestamps one second
# apart, every 97th forty seconds back (the time index keeps the running maximum).
CONFIG = {"segment.bytes": "20000", "index.interval.bytes": "600"}


def timestamp_of(n: int) -> int:
    return BASE_TS + 1000 * n - (40_000 if n % 97 == 50 else 0)


def produce(bootstrap: str, topic: str, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 25})
    failed: list[Any] = []
    for n in range(PER_PARTITION):
        for partition in range(partitions):
            producer.produce(
                topic,
                partition=partition,
                key=b"key-%d" % (n % 50),
                value=b"value %d " % n * 4,
                timestamp=timestamp_of(n),
                on_delivery=lambda error, _: error and failed.append(error),
            )
        if n % 100 == 99:
            producer.flush(30)
    assert producer.flush(30) == 0
    assert not failed, failed


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("pushdown") / "data"
    broker = BrokerThread(data).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        created = admin.create_topics(
            [NewTopic("events", 2, 1, config=CONFIG), NewTopic("audit", 1, 1, config=CONFIG)]
        )
        for future in created.values():
            future.result(15)
        produce(broker.bootstrap, "events", 2)
        produce(broker.bootstrap, "audit", 1)
    finally:
        broker.stop()
    return data


def read(spark: Any, path: Path, **options: str) -> Any:
    return (
        spark.read.format("kafka-segments")
        .options(topics="events,audit", **options)
        .load(str(path))
    )


def at(n: int, micros: int = 0) -> str:
    """A SQL timestamp literal for record n's time (UTC: the session's time zone)."""
    moment = datetime.fromtimestamp(timestamp_of(n) / 1000, UTC) + timedelta(microseconds=micros)
    return f"TIMESTAMP '{moment.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    """Comparable rows: every column, sorted by where the row comes from."""
    rows = [tuple(r) for r in df.collect()]
    return sorted(rows, key=lambda r: repr(r))


# (query, whether to read it with segments split into ranges of at most 4 KB): the narrow
# queries are, those that read most segments are not (a task per 4 KB is slow to run).
RECORD_QUERIES = [
    ("offset >= 700 AND offset < 900", True),
    ("offset = 1234", True),
    ("offset IN (5, 600, 1499) AND partition = 1", True),
    ("offset > 1490 OR offset < 3", False),  # OR: not pushed, Spark filters
    ("NOT offset IN (1, 2, 3) AND offset <= 10 AND topic = 'events'", True),
    ("offset <> 4 AND offset < 8", False),
    ("offset <=> 1000", True),
    ("offset IS NULL", False),  # only damage rows have none; there are none here
    (f"timestamp >= {at(1200)}", True),
    (f"timestamp > {at(1200)}", False),
    (f"timestamp > {at(1200, micros=500)}", False),  # between two milliseconds
    (f"timestamp = {at(1300)}", True),
    (f"timestamp IN ({at(100)}, {at(1450)})", False),
    (f"timestamp >= {at(900)} AND timestamp < {at(950)} AND offset > 920", True),
    (f"timestamp >= {at(1000)} AND offset <= 1100 AND partition IN (0)", True),
    ("batch_last_offset >= 1000 AND batch_base_offset <= 1100", True),
    ("topic = 'audit'", False),
    ("topic <> 'audit' AND partition > 0", False),
    ("topic LIKE 'aud%' AND offset BETWEEN 10 AND 20", True),
    ("topic LIKE '%ven%'", False),
    ("NOT (partition = 0) AND offset < 5", False),
    ("partition >= 1 AND partition < 2 AND offset >= 1495", True),
]
BATCH_QUERIES = [
    ("batch_last_offset >= 700 AND batch_base_offset < 900", True),
    (f"max_timestamp >= {at(1250)}", False),
    (f"max_timestamp > {at(1440)} AND topic = 'events'", True),
    ("batch_base_offset IN (0, 25) AND partition = 0", False),
]


@pytest.fixture(scope="module")
def full_reads(spark: Any, log_dir: Path) -> dict[str, Any]:
    """Every row of both modes, materialized: Spark filters these itself."""
    return {
        mode: read(spark, log_dir, mode=mode).localCheckpoint() for mode in ("records", "batches")
    }


NOT_PUSHED = {"offset > 1490 OR offset < 3"}
CASES = [("records", *q) for q in RECORD_QUERIES] + [("batches", *q) for q in BATCH_QUERIES]


@pytest.mark.parametrize(("mode", "query", "split"), CASES)
def test_pushed_down_filters_give_the_rows_spark_filtering_gives(
    spark, log_dir, full_reads, capsys, mode, query, split
):
    expected = rows_of(full_reads[mode].filter(query))
    if "IS NULL" not in query:
        assert expected, "a query that selects nothing checks little"
    options = {"mode": mode, "maxPartitionBytes": "4k"} if split else {"mode": mode}
    pushed = read(spark, log_dir, **options).filter(query)
    assert rows_of(pushed) == expected
    # Spark leaves the filtering to the source: no Filter above the scan.
    pushed.explain()
    plan = capsys.readouterr().out
    assert (re.search(r"\bFilter\b", plan) is not None) == (query in NOT_PUSHED), plan


def segment_count(log_dir: Path) -> int:
    names = ["events-0", "events-1", "audit-0"]
    return sum(len(partition_files(log_dir / name).segments) for name in names)


def walk(log_path: Path) -> list[Batch]:
    with SegmentReader(log_path) as reader:
        batches = [b for b in reader.batches() if isinstance(b, Batch)]
    for batch in batches:
        batch.data = memoryview(bytes(batch.data))  # outlive the reader's buffers
    return batches


def test_a_narrow_read_plans_only_the_segments_and_bytes_it_needs(spark, log_dir):
    events0 = partition_files(log_dir / "events-0")
    segments = events0.segments
    assert len(segments) >= 4
    everything = read(spark, log_dir)
    assert everything.rdd.getNumPartitions() == segment_count(log_dir)
    # An offset range inside the third segment: one input partition, from the batch
    # holding the first offset to the end of the batch holding the last.
    third = walk(segments[2].log_path)
    low = third[3].header.base_offset + 1
    high = third[-4].header.last_offset - 1
    narrow = everything.filter(
        f"topic = 'events' AND partition = 0 AND offset BETWEEN {low} AND {high}"
    )
    assert narrow.rdd.getNumPartitions() == 1
    assert [r.offset for r in narrow.select("offset").collect()] == list(range(low, high + 1))
    (planned,) = plan_partition(events0, BatchBounds(first_offset=low, last_offset=high))
    assert planned.log_path == segments[2].log_path
    assert planned.start_position == third[3].position
    assert planned.end_position == third[-3].position  # the batch after the one holding high

    # A time range: segments whose every timestamp is older are not planned, and the
    # first one read starts past the batches its time index shows to be older.
    cutoff = 1100
    newer = [
        s
        for s in segments
        if max(b.header.max_timestamp for b in walk(s.log_path)) >= timestamp_of(cutoff)
    ]
    assert 0 < len(newer) < len(segments)
    by_time = everything.filter(f"topic = 'events' AND partition = 0 AND timestamp >= {at(cutoff)}")
    assert by_time.rdd.getNumPartitions() == len(newer)
    ranges = plan_partition(events0, BatchBounds(min_timestamp=timestamp_of(cutoff)))
    assert [r.log_path for r in ranges] == [s.log_path for s in newer]
    first = walk(newer[0].log_path)
    assert ranges[0].start_position > 0
    skipped = [b for b in first if b.position < ranges[0].start_position]
    assert all(r.timestamp < timestamp_of(cutoff) for b in skipped for r in b.records())

    # Topic and partition filters prune partitions at planning.
    audit = everything.filter("topic = 'audit'")
    assert audit.rdd.getNumPartitions() == len(partition_files(log_dir / "audit-0").segments)
    assert everything.filter("topic = 'nothing'").count() == 0


def test_large_segments_are_split_at_index_entries_and_every_record_read_once(
    spark, log_dir, full_reads, tmp_path
):
    expected = rows_of(full_reads["records"])
    segments = segment_count(log_dir)
    split = read(spark, log_dir, maxPartitionBytes="6000")
    assert split.rdd.getNumPartitions() > 2 * segments
    assert rows_of(split) == expected
    # Each segment's ranges run back to back from 0 to its end, cut at index positions.
    events1 = partition_files(log_dir / "events-1")
    ranges = plan_partition(events1, BatchBounds(), max_bytes=6000)
    for segment in events1.segments:
        own = [r for r in ranges if r.log_path == segment.log_path]
        cuts = [own[0].start_position, *(r.end_position for r in own)]
        assert cuts[0] == 0 and cuts[-1] == segment.size and cuts == sorted(set(cuts))
        assert all(b - a <= 6000 for a, b in itertools.pairwise(cuts))
        with SegmentReader(segment.log_path) as reader:
            assert set(cuts[1:-1]) <= set(reader.indexed_positions())

    # An index whose entries point inside batches: those are not cut at, and every
    # record is still read once.
    copy = tmp_path / "events-1"
    shutil.copytree(log_dir / "events-1", copy)
    for index in copy.glob("*.index"):
        raw = bytearray(index.read_bytes())
        for entry in range(0, len(raw), 16):  # every other entry, 3 bytes further
            relative, position = struct.unpack_from(">ii", raw, entry)
            struct.pack_into(">ii", raw, entry, relative, position + 3)
        index.write_bytes(raw)
    damaged = read(spark, copy, maxPartitionBytes="6000")
    assert damaged.rdd.getNumPartitions() > len(events1.segments)
    for segment in partition_files(copy).segments:
        starts = {b.position for b in walk(segment.log_path)}
        ranges = plan_partition(partition_files(copy), BatchBounds(), max_bytes=6000)
        assert {r.start_position for r in ranges if r.log_path == segment.log_path} <= starts
    assert rows_of(damaged) == rows_of(
        full_reads["records"].filter("topic = 'events' AND partition = 1")
    )


DAMAGED_QUERIES = [
    "offset IS NULL",
    "NOT offset IN (1, 2)",
    "NOT (offset <=> 400)",
    "offset <=> 400",
    "NOT (offset > 10)",
    "offset IS NOT NULL AND offset > 1400",
    "batch_last_offset >= 360 AND batch_base_offset <= 800",
    f"timestamp >= {at(500)}",
    f"NOT (timestamp < {at(500)})",
]


def test_damaged_rows_meet_pushed_filters_with_sql_null_semantics(spark, log_dir, tmp_path):
    """A batch failing its CRC (null offset and timestamp, its header's batch fields) and a
    torn tail (nulls but for where it is): pushed filters treat their nulls as Spark does."""
    copy = tmp_path / "events-0"
    shutil.copytree(log_dir / "events-0", copy)
    segments = sorted(copy.glob("*.log"))
    second = walk(segments[1])[5]
    raw = bytearray(segments[1].read_bytes())
    raw[second.position + second.header.size - 3] ^= 0xFF  # inside its records
    segments[1].write_bytes(raw)
    segments[-1].write_bytes(segments[-1].read_bytes()[:-7])
    full = read(spark, copy).localCheckpoint()
    assert full.filter("error IS NOT NULL").count() == 2
    for query in DAMAGED_QUERIES:
        expected = rows_of(full.filter(query))
        assert expected, query
        assert rows_of(read(spark, copy).filter(query)) == expected, query


def test_a_session_without_pushdown_reads_the_same_rows(spark, log_dir, full_reads):
    query = "offset BETWEEN 100 AND 140 AND topic = 'events'"
    expected = rows_of(full_reads["records"].filter(query))
    try:
        spark.conf.set(FILTER_PUSHDOWN, "false")
        # Spark refuses a reader that implements pushFilters while pushdown is off ...
        with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
            read(spark, log_dir).filter(query).collect()
        # ... which is why register() falls back to this source where it cannot turn it on.
        spark.dataSource.register(KafkaSegmentsDataSourceNoPushdown)
        assert rows_of(read(spark, log_dir).filter(query)) == expected
    finally:
        register(spark)
    assert spark.conf.get(FILTER_PUSHDOWN) == "true"
    assert rows_of(read(spark, log_dir).filter(query)) == expected


def test_a_bad_split_size_is_an_error_that_says_what_is_wrong(spark, log_dir):
    for value in ("0", "-5", "big", "12q"):
        with pytest.raises(
            Exception, match=f"option maxPartitionBytes='{value}' must be a positive size"
        ):
            read(spark, log_dir, maxPartitionBytes=value).count()
