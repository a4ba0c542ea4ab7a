"""Per topic and partition: what the log holds.

From the batches: batches, bytes (each batch's size, its log overhead included),
offset range, compression mix (records per codec), idempotent producers,
transactional and control batches, leader epochs. From the records: records, time
range, timestamp types, key cardinality (distinct 64-bit hashes of the keys), tombstones,
and the share of records shadowed by a later record with the same key: of the keyed
records, all but the last of each key, which is what compaction would remove.

And the records over time, per partition, as counts in equal time buckets over the
log's time range (the 0.1% extremes at either end fall in the first and last buckets,
so that one stray timestamp does not squash the chart).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .frames import data_records

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_PARTITION = ("topic", "partition")


def batch_statistics(batches: DataFrame) -> DataFrame:
    placed = batches.filter(F.col("batch_base_offset").isNotNull())
    data = ~F.col("is_control")
    codec_columns = [
        F.sum(F.when(data & (F.col("compression") == codec), F.col("record_count")))
        .cast("long")
        .alias(f"records_{codec}")
        for codec in CODECS
    ]
    return placed.groupBy(*_PARTITION).agg(
        F.count(F.lit(1)).alias("batches"),
        F.sum("size").cast("long").alias("bytes"),
        F.min("batch_base_offset").alias("first_offset"),
        F.max("batch_last_offset").alias("last_offset"),
        *codec_columns,
        F.count_distinct(F.when(F.col("producer_id") >= 0, F.col("producer_id"))).alias(
            "producers"
        ),
        F.count(F.when(F.col("is_transactional") & data, 1)).alias("transactional_batches"),
        F.count(F.when(F.col("is_control"), 1)).alias("control_batches"),
        F.min(F.when(F.col("partition_leader_epoch") >= 0, F.col("partition_leader_epoch"))).alias(
            "min_leader_epoch"
        ),
        F.max("partition_leader_epoch").alias("max_leader_epoch"),
    )


def record_statistics(records: DataFrame) -> DataFrame:
    rows = data_records(records)
    return rows.groupBy(*_PARTITION).agg(
        F.count(F.lit(1)).alias("records"),
        F.count("key_hash").alias("keyed_records"),
        F.count_distinct("key_hash").alias("distinct_keys"),
        F.count(F.when(F.col("tombstone"), 1)).alias("tombstones"),
        F.count(F.when(~F.col("create_time"), 1)).alias("log_append_time_records"),
        F.min("ts").alias("first_timestamp"),
        F.max("ts").alias("last_timestamp"),
    )


@dataclass(frozen=True, slots=True)
class TimeRange:
    start: int  # ms, inclusive
    end: int  # ms, inclusive
    buckets: int

    @property
    def width(self) -> int:
        return max(1, -(-(self.end - self.start + 1) // self.buckets))


def time_range(records: DataFrame, buckets: int) -> TimeRange | None:
    """The span the records-over-time chart covers; None without timestamps."""
    timed = data_records(records).filter(F.col("ts").isNotNull())
    row = timed.agg(
        F.percentile_approx("ts", [0.001, 0.999], 1000).alias("bounds"),
        F.min("ts").alias("first"),
        F.max("ts").alias("last"),
    ).first()
    if row is None or row["first"] is None:
        return None
    start, end = row["bounds"]
    if end <= start:
        start, end = row["first"], row["last"]
    return TimeRange(int(start), int(end), buckets)


def records_over_time(records: DataFrame, span: TimeRange) -> DataFrame:
    """Records per partition and time bucket (bucket n starts at start + n * width)."""
    timed = data_records(records).filter(F.col("ts").isNotNull())
    bucket = F.least(
        F.greatest(F.floor((F.col("ts") - F.lit(span.start)) / F.lit(span.width)), F.lit(0)),
        F.lit(span.buckets - 1),
    ).cast("int")
    return timed.groupBy(*_PARTITION, bucket.alias("bucket")).count()
