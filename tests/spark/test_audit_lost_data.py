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

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def lost_report(damaged_report: dict[str, Any]) -> Any:
    """The damaged log dir's audit (conftest.damaged_report), whose lost-data partitions
    (and future-0) these tests judge; the other partitions are test_audit_faults.py's."""
    report = damaged_report
    return report["data"], report["out"], report["lost"], report["progress"], report["future"]


def test_lost_and_duplicated_data_fail_the_audit(lost_report):
    data, out, expected, progress, _ = lost_report
    assert data.exit_status == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["exit_status"] == 1
    topics = {partition.rpartition("-")[0] for partition in expected} | {"future"}
    policies = {name: topic["cleanup_policy"] for name, topic in summary["topics"].items()}
    assert {name: policies[name] for name in topics} == dict.fromkeys(topics, "delete")
    # The other partitions of the dir are test_audit_faults.py's.
    rows = [r for r in pq.read_table(out / "findings.parquet").to_pylist() if r["topic"] in topics]
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
    lost = set().union(*expected.values())
    assert lost <= set(failed)

    def places(check: str) -> list[str]:
        return [p for p in failed[check]["partitions"] if p in expected]

    assert places("missing_offsets") == ["deleted-0", "emptied-0"]
    assert places("sequence_gap") == ["deleted-0", "emptied-0", "skipped-0"]
    assert all(entry["advice"] for entry in failed.values())
    [line] = [line for line in progress.splitlines() if "FAILED: " in line]
    assert lost <= set(line.split("FAILED: ")[1].split(";")[0].split(", "))

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
