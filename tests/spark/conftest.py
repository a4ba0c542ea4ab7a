"""One local SparkSession per xdist group of Spark tests, and the data source registered in it.

Spark starts a JVM (a few seconds), so a session is shared: the tests are put in two xdist
groups (test.sh runs pytest with `--dist loadgroup`), each of which gets one worker, and so
one JVM, for all of its tests. Two, not one, because the Spark tests run one after another
within a group and were the suite's longest chain: the audit's tests over the shared audit
log dir (and Spark's own Kafka source, for balance) in one, the data source, compaction and
the standalone cluster's in the other. The sessions carry Spark's Kafka connector
(spark.jars, from the jar cache bench/apache_kafka.py fills).
Spark's Python workers run this interpreter (PYSPARK_PYTHON), the one where brook.spark is
installed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.apache_kafka import spark_kafka_jars
from brook.spark import register

SPARK_TESTS = Path(__file__).parent


# First among the hooks: pytest-xdist's worker reads the marker in its own
# pytest_collection_modifyitems (it appends the group to the node id); run after it,
# this one would leave the Spark tests ungrouped, each worker starting its own JVM.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path)
        if SPARK_TESTS in path.parents and path.name not in WITHOUT_SPARK:
            item.add_marker(pytest.mark.xdist_group(_group_of(path.name)))


# The modules over the audit's shared log dirs and reports (built once per group's worker).
AUDIT_GROUP = {
    "test_audit.py",
    "test_audit_files.py",
    "test_audit_lost_data.py",
    "test_audit_report.py",
    "test_read_committed.py",
    # Not over the audit's log dirs, but the other group is the longer chain.
    "test_spark_kafka.py",
}


# Modules that start no Spark: they run on any worker, outside the two chains.
WITHOUT_SPARK = {"test_record_columns.py"}


def _group_of(module: str) -> str:
    return "spark-audit" if module in AUDIT_GROUP else "spark"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("brook-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        # Spark's own Kafka source and sink (test_spark_kafka.py), from the jar cache.
        .config("spark.jars", ",".join(str(jar) for jar in spark_kafka_jars()))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


# --- the audit's log dirs and reports (tests/spark/audit_logs.py) ---------------------


@pytest.fixture(scope="session")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A log dir a Brook broker wrote, with clean topics and semantic cases."""
    from .audit_logs import write_log

    return write_log(tmp_path_factory.mktemp("audit-log") / "data")


def _audit(spark: Any, log_dir: Path, out: Path, **options: Any) -> tuple[Any, str]:
    import io

    from brook.spark.audit import AuditOptions, run_audit

    progress = io.StringIO()
    data = run_audit(spark, AuditOptions(str(log_dir), str(out), **options), stream=progress)
    return data, progress.getvalue()


@pytest.fixture(scope="session")
def semantic_report(
    spark: Any, audit_log: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, Path]:
    """The audit of the semantic cases (aborted, open, late), judging timestamps with a
    before bound of one hour."""
    from .audit_logs import HOUR_MS, SEMANTIC_TOPICS

    out = tmp_path_factory.mktemp("semantic-report")
    data, _ = _audit(spark, audit_log.data, out, topics=SEMANTIC_TOPICS, before_max_ms=HOUR_MS)
    return data, out
