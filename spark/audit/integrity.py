"""Integrity of the batches themselves, from the data source's rows.

- A batch whose CRC32C does not match (crc_mismatch); one that passes it but whose
  records do not decode (undecodable_records).
- Where a segment stops being readable: part way through a batch (torn_tail), or at
  bytes that are no v2 batch (unreadable_bytes). Kafka's recovery truncates there.
- Offsets in the order of the files (segments by base offset, batches by position):
  a batch starting below the previous batch's base offset (batch_backwards) or at or
  below its last offset (batch_overlap), and a batch below its segment's base offset
  (batch_below_segment_base). The base offset is outside the CRC's reach, so a
  flipped bit there shows here, not as a CRC failure.

The checks of the files beside the segments run per partition directory
(partition_files.py).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from .frames import findings, segment_name

TORN = ("a torn batch", "the file shrank")


def batch_findings(batches: DataFrame, records: DataFrame) -> list[DataFrame]:
    return [_crc(batches), _damage(batches), _undecodable(records), *_order(batches)]


def _crc(batches: DataFrame) -> DataFrame:
    bad = batches.filter(F.col("batch_base_offset").isNotNull() & ~F.col("batch_crc_valid"))
    return findings(
        bad,
        "crc_mismatch",
        F.concat(segment_name(), F.lit(": "), F.col("error")),
        F.col("batch_base_offset"),
        segment="segment",
        position="position",
        offset="batch_base_offset",
        producer_id="producer_id",
    )


def _damage(batches: DataFrame) -> DataFrame:
    damaged = batches.filter(F.col("batch_base_offset").isNull() & F.col("error").isNotNull())
    torn = F.lit(False)
    for start in TORN:
        torn = torn | F.col("error").startswith(start)
    return findings(
        damaged,
        F.when(torn, "torn_tail").otherwise("unreadable_bytes"),
        F.format_string(
            "%s is unreadable from position %d to its end: %s",
            segment_name(),
            F.col("position"),
            F.col("error"),
        ),
        F.col("segment"),
        segment="segment",
        position="position",
    )


def _undecodable(records: DataFrame) -> DataFrame:
    # In records mode a batch that passed its CRC has `error` set only when its records
    # (or a control record's key) do not decode.
    bad = records.filter(F.col("error").isNotNull() & F.col("batch_crc_valid"))
    return findings(
        bad,
        "undecodable_records",
        F.concat(segment_name(), F.lit(": "), F.col("error")),
        F.col("batch_base_offset"),
        segment="segment",
        position="position",
        offset=F.coalesce(F.col("offset"), F.col("batch_base_offset")),
        producer_id="producer_id",
    )


def _order(batches: DataFrame) -> list[DataFrame]:
    # Every batch with an offset counts, CRC failures too: their offsets are not covered
    # by the CRC, and a wrong one is what this check is for.
    placed = batches.filter(F.col("batch_base_offset").isNotNull())
    in_file_order = Window.partitionBy("topic", "partition").orderBy("segment", "position")
    ordered = placed.select(
        "*",
        F.lag("batch_base_offset").over(in_file_order).alias("prev_base"),
        F.lag("batch_last_offset").over(in_file_order).alias("prev_last"),
        F.lag("segment").over(in_file_order).alias("prev_segment"),
        F.lag("position").over(in_file_order).alias("prev_position"),
    )
    where = F.format_string(
        "the batch at offsets %d-%d (%s, position %d) follows the batch at offsets %d-%d"
        " (%s, position %d)",
        F.col("batch_base_offset"),
        F.col("batch_last_offset"),
        segment_name(),
        F.col("position"),
        F.col("prev_base"),
        F.col("prev_last"),
        segment_name("prev_segment"),
        F.col("prev_position"),
    )
    base = F.col("batch_base_offset")
    backwards = ordered.filter(base < F.col("prev_base"))
    overlap = ordered.filter((base >= F.col("prev_base")) & (base <= F.col("prev_last")))
    below = placed.filter(base < F.col("segment"))
    located = {
        "segment": "segment",
        "position": "position",
        "offset": "batch_base_offset",
        "producer_id": "producer_id",
    }
    return [
        findings(backwards, "batch_backwards", where, base, **located),
        findings(overlap, "batch_overlap", where, base, **located),
        findings(
            below,
            "batch_below_segment_base",
            F.format_string(
                "the batch at offsets %d-%d (position %d) lies below its segment's base offset"
                " %d (%s)",
                base,
                F.col("batch_last_offset"),
                F.col("position"),
                F.col("segment"),
                segment_name(),
            ),
            base,
            **located,
        ),
    ]
