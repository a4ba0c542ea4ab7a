"""Every record of a log dir's topics as Brook's Spark data source (`kafka-segments`)
reads it, at each isolation level: run as a script in a process of its own (its own
Spark JVM), written as JSON for the test that compares them with a consumer's reads.

    python -m tests.apache_kafka.segment_rows LOG_DIR TOPICS OUT.json
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
    finally:
        spark.stop()
    return found


if __name__ == "__main__":
    os.environ["PYSPARK_PYTHON"] = sys.executable
    log_dir, topics, out = sys.argv[1:4]
    with open(out, "w") as written:
        json.dump(rows(log_dir, topics), written)
