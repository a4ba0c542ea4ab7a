"""What the batches and records say, once they read whole.

- Timestamps, in offset (append) order per partition: a record below the largest
  timestamp before it (timestamp_regression, and by how much). KIP-937's bounds judged
  against the append order, for CreateTime records (LogAppendTime ones are the broker's
  clock): the broker's clock when it appended a record was at least the timestamps of
  the records appended before it, and at most those appended after it, as far as those
  are the clock too. So a record older than an earlier one by more than
  log.message.timestamp.before.max.ms, or newer than every later one by more than
  log.message.timestamp.after.max.ms, would have been refused (the last record of a
  partition has nothing after it and is not judged on the after bound). The records
  below the running maximum are one finding per record that set it (their cause: one
  timestamp far in the future puts every record after it below it, and is reported
  once, not once per record).
- Producers, per partition: a batch of the same producer id, epoch and base sequence
  at a second offset (duplicate_batch: the broker should have answered the retry with
  the first offset); a batch not starting at the sequence after its predecessor's last
  (sequence_gap forwards, unless the topic is compacted and offsets are missing between
  the two batches: then the cleaner removed the batches in between;
  sequence_out_of_order backwards). Coordinators' batches carry no sequence and are
  left out.
- Transactions, per producer and partition: its transactional batches up to a COMMIT
  or ABORT marker form one transaction: committed, aborted, open (no marker after them)
  or a marker without data. A COMMIT without data in a topic that is not compacted is
  lost data (commit_without_data), unless it is the producer's first marker in a log
  whose start retention removed; an ABORT without data is what a produce that failed
  leaves.
- Offsets missing between consecutive batches: expected after compaction (offset_gap,
  information), lost records in a topic that is not compacted (missing_offsets, an
  error). Retention removes whole segments from the start, never from the middle.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .frames import data_records, findings, segment_name, valid_batches
from .options import LONG_MAX, AuditOptions

INT32_MAX = 2**31 - 1
_PARTITION = ("topic", "partition")


# --- timestamps ---------------------------------------------------------------------


def timestamp_disorder(records: DataFrame, options: AuditOptions) -> DataFrame:
    """The records whose timestamp goes back or breaks a KIP-937 bound, with `regression`
    (ms below the running maximum, 0 if none), `peak_offset` (the record holding that
    maximum), `before_bound` and `after_bound`."""
    timed = data_records(records).filter(F.col("ts").isNotNull())
    before = (
        Window.partitionBy(*_PARTITION).orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    )
    # The maximum after a record, as a running maximum in descending order: Spark keeps
    # a running aggregate per row, where a frame running to the end would be rescanned.
    after = (
        Window.partitionBy(*_PARTITION)
        .orderBy(F.desc("offset"))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    # The largest timestamp before a record and the first record that has it (the
    # struct orders by timestamp, then by the earlier offset).
    peak = F.max(F.struct(F.col("ts"), (-F.col("offset")).alias("neg_offset"))).over(before)
    framed = (
        timed.select(
            "topic",
            "partition",
            "offset",
            "ts",
            "create_time",
            "segment",
            "position",
            "producer_id",
            peak.alias("peak"),
        )
        .select(
            "*",
            F.col("peak.ts").alias("max_before"),
            (-F.col("peak.neg_offset")).alias("peak_offset"),
        )
        .drop("peak")
        .select("*", F.max("ts").over(after).alias("max_after"))
    )
    regression = F.greatest(F.col("max_before") - F.col("ts"), F.lit(0))
    before_bound = F.lit(False)
    if options.before_max_ms < LONG_MAX:
        before_bound = F.col("create_time") & (
            F.col("max_before") - F.col("ts") > F.lit(options.before_max_ms)
        )
    after_bound = F.col("create_time") & (
        F.col("ts") - F.col("max_after") > F.lit(options.after_max_ms)
    )
    flagged = framed.select(
        "*",
        F.coalesce(regression, F.lit(0)).alias("regression"),
        F.coalesce(before_bound, F.lit(False)).alias("before_bound"),
        F.coalesce(after_bound, F.lit(False)).alias("after_bound"),
    )
    return flagged.filter((F.col("regression") > 0) | F.col("before_bound") | F.col("after_bound"))


def _by_peak(disorder: DataFrame) -> DataFrame:
    """Rows of `disorder` grouped by the record whose timestamp they are below: how
    many, their offsets, the largest regression, and the one record of a group of one."""
    return disorder.groupBy("topic", "partition", "peak_offset").agg(
        F.count(F.lit(1)).alias("records"),
        F.min("offset").alias("first_offset"),
        F.max("offset").alias("last_offset"),
        F.max("max_before").alias("max_before"),
        F.max("regression").alias("max_regression"),
        F.min_by(F.struct("ts", "segment", "position", "producer_id"), "offset").alias("one"),
    )


def _grouped_message(one: str, many: str, *extra: Column) -> Column:
    """`one` for a group of a single record (the late record is the finding), `many`
    for a group (the record ahead of them is the cause)."""
    single = F.format_string(
        one,
        F.col("first_offset"),
        F.col("one.ts"),
        F.col("max_before") - F.col("one.ts"),
        F.col("max_before"),
        F.col("peak_offset"),
        *extra,
    )
    grouped = F.format_string(
        many,
        F.col("peak_offset"),
        F.col("max_before"),
        F.col("records"),
        F.col("first_offset"),
        F.col("last_offset"),
        F.col("max_regression"),
        *extra,
    )
    return F.when(F.col("records") == 1, single).otherwise(grouped)


def _grouped_location() -> dict[str, Column]:
    alone = F.col("records") == 1
    return {
        "segment": F.when(alone, F.col("one.segment")),
        "position": F.when(alone, F.col("one.position")),
        "offset": F.when(alone, F.col("first_offset")).otherwise(F.col("peak_offset")),
        "producer_id": F.when(alone, F.col("one.producer_id")),
    }


def timestamp_findings(disorder: DataFrame, options: AuditOptions) -> list[DataFrame]:
    regressions = findings(
        _by_peak(disorder.filter(F.col("regression") > 0)),
        "timestamp_regression",
        _grouped_message(
            "the record at offset %d has timestamp %d, %d ms below the largest timestamp"
            " before it (%d, at offset %d)",
            "the record at offset %d has timestamp %d, ahead of the %d records after it at"
            " offsets %d-%d that are below it, by up to %d ms: its timestamp is the cause",
        ),
        -F.col("max_regression"),  # the largest first
        **_grouped_location(),
    )
    too_old = findings(
        _by_peak(disorder.filter(F.col("before_bound"))),
        "timestamp_before_bound",
        _grouped_message(
            "the record at offset %d has CreateTime %d, %d ms older than a record appended"
            " before it (%d, at offset %d); log.message.timestamp.before.max.ms=%d",
            "the record at offset %d has timestamp %d: the %d records after it at offsets"
            " %d-%d are older than it, by up to %d ms, more than"
            " log.message.timestamp.before.max.ms=%d allows",
            F.lit(options.before_max_ms),
        ),
        -F.col("max_regression"),
        **_grouped_location(),
    )
    located = {
        "segment": "segment",
        "position": "position",
        "offset": "offset",
        "producer_id": "producer_id",
    }
    too_new = findings(
        disorder.filter(F.col("after_bound")),
        "timestamp_after_bound",
        F.format_string(
            "the record at offset %d has CreateTime %d, %d ms newer than every record"
            " appended after it (at most %d); log.message.timestamp.after.max.ms=%d",
            F.col("offset"),
            F.col("ts"),
            F.col("ts") - F.col("max_after"),
            F.col("max_after"),
            F.lit(options.after_max_ms),
        ),
        F.col("max_after") - F.col("ts"),
        **located,
    )
    return [regressions, too_old, too_new]


def disorder_by_partition(disorder: DataFrame) -> DataFrame:
    """Per partition: how many records go back, the largest regression, the records
    beyond each KIP-937 bound."""
    going_back = F.col("regression") > 0
    return disorder.groupBy(*_PARTITION).agg(
        F.count(F.when(going_back, 1)).alias("timestamp_regressions"),
        F.max("regression").alias("max_regression_ms"),
        F.count(F.when(F.col("before_bound"), 1)).alias("before_bound"),
        F.count(F.when(F.col("after_bound"), 1)).alias("after_bound"),
    )


def regression_histogram(disorder: DataFrame) -> DataFrame:
    """Per partition, regressions by order of magnitude: decade d counts those of
    [10^d, 10^(d+1)) ms."""
    going_back = disorder.filter(F.col("regression") > 0)
    decade = F.floor(F.log10(F.col("regression"))).cast("int").alias("decade")
    return going_back.groupBy(*_PARTITION, decade).count()


# --- producers ----------------------------------------------------------------------


def _last_sequence(base_sequence: str, base_offset: str, last_offset: str) -> Column:
    """Kafka's lastSequence: the base sequence plus the offset delta, wrapping after
    INT32_MAX to 0."""
    last = F.col(base_sequence).cast("long") + F.col(last_offset) - F.col(base_offset)
    return F.when(last > INT32_MAX, last - INT32_MAX - 1).otherwise(last)


def producer_findings(batches: DataFrame, compacted: list[str]) -> list[DataFrame]:
    """Duplicates, gaps and reversals of each producer's sequences; `compacted`: the
    topics whose cleaner may have removed batches (and so sequences)."""
    idempotent = valid_batches(batches).filter(
        (F.col("producer_id") >= 0) & ~F.col("is_control") & (F.col("base_sequence") >= 0)
    )
    producer = ["topic", "partition", "producer_id", "producer_epoch"]
    same_batch = Window.partitionBy(*producer, "base_sequence").orderBy("batch_base_offset")
    marked = idempotent.select(
        "*",
        F.row_number().over(same_batch).alias("copy"),
        F.first("batch_base_offset").over(same_batch).alias("first_base"),
        F.first("batch_last_offset").over(same_batch).alias("first_last"),
        _last_sequence("base_sequence", "batch_base_offset", "batch_last_offset").alias(
            "last_sequence"
        ),
    )
    located = {
        "segment": "segment",
        "position": "position",
        "offset": "batch_base_offset",
        "producer_id": "producer_id",
    }
    duplicates = findings(
        marked.filter(F.col("copy") > 1),
        "duplicate_batch",
        F.format_string(
            "producer %d (epoch %d): the batch of sequences %d-%d at offsets %d-%d (%s,"
            " position %d) repeats the batch at offsets %d-%d",
            F.col("producer_id"),
            F.col("producer_epoch"),
            F.col("base_sequence"),
            F.col("last_sequence"),
            F.col("batch_base_offset"),
            F.col("batch_last_offset"),
            segment_name(),
            F.col("position"),
            F.col("first_base"),
            F.col("first_last"),
        ),
        F.col("batch_base_offset"),
        **located,
    )
    in_order = Window.partitionBy(*producer).orderBy("batch_base_offset")
    firsts = marked.filter(F.col("copy") == 1)
    followed = firsts.select(
        "*",
        F.lag("last_sequence").over(in_order).alias("prev_last_sequence"),
        F.lag("batch_last_offset").over(in_order).alias("prev_last_offset"),
    ).filter(F.col("prev_last_sequence").isNotNull())
    expected = F.when(F.col("prev_last_sequence") == INT32_MAX, 0).otherwise(
        F.col("prev_last_sequence") + 1
    )
    where = F.format_string(
        "producer %d (epoch %d): the batch at offsets %d-%d starts at sequence %d; its"
        " previous batch ends at sequence %d (offset %d)",
        F.col("producer_id"),
        F.col("producer_epoch"),
        F.col("batch_base_offset"),
        F.col("batch_last_offset"),
        F.col("base_sequence"),
        F.col("prev_last_sequence"),
        F.col("prev_last_offset"),
    )
    # In a compacted topic, a gap over offsets the log no longer has is the cleaner's
    # doing: the batches that held those sequences were removed. Elsewhere offsets go
    # only with whole segments from the start, so the gap is lost data like the
    # offsets' own (missing_offsets).
    missing = _offset_gaps(batches, compacted).select(
        "topic", "partition", F.col("prev_last").alias("gap_after"), "batch_base_offset"
    )
    skipped = followed.filter(F.col("base_sequence") > expected).alias("s")
    cleaned = skipped.join(
        missing.alias("g"),
        (F.col("s.topic") == F.col("g.topic"))
        & (F.col("s.partition") == F.col("g.partition"))
        & (F.col("g.gap_after") >= F.col("s.prev_last_offset"))
        & (F.col("g.batch_base_offset") <= F.col("s.batch_base_offset")),
        "left_anti",
    )
    # A batch failing its CRC between the two may have held the sequences: its header
    # cannot be trusted to say whose they were, and crc_mismatch reports it (one cause,
    # one error).
    damaged = batches.filter(
        F.col("batch_base_offset").isNotNull() & ~F.col("batch_crc_valid")
    ).select("topic", "partition", F.col("batch_base_offset").alias("damaged_at"))
    cleaned = cleaned.alias("s").join(
        damaged.alias("d"),
        (F.col("s.topic") == F.col("d.topic"))
        & (F.col("s.partition") == F.col("d.partition"))
        & (F.col("d.damaged_at") > F.col("s.prev_last_offset"))
        & (F.col("d.damaged_at") < F.col("s.batch_base_offset")),
        "left_anti",
    )
    gaps = findings(
        cleaned,
        "sequence_gap",
        F.concat(
            where,
            F.format_string(" (%d sequences missing)", F.col("base_sequence") - expected),
        ),
        F.col("batch_base_offset"),
        **located,
    )
    backwards = findings(
        followed.filter(F.col("base_sequence") < expected),
        "sequence_out_of_order",
        where,
        F.col("batch_base_offset"),
        **located,
    )
    return [duplicates, gaps, backwards]


# --- transactions -------------------------------------------------------------------


def transactions(batches: DataFrame, records: DataFrame) -> DataFrame:
    """One row per transaction of a producer in a partition: its data batches between
    two of its markers, and the marker that ends it (none for an open one)."""
    data = valid_batches(batches).filter(
        F.col("is_transactional") & ~F.col("is_control") & (F.col("producer_id") >= 0)
    )
    data_rows = data.select(
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        F.col("batch_base_offset").alias("offset"),
        F.col("batch_last_offset").alias("last_offset"),
        F.col("record_count").cast("long").alias("records"),
        F.lit(None).cast("string").alias("marker"),
    )
    markers = records.filter(
        F.col("is_control")
        & F.col("offset").isNotNull()
        & F.col("control_type").isin("ABORT", "COMMIT")
        & (F.col("producer_id") >= 0)
    ).select(
        "topic",
        "partition",
        "producer_id",
        "producer_epoch",
        "offset",
        F.col("offset").alias("last_offset"),
        F.lit(0).cast("long").alias("records"),
        F.col("control_type").alias("marker"),
    )
    rows = data_rows.unionByName(markers)
    earlier = (
        Window.partitionBy("topic", "partition", "producer_id")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    is_marker = F.col("marker").isNotNull()
    numbered = rows.select(
        "*",
        F.coalesce(F.sum(is_marker.cast("int")).over(earlier), F.lit(0)).alias("txn"),
    )
    grouped = numbered.groupBy("topic", "partition", "producer_id", "txn").agg(
        F.max("producer_epoch").alias("producer_epoch"),
        F.min(F.when(~is_marker, F.col("offset"))).alias("first_offset"),
        F.max(F.when(~is_marker, F.col("last_offset"))).alias("last_data_offset"),
        F.count(F.when(~is_marker, 1)).alias("batches"),
        F.sum("records").alias("records"),
        F.max(F.when(is_marker, F.col("offset"))).alias("marker_offset"),
        F.max("marker").alias("marker"),
    )
    outcome = (
        F.when(F.col("marker").isNull(), "open")
        .when(F.col("batches") == 0, "marker_without_data")
        .when(F.col("marker") == "COMMIT", "committed")
        .otherwise("aborted")
    )
    return grouped.select(
        "topic",
        F.col("partition").cast("int").alias("partition"),
        "producer_id",
        F.col("producer_epoch").cast("int").alias("producer_epoch"),
        "first_offset",
        "last_data_offset",
        "marker_offset",
        F.col("batches").cast("long").alias("batches"),
        F.col("records").cast("long").alias("records"),
        "marker",
        outcome.alias("outcome"),
    )


def transaction_findings(
    txns: DataFrame, batches: DataFrame, compacted: list[str]
) -> list[DataFrame]:
    located = {"offset": "first_offset", "producer_id": "producer_id"}
    open_txns = findings(
        txns.filter(F.col("outcome") == "open"),
        "open_transaction",
        F.format_string(
            "producer %d (epoch %d) has %d transactional batches (%d records) at offsets"
            " %d-%d and no COMMIT or ABORT marker after them",
            F.col("producer_id"),
            F.col("producer_epoch"),
            F.col("batches"),
            F.col("records"),
            F.col("first_offset"),
            F.col("last_data_offset"),
        ),
        F.col("first_offset"),
        **located,
    )
    aborted = findings(
        txns.filter(F.col("outcome") == "aborted"),
        "aborted_transaction",
        F.format_string(
            "producer %d (epoch %d): the transaction at offsets %d-%d (%d records) was"
            " aborted by the marker at offset %d",
            F.col("producer_id"),
            F.col("producer_epoch"),
            F.col("first_offset"),
            F.col("last_data_offset"),
            F.col("records"),
            F.col("marker_offset"),
        ),
        F.col("first_offset"),
        **located,
    )
    alone = _markers_without_data(txns, batches, compacted)
    message = F.format_string(
        "the %s marker at offset %d of producer %d (epoch %d) follows no transactional"
        " batch of that producer",
        F.col("marker"),
        F.col("marker_offset"),
        F.col("producer_id"),
        F.col("producer_epoch"),
    )
    where = {"offset": "marker_offset", "producer_id": "producer_id"}
    lost = findings(
        alone.filter(F.col("lost")),
        "commit_without_data",
        F.concat(message, F.lit(": the records it commits are not in the log")),
        F.col("marker_offset"),
        **where,
    )
    normal = findings(
        alone.filter(~F.col("lost")),
        "marker_without_data",
        message,
        F.col("marker_offset"),
        **where,
    )
    return [open_txns, aborted, lost, normal]


def _markers_without_data(txns: DataFrame, batches: DataFrame, compacted: list[str]) -> DataFrame:
    """The markers with no data before them, `lost` when that data cannot have gone
    the normal way: a COMMIT (an ABORT follows a produce that failed as well as one
    that was written) in a topic not compacted, unless it is its producer's first
    marker in a partition whose log no longer starts at 0 (retention may have removed
    the data before it)."""
    alone = txns.filter(F.col("outcome") == "marker_without_data")
    starts = (
        valid_batches(batches)
        .groupBy("topic", "partition")
        .agg(F.min("batch_base_offset").alias("log_start"))
    )
    earlier = Window.partitionBy("topic", "partition", "producer_id").orderBy(
        F.coalesce("first_offset", "marker_offset")
    )
    numbered = txns.select(
        "topic",
        "partition",
        "producer_id",
        "marker_offset",
        F.row_number().over(earlier).alias("nth"),
    )
    first = numbered.filter(F.col("nth") == 1).select(
        "topic", "partition", "producer_id", F.col("marker_offset").alias("first_marker")
    )
    joined = alone.join(starts, ["topic", "partition"], "left").join(
        first, ["topic", "partition", "producer_id"], "left"
    )
    retention = (F.col("log_start") > 0) & (F.col("first_marker") == F.col("marker_offset"))
    lost = (
        (F.col("marker") == "COMMIT")
        & ~F.col("topic").isin(compacted)
        & ~F.coalesce(retention, F.lit(False))
    )
    return joined.select("*", lost.alias("lost"))


# --- offsets ------------------------------------------------------------------------


def _offset_gaps(batches: DataFrame, topics: list[str] | None = None) -> DataFrame:
    """The batches that follow missing offsets, with `prev_last`, the last offset before
    the gap (only in `topics` when given). A batch failing its CRC still takes up its
    place in the offsets: counting it keeps a damaged batch (reported as such) from
    also showing as a gap."""
    placed = batches.filter(F.col("batch_base_offset").isNotNull())
    if topics is not None:
        placed = placed.filter(F.col("topic").isin(topics))
    in_offset_order = Window.partitionBy(*_PARTITION).orderBy("batch_base_offset")
    followed = placed.select(
        "*", F.lag("batch_last_offset").over(in_offset_order).alias("prev_last")
    )
    return followed.filter(F.col("batch_base_offset") > F.col("prev_last") + 1)


def offset_gap_findings(batches: DataFrame, compacted: list[str]) -> DataFrame:
    """Gaps between batches: offset_gap in a compacted topic, missing_offsets elsewhere."""
    return findings(
        _offset_gaps(batches),
        F.when(F.col("topic").isin(compacted), "offset_gap").otherwise("missing_offsets"),
        F.format_string(
            "offsets %d-%d are missing (%d offsets) before the batch at offset %d (%s,"
            " position %d)",
            F.col("prev_last") + 1,
            F.col("batch_base_offset") - 1,
            F.col("batch_base_offset") - F.col("prev_last") - 1,
            F.col("batch_base_offset"),
            segment_name(),
            F.col("position"),
        ),
        F.col("batch_base_offset"),
        segment="segment",
        position="position",
        offset="batch_base_offset",
    )
