"""Brook's Spark jobs over a log dir, in one process (one Spark JVM for both): every
record of the given topics as the `kafka-segments` data source reads it at each
isolation level, written as JSON for the test that compares them with a consumer's
reads; then `brook audit` of the whole dir, through the command's own entry point (its
session is this one, which it stops), its exit status written beside the rows.

    python -m tests.apache_kafka.spark_reads LOG_DIR TOPICS OUT.json AUDIT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def rows(log_dir: str, topics: str) -> dict[str, list[list[Any]]]:
    from pyspark.sql import SparkSession

    from brook.spark import register

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    register(spark)
    found: dict[str, list[list[Any]]] = {}
    try:
        for isolation in ("read_uncommitted", "read_committed"):
            frame = (
                spark.read.format("kafka-segments")
                .option("topics", topics)
                .option("isolation.level", isolation)
                .load(log_dir)
                .filter("NOT is_control AND error IS NULL")
                .selectExpr(
                    "topic",
                    "partition",
                    "offset",
                    "unix_millis(timestamp) AS timestamp",
                    "hex(key) AS key",
                    "hex(value) AS value",
                    "transform(headers, h -> array(h.key, hex(h.value))) AS headers",
                )
            )
            for row in frame.collect():
                found.setdefault(f"{row.topic}/{isolation}", []).append(
                    [row.partition, row.offset, row.timestamp, row.key, row.value, row.headers]
                )
    except BaseException:
        spark.stop()
        raise
    return found


if __name__ == "__main__":
    os.environ["PYSPARK_PYTHON"] = sys.executable
    log_dir, topics, out, audit_dir = sys.argv[1:5]
    found = rows(log_dir, topics)
    from brook.broker.tools.audit import main as brook_audit

    status = brook_audit([log_dir, "--out", audit_dir])
    with open(out, "w") as written:
        json.dump({"rows": found, "audit_exit_status": status}, written)
