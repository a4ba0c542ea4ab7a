"""One local SparkSession per xdist group of Spark tests, and the data source registered in it.

Spark starts a JVM (a few seconds), so a session is shared: the tests are put in xdist
groups (test.sh runs pytest with `--dist loadgroup`), each of which gets one worker, and so
one JVM, for all of its tests. The tests of a group run one after another, and under the
full suite a worker gets a third of a core, so a group's chain must stay well short of the
suite: three groups. The audit's clean and semantic cases and its report (and the log
dir Apache Kafka wrote, read and audited), the audit's other cases over its log dir
(injected faults, lost data, read_committed; and Spark's own Kafka source), and the data
source, compaction and their command lines. The
standalone cluster's test starts JVMs of its own and belongs to no group. The log dir
the audit's tests read is written once, by the first worker that needs it
(audit_logs.shared_log). The sessions carry Spark's Kafka connector (spark.jars, from
the jar cache bench/apache_kafka.py fills).
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


# The groups but the data source's ("spark"), by module: about as long as each other.
GROUPS = {
    "test_audit.py": "spark-audit",
    "test_audit_files.py": "spark-audit",
    # It reads the audit test_audit.py reads too (full_report, a session fixture).
    "test_audit_report.py": "spark-audit",
    # Kafka's own log dir (a session fixture of tests/conftest.py), read and audited.
    "test_kafka_written_dir.py": "spark-audit",
    "test_audit_faults.py": "spark-audit-log",
    "test_audit_lost_data.py": "spark-audit-log",
    "test_read_committed.py": "spark-audit-log",
    # Not over the audit's log dir: for balance.
    "test_spark_kafka.py": "spark-audit-log",
}


# Modules that use no shared session (none, or JVMs of their own): on any worker.
WITHOUT_SPARK = {"test_record_columns.py", "test_audit_cluster.py"}


def _group_of(module: str) -> str:
    return GROUPS.get(module, "spark")


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
        # The tests' data is kilobytes: Spark's code generation (whole-stage, and the
        # projections and predicates its tasks compile with Janino, which its cache
        # misses from one query to the next) and adaptive re-planning at each shuffle
        # cost more than they save, a third of a warm audit's CPU (25 -> 16 CPU-s). So
        # these sessions run Spark's interpreted expressions, planned once; the jobs
        # started as a user starts them (test_compact_cli.py, test_audit_cluster.py)
        # run Spark's defaults, code generation included.
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .config("spark.sql.adaptive.enabled", "false")
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
def audit_log(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    """A log dir a Brook broker wrote, with clean topics and semantic cases: one for
    every xdist worker (in the directory they share, the parent of each one's own; an
    xdist worker's config has `workerinput`), or this process's own without xdist."""
    from tests.conftest import run_shared_dir

    from .audit_logs import shared_log

    return shared_log(run_shared_dir(tmp_path_factory, request.config) / "spark-audit-log")


def _audit(spark: Any, log_dir: Path, out: Path, **options: Any) -> tuple[Any, str]:
    import io

    from brook.spark.audit import AuditOptions, run_audit

    progress = io.StringIO()
    data = run_audit(spark, AuditOptions(str(log_dir), str(out), **options), stream=progress)
    return data, progress.getvalue()


@pytest.fixture(scope="session")
def full_report(
    spark: Any, audit_log: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, Path]:
    """One audit of the whole log dir as a broker leaves it: every topic (the clean ones
    and the semantic cases: aborted, open, late), with the 50 partitions of
    __consumer_offsets a broker creates by default, 48 of them added empty, judging
    timestamps with a before bound of one hour. The semantic findings' test and the
    report's tests share it (an audit is a minute or two of a loaded suite)."""
    import shutil

    from .audit_logs import HOUR_MS

    log_dir = tmp_path_factory.mktemp("full") / "data"
    shutil.copytree(audit_log.data, log_dir)
    for number in range(2, 50):
        partition = log_dir / f"__consumer_offsets-{number}"
        partition.mkdir()
        (partition / "00000000000000000000.log").touch()
    out = tmp_path_factory.mktemp("full-report")
    data, _ = _audit(spark, log_dir, out, before_max_ms=HOUR_MS)
    return data, out


@pytest.fixture(scope="session")
def damaged_report(
    spark: Any, audit_log: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """One audit of a log dir of damaged copies of the broker's partitions, each under a
    name of its own: a fault each (audit_logs.damage), a duplicated batch, a compacted
    partition (its policy where the broker keeps it), data lost or written wrong in topics
    that are not compacted (lose_data) and a timestamp a day ahead (future-0), at most 5
    findings a check and partition. test_audit_faults.py and test_audit_lost_data.py each
    judge their own partitions in it (an audit is a minute or two of a loaded suite)."""
    import json

    from .audit_logs import (
        append_duplicate,
        compacted_partition,
        damage,
        future_partition,
        lose_data,
    )

    log_dir = tmp_path_factory.mktemp("damaged") / "data"
    faults = damage(audit_log.data, log_dir)
    duplicate_dir, original, copy = append_duplicate(audit_log.data, log_dir)
    compacted_partition(log_dir / "compacted-0")
    (log_dir / "brook-topic-configs.json").write_text(
        json.dumps({"compacted": {"cleanup.policy": ["compact"]}})
    )
    lost = lose_data(audit_log.data, log_dir)
    # The duplicated batch is lost data's case too: a retried batch appended twice.
    lost[duplicate_dir.name] = {"duplicate_batch"}
    future = future_partition(log_dir / "future-0")
    out = tmp_path_factory.mktemp("damaged-report")
    data, progress = _audit(spark, log_dir, out, max_findings=5)
    return {
        "data": data,
        "out": out,
        "progress": progress,
        "faults": faults,
        "duplicate": (duplicate_dir.name, original, copy),
        "lost": lost,
        "future": future,
    }
