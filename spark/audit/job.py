"""The audit job: its stages, in order, and the command line that starts it.

    brook audit LOG_DIR --out REPORT_DIR [--master URL] [--topics ...]
    spark-submit --master URL .../brook/spark/audit/__main__.py LOG_DIR --out REPORT_DIR

Stages: list the partitions (on the driver, no file opened), read the batches and the
records through the kafka-segments data source (kept in memory for the stages after),
check each partition directory's files (one Spark task per directory, or per few small
ones), run the DataFrame checks and gather their findings, compute the statistics, and
write the report. run_audit() takes a SparkSession, so that tests and notebooks can
run it on a session they have; main() starts one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from brook.spark import register
from brook.spark.data_source import find_partitions
from brook.storage.reader import PartitionFiles

from . import frames, integrity, semantics, stats
from .cleanup_policies import cleanup_policies, read_topic_configs
from .findings import LOCATION, finding
from .options import AuditOptions, build_parser, from_args
from .partition_files import PartitionTask, Settings, check_partitions
from .progress import Progress
from .report import AuditData, write_report

STAGES = 6
# Work of a partition task beyond its bytes: opening its files, however small.
TASK_OVERHEAD_BYTES = 64 * 1024
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
# Segment bytes per shuffle partition: below it, one more partition costs a task in
# every shuffle of the job (a dozen of them) and gains nothing.
SHUFFLE_BYTES_PER_PARTITION = 64 * 1024 * 1024


def shuffle_partitions(spark: SparkSession, input_bytes: int) -> int:
    """The audit's shuffles carry batch headers, findings, aggregates and the records'
    times: a few partitions per core of the cluster, fewer for a small log dir, never
    Spark's default 200, each of which is a task of every shuffle (8,682 tasks and a
    minute for 1,000 records on 2 cores)."""
    cores = spark.sparkContext.defaultParallelism
    return max(2, min(2 * cores, 1 + input_bytes // SHUFFLE_BYTES_PER_PARTITION))


@contextmanager
def _scoped_conf(spark: SparkSession, key: str, value: str | None) -> Iterator[None]:
    """`key` set to `value` for the job's own work (None: left alone), then put back as
    the session had it: run_audit may run on a session of the caller's."""
    if value is None:
        yield
        return
    previous = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)


def run_audit(
    spark: SparkSession, options: AuditOptions, stream: TextIO | None = None
) -> AuditData:
    """Audit options.log_dir on `spark` and write the report to options.out_dir.

    The job's shuffles use a partition count of its own (shuffle_partitions()), unless
    options.spark_conf names one; the session's setting is put back afterwards."""
    started = time.monotonic()
    register(spark)
    partitions = _selected(options)
    count = None
    if SHUFFLE_PARTITIONS not in options.spark_conf:
        count = str(shuffle_partitions(spark, sum(p.size for p in partitions)))
    with _scoped_conf(spark, SHUFFLE_PARTITIONS, count):
        return _run(spark, options, partitions, started, stream)


def _run(
    spark: SparkSession,
    options: AuditOptions,
    partitions: list[PartitionFiles],
    started: float,
    stream: TextIO | None,
) -> AuditData:
    out_dir = Path(options.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    given = read_topic_configs(Path(options.topic_configs)) if options.topic_configs else None
    policies = cleanup_policies(partitions, given)
    compacted = sorted(topic for topic, policy in policies.items() if policy.compacted)
    data = AuditData(options=options, partitions=partitions, policies=policies)
    data.spark = {"master": str(spark.sparkContext.master), "version": spark.version}
    segments = sum(len(p.segments) for p in partitions)
    with Progress(STAGES, spark, stream) as progress:
        progress.say(
            f"{options.log_dir}: {len(partitions)} partitions, {segments} segments,"
            f" {sum(p.size for p in partitions):,} bytes"
        )
        with progress.stage("reading the batches"):
            batches = frames.batches(spark, options)
            data.totals["batch_rows"] = batches.count()
        with progress.stage("reading the records"):
            records = frames.records(spark, options)
            data.totals["record_rows"] = records.count()
        with progress.stage("checking each partition's index, epoch, snapshot and txn files"):
            _file_checks(spark, partitions, options, data)
        with progress.stage("checking batches, producers, transactions and timestamps"):
            transactions = semantics.transactions(batches, records).persist()
            data.totals["transactions"] = transactions.count()
            disorder = semantics.timestamp_disorder(records, options).persist()
            data.totals["disordered_records"] = disorder.count()
            found = [
                *integrity.batch_findings(batches, records),
                *semantics.producer_findings(batches, compacted),
                *semantics.transaction_findings(transactions, batches, compacted),
                *semantics.timestamp_findings(disorder, options),
                semantics.offset_gap_findings(batches, compacted),
            ]
            _gather_findings(found, options.max_findings, data)
        with progress.stage("statistics"):
            _statistics(batches, records, transactions, disorder, options, data)
        with progress.stage(f"writing the report to {out_dir}"):
            data.elapsed_seconds = time.monotonic() - started
            write_report(data, out_dir)
        for frame in (batches, records, transactions, disorder):
            frame.unpersist()
        failed = [entry["check"] for entry in data.failed_checks()]
        status = f"FAILED: {', '.join(failed)}" if failed else "passed"
        progress.say(f"{status}; {data.summary_line()}; report: {out_dir / 'report.html'}")
    return data


def _selected(options: AuditOptions) -> list[PartitionFiles]:
    partitions = find_partitions(options.log_dir)
    if options.topics:
        wanted = set(options.topics)
        partitions = [p for p in partitions if p.topic in wanted]
    return partitions


# --- the partition directories --------------------------------------------------------


def _bins(tasks: list[PartitionTask], count: int) -> list[list[PartitionTask]]:
    """Tasks spread over `count` bins, largest first into the lightest bin."""
    bins: list[list[PartitionTask]] = [[] for _ in range(count)]
    weights = [0] * count
    for task in sorted(tasks, key=lambda t: -t.size):
        lightest = weights.index(min(weights))
        bins[lightest].append(task)
        weights[lightest] += task.size + TASK_OVERHEAD_BYTES
    return [b for b in bins if b]


def _file_checks(
    spark: SparkSession, partitions: list[PartitionFiles], options: AuditOptions, data: AuditData
) -> None:
    tasks = [PartitionTask(p.topic, p.partition, str(p.path), p.size) for p in partitions]
    if not tasks:
        return
    settings = Settings(options.max_findings, options.producer_id_expiration_ms)
    count = min(len(tasks), spark.sparkContext.defaultParallelism * 2)
    bins = _bins(tasks, count)
    results = (
        spark.sparkContext.parallelize(bins, len(bins))
        .flatMap(lambda share: check_partitions(share, settings))
        .collect()
    )
    for result in results:
        key = (result["topic"], result["partition"])
        data.facts[key] = result["facts"]
        data.file_findings.extend(result["findings"])
        for check, count_found in result["counts"].items():
            data.counts[(check, *key)] = data.counts.get((check, *key), 0) + count_found
        for table in ("consumer_offsets", "groups", "transaction_state"):
            data.coordinator[table].extend(result.get(table, []))


# --- findings -------------------------------------------------------------------------


def _gather_findings(frames_found: Sequence[DataFrame], limit: int, data: AuditData) -> None:
    """All DataFrame findings in one Spark job: at most `limit` rows per check and
    partition (lowest rank first), each with the exact count of its group."""
    union = frames_found[0]
    for frame in frames_found[1:]:
        union = union.unionByName(frame)
    group = ["check", "topic", "partition"]
    ranked = Window.partitionBy(*group).orderBy("rank", "offset", "position")
    kept = (
        union.select(
            "*",
            F.row_number().over(ranked).alias("row"),
            F.count(F.lit(1)).over(Window.partitionBy(*group)).alias("found"),
        )
        .filter(F.col("row") <= limit)
        .orderBy("topic", "partition", "check", "row")
        .collect()
    )
    for row in kept:
        if row["row"] == 1:
            data.counts[(row["check"], row["topic"], row["partition"])] = row["found"]
        where = {name: row[name] for name in LOCATION}
        data.frame_findings.append(finding(row["check"], message=row["message"], **where))


# --- statistics -----------------------------------------------------------------------


def _rows(frame: DataFrame) -> list[dict[str, Any]]:
    return [row.asDict() for row in frame.collect()]


def _statistics(
    batches: DataFrame,
    records: DataFrame,
    transactions: DataFrame,
    disorder: DataFrame,
    options: AuditOptions,
    data: AuditData,
) -> None:
    for rows in (
        _rows(stats.batch_statistics(batches)),
        _rows(stats.record_statistics(records)),
        _rows(semantics.disorder_by_partition(disorder)),
    ):
        for row in rows:
            data.stats.setdefault((row.pop("topic"), row.pop("partition")), {}).update(row)
    data.regression_decades = _rows(semantics.regression_histogram(disorder))
    data.transactions = transactions.orderBy("topic", "partition", "first_offset").toArrow()
    span = stats.time_range(records, options.time_buckets)
    if span is not None:
        data.time_range = span
        data.over_time = _rows(stats.records_over_time(records, span))


# --- the command line -----------------------------------------------------------------


def _session(options: AuditOptions) -> SparkSession:
    """A session for the audit, or the one spark-submit prepared."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName("brook-audit")
    # spark-submit starts the JVM itself and hands Python its gateway; its --master
    # stands unless --master is given here too. Otherwise the audit runs locally.
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ
    master = options.master or ("" if submitted else "local[*]")
    if master:
        builder = builder.master(master)
    defaults = {
        "spark.sql.session.timeZone": "UTC",
        # No web UI unless asked for (--conf spark.ui.enabled=true): progress goes to
        # stderr, and the audit opens no port it does not need.
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
    }
    if master.startswith("local") or "//127.0.0.1:" in master or "//localhost:" in master:
        # Everything runs on this machine: the driver listens on the loopback only.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        defaults["spark.driver.host"] = "127.0.0.1"
        defaults["spark.driver.bindAddress"] = "127.0.0.1"
    for key, value in {**defaults, **options.spark_conf}.items():
        builder = builder.config(key, value)
    # The shuffle partitions are run_audit's to choose (unless --conf gives them).
    return builder.getOrCreate()


def main(argv: list[str] | None = None, prog: str = "brook audit") -> int:
    args = build_parser(prog).parse_args(argv)
    options = from_args(args)
    if not Path(options.log_dir).exists() and not any(c in options.log_dir for c in "*?["):
        print(f"{prog}: error: {options.log_dir}: no such directory", file=sys.stderr)
        return 2
    try:
        selected = _selected(options)
        if options.topic_configs:
            read_topic_configs(Path(options.topic_configs))
    except (OSError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    if not selected:
        which = f" of the topics {', '.join(options.topics)}" if options.topics else ""
        print(
            f"{prog}: error: {options.log_dir} holds no partition directory{which}", file=sys.stderr
        )
        return 2
    spark = _session(options)
    try:
        data = run_audit(spark, options)
    finally:
        spark.stop()
    return data.exit_status
