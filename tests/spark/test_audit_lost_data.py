"""The audit on logs that lost data or hold it twice, in topics that are not compacted:
each case fails the exit status, and the report's banner names the check, the place and
what to do. A compacted topic's gaps stay information (test_audit.py)."""

from __future__ import annotations

import json
import re
from html import unescape
from typing import Any

import pyarrow.parquet as pq
import pytest

from .audit_logs import future_partition, lose_data
from .conftest import _audit

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def lost_report(spark: Any, audit_log: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    log_dir = tmp_path_factory.mktemp("lost") / "data"
    expected = lose_data(audit_log.data, log_dir)
    future = future_partition(log_dir / "future-0")
    out = tmp_path_factory.mktemp("lost-report")
    data, progress = _audit(spark, log_dir, out)
    return data, out, expected, progress, future


def test_lost_and_duplicated_data_fail_the_audit(lost_report):
    data, out, expected, progress, _ = lost_report
    assert data.exit_status == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["exit_status"] == 1
    topics = {partition.rpartition("-")[0] for partition in expected} | {"future"}
    assert {name: topic["cleanup_policy"] for name, topic in summary["topics"].items()} == (
        dict.fromkeys(topics, "delete")
    )
    rows = pq.read_table(out / "findings.parquet").to_pylist()
    for partition, checks in expected.items():
        errors = {
            r["check"]
            for r in rows
            if f"{r['topic']}-{r['partition']}" == partition and r["severity"] == "error"
        }
        assert errors == checks, (partition, rows)
    # Not the compaction's gaps: no information-level offset_gap for them.
    assert "offset_gap" not in {r["check"] for r in rows}
    [deleted] = [r for r in rows if r["check"] == "missing_offsets" and r["topic"] == "deleted"]
    assert re.search(r"offsets \d+-\d+ are missing \(40 offsets\)", deleted["message"])
    [commit] = [r for r in rows if r["check"] == "commit_without_data"]
    assert commit["producer_id"] == 4242 and "COMMIT marker" in commit["message"]

    failed = {entry["check"]: entry for entry in summary["failed_checks"]}
    assert set(failed) == set().union(*expected.values())
    assert failed["missing_offsets"]["partitions"] == ["deleted-0", "emptied-0"]
    assert failed["sequence_gap"]["partitions"] == ["deleted-0", "emptied-0", "skipped-0"]
    assert all(entry["advice"] for entry in failed.values())
    assert "FAILED: missing_offsets, duplicate_batch, sequence_gap, commit_without_data;" in (
        progress
    )

    # The banner says what failed, where, and what to do.
    html = (out / "report.html").read_text()
    banner = unescape(re.search(r'<div class="banner failed">(.*?)</div>', html, re.S).group(1))
    for check, entry in failed.items():
        assert check in banner and entry["advice"] in banner
    assert "deleted-0, emptied-0" in banner and "offsets" in banner


def test_one_future_timestamp_is_one_finding(lost_report):
    """199 records follow a timestamp a day ahead: one timestamp_regression, at the record
    that is ahead (the cause), and one timestamp_after_bound, not one per record."""
    _, out, _, _, future = lost_report
    rows = pq.read_table(out / "findings.parquet").to_pylist()
    found = [r for r in rows if r["topic"] == "future"]
    assert sorted((r["check"], r["offset"]) for r in found) == [
        ("timestamp_after_bound", 100),
        ("timestamp_regression", 100),
    ]
    [regression] = [r for r in found if r["check"] == "timestamp_regression"]
    assert f"has timestamp {future}, ahead of the 199 records after it" in regression["message"]
    assert "offsets 101-299" in regression["message"]
    # The statistics still count every record below the running maximum.
    [row] = [
        r for r in pq.read_table(out / "partitions.parquet").to_pylist() if r["topic"] == "future"
    ]
    assert row["timestamp_regressions"] == 199
