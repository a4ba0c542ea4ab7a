"""`python -m bench.spark_read`: records per second per core of the kafka-segments data source.

Writes `--records` records (a 10-byte key, a `--value-size` value and one header each, in
uncompressed batches of 100: bench.record_decoding's segment) through Brook's own Log into
a partition of a temporary log dir, then reads every row of it in records mode (one row
per record, decoded) and in batches mode (one row per batch, records not decoded):

- without Spark: brook.spark.segment_rows.read_segment over each segment in this process,
  the work of a Spark task; records per CPU second of this process is the per-core figure;
- through Spark `local[1]` (one task at a time), every column of every row handed to
  Spark's `noop` sink, which consumes the rows and writes nothing; records per wall-clock
  second from the action's start to its end, and the CPU seconds the Python workers (the
  data source) and the JVM (Arrow to Spark rows, the sink) spent, which say more than the
  wall clock on a busy machine: the Python worker's records per CPU second is the
  per-core figure of the data source;
- through Spark, a read of 1% of the offsets (`offset BETWEEN ...`), which pushdown turns
  into the byte range of those offsets;
- records mode cut into 8 tasks (the `maxPartitionBytes` option) on `local[1]` and then on
  `local[2]`: how the read scales from one core to two.

Each measurement runs `--repeat` times and its best counts; a first Spark read warms the
JVM and the Python workers and is not counted. Needs the spark and bench extras and a JVM.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil  # type: ignore[import-untyped]  # psutil ships no types (types-psutil is no dependency)

from bench.cli import bench_parser
from bench.record_decoding import build_segment
from brook.storage import Log, LogConfig
from brook.storage.reader import partition_files

TOPIC = "bench"


def write_log_dir(root: Path, records: int, value_size: int, segment_bytes: int) -> int:
    """One partition `bench-0` of `records` records; returns the bytes of its segments."""
    buffer, headers = build_segment(records, value_size)
    log = Log.open(root / f"{TOPIC}-0", LogConfig(segment_bytes=segment_bytes))
    try:
        now_ms = int(time.time() * 1000)
        for header in headers:
            batch = bytes(buffer[header.position : header.position + header.size])
            log.append_as_leader(batch, 0, now_ms)
    finally:
        log.close()
    return partition_files(root / f"{TOPIC}-0").size


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of this process, of the JVMs and of the Python processes it
    started (Spark's Python workers), by kind."""
    times = psutil.Process().cpu_times()
    spent = {"this process": times.user + times.system, "jvm": 0.0, "python workers": 0.0}
    for child in psutil.Process().children(recursive=True):
        try:
            kind = "jvm" if "java" in child.name() else "python workers"
            times = child.cpu_times()
        except psutil.Error:
            continue  # gone since it was listed
        spent[kind] += times.user + times.system
    return spent


def best_of(repeat: int, run: Callable[[], int]) -> tuple[float, dict[str, float], int]:
    """(best wall seconds, CPU seconds by kind in that run, the run's result)."""
    best: tuple[float, dict[str, float], int] = (float("inf"), {}, 0)
    for _ in range(repeat):
        before, wall = cpu_seconds(), time.perf_counter()
        result = run()
        wall, after = time.perf_counter() - wall, cpu_seconds()
        if wall < best[0]:
            best = (wall, {kind: after[kind] - before[kind] for kind in after}, result)
    return best


def read_without_spark(root: Path, mode: str) -> int:
    from brook.spark.segment_rows import read_segment

    records = 0
    for segment in partition_files(root / f"{TOPIC}-0").segments:
        for batch in read_segment(segment.log_path, TOPIC, 0, mode):
            if mode == "records":
                records += batch.num_rows
            else:
                records += sum(batch.column("record_count").to_pylist())
    return records


def spark_session(cores: int = 1) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from brook.spark import register

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("brook-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def read_with_spark(
    spark: Any, root: Path, mode: str, where: str | None = None, split_bytes: int | None = None
) -> int:
    reader = spark.read.format("kafka-segments").option("mode", mode)
    if split_bytes is not None:
        reader = reader.option("maxPartitionBytes", str(split_bytes))
    df = reader.load(str(root))
    if where is not None:
        df = df.filter(where)
    df.write.format("noop").mode("overwrite").save()
    return 0


def _split_cpu(cpu: dict[str, float]) -> tuple[float, float]:
    return cpu["python workers"], cpu["jvm"]


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser("python -m bench.spark_read", __doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="records in the partition")
    parser.add_argument("--value-size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument(
        "--segment-bytes",
        type=int,
        default=64 * 1024 * 1024,
        help="segment.bytes of the partition (where it rolls)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="reads of each kind (the best)")
    parser.add_argument("--no-spark", action="store_true", help="only the reads without Spark")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="brook-bench-spark-") as directory:
        root = Path(directory)
        size = write_log_dir(root, args.records, args.value_size, args.segment_bytes)
        segments = len(partition_files(root / f"{TOPIC}-0").segments)
        print(
            f"{args.records:,} records of {args.value_size} B in batches of 100,"
            f" {segments} segment(s), {size / 1e6:.1f} MB; best of {args.repeat}"
        )
        results: list[tuple[str, str, float, float, float | None]] = []
        for mode in ("records", "batches"):
            wall, cpu, records = best_of(
                args.repeat, functools.partial(read_without_spark, root, mode)
            )
            assert records == args.records, (mode, records)
            results.append((mode, "without Spark", wall, cpu["this process"], None))
        if not args.no_spark:
            spark = spark_session()
            try:
                read_with_spark(spark, root, "batches")  # warm-up: JVM, Python workers
                low = args.records // 2
                where = f"offset BETWEEN {low} AND {low + args.records // 100 - 1}"
                for mode, label, condition in (
                    ("records", "Spark local[1]", None),
                    ("batches", "Spark local[1]", None),
                    ("records", "Spark, 1% of offsets", where),
                ):
                    wall, cpu, _ = best_of(
                        args.repeat,
                        functools.partial(read_with_spark, spark, root, mode, condition),
                    )
                    results.append((mode, label, wall, cpu["python workers"], cpu["jvm"]))
                # The same read cut into 8 tasks, on one core and then on two.
                split = functools.partial(read_with_spark, split_bytes=max(size // 8, 1))
                records_in_8 = functools.partial(split, spark, root, "records")
                wall, cpu, _ = best_of(args.repeat, records_in_8)
                results.append(("records", "Spark local[1], 8 tasks", wall, *_split_cpu(cpu)))
            finally:
                spark.stop()
            spark = spark_session(cores=2)
            try:
                split(spark, root, "batches")  # warm-up
                records_in_8 = functools.partial(split, spark, root, "records")
                wall, cpu, _ = best_of(args.repeat, records_in_8)
                results.append(("records", "Spark local[2], 8 tasks", wall, *_split_cpu(cpu)))
            finally:
                spark.stop()
        print(
            f"  {'mode':8} {'read':21} {'seconds':>8} {'records/s':>11}"
            f" {'records per CPU s':>18} {'JVM CPU s':>10}"
        )
        for mode, label, wall, cpu_s, jvm in results:
            records = args.records // 100 if "1%" in label else args.records
            per_cpu = f"{records / cpu_s:18,.0f}" if cpu_s > 0 else f"{'-':>18}"
            jvm_text = f"{'':>10}" if jvm is None else f"{jvm:10.2f}"
            print(f"  {mode:8} {label:21} {wall:8.3f} {records / wall:11,.0f} {per_cpu} {jvm_text}")
        print(
            "  records per CPU s: of this process without Spark, of Spark's Python"
            " workers (the data source) with it"
        )
        by_label = {label: wall for mode, label, wall, *_ in results if mode == "records"}
        one, two = by_label.get("Spark local[1], 8 tasks"), by_label.get("Spark local[2], 8 tasks")
        if one and two:
            print(f"  records mode on two cores: {one / two:.2f}x the wall-clock rate of one")


if __name__ == "__main__":
    main()
