"""The DataFrames the audit works on, read through the kafka-segments data source.

- `batches` (mode=batches): one row per batch, records not decoded, and one row per
  place where a segment stops being readable. Kept in memory: it is small and every
  integrity and producer check reads it.
- `records` (mode=records): one row per record, projected to what the checks use
  (keys as 64-bit hashes, values only as "is it null") and kept in memory, since
  decoding the records is the audit's most expensive step.

Findings made by DataFrame checks share one layout, FINDING_COLUMNS, plus `rank`: the
rows of one check in one partition are kept lowest rank first.
"""

from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from brook.spark.data_source import NAME

from .options import AuditOptions

FINDING_COLUMNS = ("check", "topic", "partition", "segment", "position", "offset", "producer_id")


def read(spark: SparkSession, options: AuditOptions, mode: str) -> DataFrame:
    reader = spark.read.format(NAME).option("mode", mode)
    if options.topics:
        reader = reader.option("topics", ",".join(options.topics))
    return reader.load(options.log_dir)


def task_count(spark: SparkSession) -> int:
    """Tasks per pass over the kept DataFrames: a few per core. The data source gives
    one input partition per segment, often hundreds of tiny ones (a broker's 50 empty
    __consumer_offsets partitions), and every pass over them would pay a task each."""
    return max(2, 2 * spark.sparkContext.defaultParallelism)


def batches(spark: SparkSession, options: AuditOptions) -> DataFrame:
    rows = read(spark, options, "batches").coalesce(task_count(spark))
    return rows.persist(StorageLevel.MEMORY_AND_DISK)


def records(spark: SparkSession, options: AuditOptions) -> DataFrame:
    rows = read(spark, options, "records").coalesce(task_count(spark))
    return rows.select(
        "topic",
        "partition",
        "offset",
        # Milliseconds since the epoch, as Kafka keeps them (null for NO_TIMESTAMP).
        F.floor(F.unix_micros("timestamp") / 1000).cast("long").alias("ts"),
        (F.col("timestamp_type") == "CreateTime").alias("create_time"),
        F.when(F.col("key").isNotNull(), F.xxhash64("key")).alias("key_hash"),
        (F.col("key").isNotNull() & F.col("value").isNull()).alias("tombstone"),
        "is_control",
        "control_type",
        "producer_id",
        "producer_epoch",
        "batch_base_offset",
        "batch_crc_valid",
        "segment",
        "position",
        "error",
    ).persist(StorageLevel.MEMORY_AND_DISK)


def valid_batches(batches: DataFrame) -> DataFrame:
    """Batches whose header can be trusted: read whole and passing their CRC."""
    return batches.filter(F.col("batch_base_offset").isNotNull() & F.col("batch_crc_valid"))


def data_records(records: DataFrame) -> DataFrame:
    """Records proper: decoded, not control records."""
    return records.filter(F.col("offset").isNotNull() & ~F.col("is_control"))


def segment_name(segment: Column | str = "segment") -> Column:
    return F.format_string("%020d.log", F.col(segment) if isinstance(segment, str) else segment)


def findings(
    frame: DataFrame,
    check: str | Column,
    message: Column,
    rank: Column,
    **where: Any,
) -> DataFrame:
    """Rows of `frame` as findings of `check` (a name, or a column choosing one).
    `where` maps finding columns (segment, position, offset, producer_id) to columns of
    `frame`; those not given are null."""
    columns = [
        (F.lit(check) if isinstance(check, str) else check).alias("check"),
        F.col("topic"),
        F.col("partition"),
    ]
    for name in FINDING_COLUMNS[3:]:
        value = where.get(name)
        if name == "producer_id" and value is not None:
            # Kafka's NO_PRODUCER_ID (-1): a batch of no idempotent producer.
            value = F.col(value) if isinstance(value, str) else value
            value = F.when(value >= 0, value)
        column = (
            F.lit(None) if value is None else (F.col(value) if isinstance(value, str) else value)
        )
        columns.append(column.cast("long").alias(name))
    columns += [message.alias("message"), rank.cast("long").alias("rank")]
    return frame.select(*columns)
