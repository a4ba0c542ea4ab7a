"""The Spark audit (brook.spark.audit) on log dirs a real Brook broker wrote with real
clients: a clean log audits clean, each injected fault is found and named at its place,
the coordinators' topics are decoded, and segments built by kafka-python read."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from .audit_logs import (
    CLEAN_TOPICS,
    GROUP,
    GZIP_PER_PARTITION,
    KEYS,
    ORDERS_PARTITIONS,
    ORDERS_PER_PARTITION,
    SEMANTIC_TOPICS,
)
from .conftest import _audit

# A broker writing the log, a Spark job (or a cluster's JVMs) in one test's setup: on
# a loaded 2-core machine that can pass pytest's 300 s default.
pytestmark = pytest.mark.timeout(900)

OUTPUTS = [
    "summary.json",
    "report.html",
    "findings.parquet",
    "partitions.parquet",
    "transactions.parquet",
    "consumer_offsets.parquet",
    "groups.parquet",
    "transaction_state.parquet",
]


def table(out: Path, name: str) -> list[dict[str, Any]]:
    return pq.read_table(out / f"{name}.parquet").to_pylist()


def by_partition(out: Path) -> dict[str, dict[str, Any]]:
    return {f"{r['topic']}-{r['partition']}": r for r in table(out, "partitions")}


def found(out: Path, where: str | None = None) -> list[dict[str, Any]]:
    rows = table(out, "findings")
    return [r for r in rows if where is None or f"{r['topic']}-{r['partition']}" == where]


@dataclass
class CleanReport:
    data: Any
    out: Path
    progress: str
    kafka_python_records: int  # in kafka-python-0, beside the broker's clean topics
    shuffle_setting_after: str  # the session's spark.sql.shuffle.partitions, set to 200
    widest_stage: int  # tasks of the audit's widest stage


@pytest.fixture(scope="module")
def clean_report(spark, audit_log, tmp_path_factory) -> CleanReport:
    """The audit of the clean topics, and of batches kafka-python's record builder made
    (kafka-python-0, every codec), in a copy of the log dir. It runs on a session with
    Spark's default of 200 shuffle partitions, each a task of every shuffle (8,682 tasks
    for 1,000 records before): the audit runs its shuffles on a few partitions per core
    and gives the session its setting back. (One audit for all: each costs a minute or
    two of a loaded machine.)"""
    log_dir = tmp_path_factory.mktemp("clean") / "data"
    shutil.copytree(audit_log.data, log_dir)
    records = _kafka_python_segment(log_dir / "kafka-python-0")
    out = tmp_path_factory.mktemp("clean-report")
    context = spark.sparkContext
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "200")
    group = f"audit-shuffle-{out.name}"
    try:
        context.setJobGroup(group, "the audit on a caller's session")
        topics = [*CLEAN_TOPICS, "kafka-python"]
        data, progress = _audit(spark, log_dir, out, topics=topics)
        after = spark.conf.get("spark.sql.shuffle.partitions")
    finally:
        context.setJobGroup(None, None)
        spark.conf.set("spark.sql.shuffle.partitions", previous)
    tracker = context.statusTracker()
    stages = [
        tracker.getStageInfo(stage)
        for job in tracker.getJobIdsForGroup(group)
        for stage in tracker.getJobInfo(job).stageIds
    ]
    widest = max(stage.numTasks for stage in stages if stage is not None)
    return CleanReport(data, out, progress, records, after, widest)


def test_a_clean_log_audits_clean(clean_report, audit_log):
    data, out, progress = clean_report.data, clean_report.out, clean_report.progress
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS)
    summary = json.loads((out / "summary.json").read_text())
    assert data.exit_status == summary["exit_status"] == 0
    assert summary["status"] == "ok"
    assert summary["findings_by_severity"] == {"error": 0, "warning": 0, "info": 0}
    assert found(out) == []
    # Every check ran and is listed, each with a count of 0.
    assert {check["count"] for check in summary["checks"].values()} == {0}
    assert "crc_mismatch" in summary["checks"] and "txn_index_mismatch" in summary["checks"]
    # A line per stage on the progress stream.
    assert "[1/6] reading the batches" in progress and "[6/6] writing the report" in progress

    partitions = by_partition(out)
    # --topics: the semantic cases are left out.
    assert {row["topic"] for row in partitions.values()} == {*CLEAN_TOPICS, "kafka-python"}
    for number in range(ORDERS_PARTITIONS):
        orders = partitions[f"orders-{number}"]
        records = ORDERS_PER_PARTITION + GZIP_PER_PARTITION
        assert orders["records"] == records
        assert orders["first_offset"] == 0 and orders["last_offset"] == records - 1
        assert orders["records_none"] == ORDERS_PER_PARTITION
        assert orders["records_gzip"] == GZIP_PER_PARTITION
        assert orders["distinct_keys"] == KEYS
        assert orders["shadowed_records"] == records - KEYS
        assert orders["shadowed_share"] == pytest.approx((records - KEYS) / records)
        assert orders["segments"] > 1 and orders["batches"] > orders["segments"]
        assert orders["producers"] == 2 and orders["timestamp_regressions"] == 0
        assert orders["bytes"] == orders["size_on_disk"]
        assert orders["leader_epochs"] == "0@0"
        assert orders["first_timestamp"] <= orders["last_timestamp"]
    txn = partitions["txn-0"]
    assert (txn["records"], txn["txn_committed"], txn["txn_aborted"]) == (40, 2, 0)
    assert [t["outcome"] for t in table(out, "transactions")] == ["committed", "committed"]
    assert summary["totals"]["records"] == sum(r["records"] for r in partitions.values())


def test_consumer_offsets_written_by_the_group_coordinator_are_decoded(clean_report, audit_log):
    out = clean_report.out
    offsets = table(out, "consumer_offsets")
    assert {(o["topic"], o["partition"]): o["committed_offset"] for o in offsets} == (
        audit_log.committed
    )
    assert {o["group"] for o in offsets} == {GROUP}
    assert all(o["pending_producer_id"] is None and o["commit_timestamp"] for o in offsets)
    groups = table(out, "groups")
    assert [(g["group"], g["protocol_type"]) for g in groups] == [(GROUP, "consumer")]
    assert groups[0]["generation"] >= 1
    states = {s["transactional_id"]: s for s in table(out, "transaction_state")}
    assert states["tx-committed"]["status"] == "COMPLETE_COMMIT"
    assert states["tx-aborted"]["status"] == "COMPLETE_COMMIT"  # its last one committed
    assert states["tx-open"]["status"] == "ONGOING"
    assert states["tx-open"]["partitions"] == ["open-0"]
    assert all(s["producer_id"] >= 0 and s["timeout_ms"] > 0 for s in states.values())


def test_semantic_findings_are_found_and_named(full_report, audit_log):
    """The semantic cases, audited with the clean topics beside them (which add none)."""
    data, out = full_report
    assert data.exit_status == 0  # warnings and information do not fail the audit
    counts = json.loads((out / "summary.json").read_text())["checks"]
    nonzero = {name: check["count"] for name, check in counts.items() if check["count"]}
    # Records below a running maximum count once per record that set it (their cause).
    assert nonzero == {
        "aborted_transaction": 1,
        "open_transaction": 1,
        "timestamp_regression": 3,
        "timestamp_before_bound": 2,
        "timestamp_after_bound": 1,
    }
    aborted = found(out, "aborted-0")
    assert [f["check"] for f in aborted] == ["aborted_transaction"]
    assert aborted[0]["severity"] == "info" and "(10 records) was aborted" in aborted[0]["message"]
    opened = found(out, "open-0")
    assert [(f["check"], f["severity"], f["offset"]) for f in opened] == [
        ("open_transaction", "warning", 0)
    ]
    assert "7 records" in opened[0]["message"]

    stamps = audit_log.late_timestamps
    late = {(f["check"], f["offset"]): f for f in found(out, "late-0")}
    # Offsets 2 and 4 are late, one record each; 6 and 7 are below the future one at 5.
    assert sorted(offset for check, offset in late if check == "timestamp_regression") == [
        2,
        4,
        5,
    ]
    worst = late[("timestamp_regression", 4)]
    assert f"{stamps[3] - stamps[4]} ms below" in worst["message"]
    ahead = late[("timestamp_regression", 5)]
    assert f"has timestamp {stamps[5]}, ahead of the 2 records after it" in ahead["message"]
    assert {o for c, o in late if c == "timestamp_before_bound"} == {4, 5}
    assert {o for c, o in late if c == "timestamp_after_bound"} == {5}
    partitions = by_partition(out)
    assert partitions["late-0"]["max_regression_ms"] == stamps[3] - stamps[4]
    assert partitions["late-0"]["after_bound"] == 1

    outcomes = [(t["topic"], t["outcome"], t["records"]) for t in table(out, "transactions")]
    assert sorted(o for o in outcomes if o[0] in SEMANTIC_TOPICS) == [
        ("aborted", "aborted", 10),
        ("aborted", "committed", 5),
        ("open", "open", 7),
    ]


def _kafka_python_segment(path: Path) -> int:
    """Batches built by kafka-python's record builder (the bytes its producer sends), one
    per codec, their offsets assigned as a broker assigns them; returns the records."""
    codecs = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    data, next_offset = bytearray(), 0
    for codec in codecs.values():
        builder = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=codec,
            is_transactional=False,
            producer_id=-1,
            producer_epoch=-1,
            base_sequence=-1,
            batch_size=1 << 20,
        )
        for delta in range(10):
            builder.append(
                delta,
                timestamp=1_700_000_000_000 + next_offset + delta,
                key=b"kp-%d" % ((next_offset + delta) % 7),
                value=b"value %d" % delta * 5,
                headers=[("h", b"v")],
            )
        batch = builder.build()
        struct.pack_into(">q", batch, 0, next_offset)  # the broker's offset assignment
        data += batch
        next_offset += 10
    path.mkdir(parents=True)
    (path / "00000000000000000000.log").write_bytes(bytes(data))
    return next_offset


def brook(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "brook.broker.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bad_arguments_are_refused_before_spark_starts(tmp_path):
    missing = brook("audit", str(tmp_path / "nowhere"), "--out", str(tmp_path / "r"))
    assert missing.returncode == 2
    assert "no such directory" in missing.stderr and "Traceback" not in missing.stderr
    no_out = brook("audit", str(tmp_path))
    assert no_out.returncode == 2 and "--out" in no_out.stderr
    bad = brook("audit", str(tmp_path), "--out", str(tmp_path / "r"), "--max-findings", "0")
    assert bad.returncode == 2 and "--max-findings" in bad.stderr
    empty = brook("audit", str(tmp_path), "--out", str(tmp_path / "r"))
    assert empty.returncode == 2 and "holds no partition directory" in empty.stderr
    (tmp_path / "orders-0").mkdir()
    other = brook("audit", str(tmp_path), "--out", str(tmp_path / "r"), "--topics", "payments")
    assert other.returncode == 2
    assert "holds no partition directory of the topics payments" in other.stderr
    assert not (tmp_path / "r").exists()
    helped = brook("audit", "--help")
    assert helped.returncode == 0 and "exit status" in helped.stdout
    listed = brook("--help")
    assert "audit" in listed.stdout


def test_kafka_python_segments_are_read_on_a_callers_session_and_its_shuffle_setting(
    clean_report,
):
    """Batches kafka-python's record builder made (every codec) are read and counted, on
    a session whose shuffle setting the audit leaves as it found it (clean_report)."""
    assert clean_report.shuffle_setting_after == "200"
    records = clean_report.kafka_python_records
    [row] = [r for r in table(clean_report.out, "partitions") if r["topic"] == "kafka-python"]
    assert (row["records"], row["batches"], row["distinct_keys"]) == (records, 5, 7)
    assert [row[f"records_{codec}"] for codec in ("none", "gzip", "snappy", "lz4", "zstd")] == [
        10
    ] * 5
    assert row["timestamp_regressions"] == 0 and row["last_offset"] == records - 1
    # The widest stage is the union of the findings' frames, a few tasks each: not 200.
    assert clean_report.widest_stage < 200, clean_report.widest_stage
