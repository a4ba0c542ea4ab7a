"""The audit (brook.spark.audit) finds each fault injected into a copy of a log dir a
real Brook broker wrote (tests/spark/audit_logs.py) and names it at its place: one
partition per fault, a duplicated batch, a compacted partition whose gaps are the
cleaner's. A module of its own, so that its audit (conftest.damaged_report, which
test_audit_lost_data.py reads too) runs in another xdist group (its own Spark) than
test_audit.py's."""

from __future__ import annotations

import json

import pytest

from .test_audit import found

# A broker writing the log, a Spark job in one test's setup: on a loaded 2-core machine
# that can pass pytest's 300 s default.
pytestmark = pytest.mark.timeout(900)


def test_each_injected_fault_is_found_and_named(damaged_report):
    data, report = damaged_report["data"], damaged_report["out"]
    expected = damaged_report["faults"]
    duplicate_name, original, copy = damaged_report["duplicate"]
    assert data.exit_status == 1
    summary = json.loads((report / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["exit_status"] == 1

    for partition, check in expected.items():
        rows = found(report, partition)
        integrity = {r["check"] for r in rows if r["category"] == "integrity"}
        assert integrity == {check}, (partition, rows)
        assert all(r["severity"] == "error" for r in rows if r["check"] == check)

    # One cause, one error: the sequences the damaged batch held are no sequence gap.
    assert "sequence_gap" not in {r["check"] for r in found(report, "flipped-0")}
    [crc] = [r for r in found(report, "flipped-0") if r["check"] == "crc_mismatch"]
    assert "fails its CRC" in crc["message"] and crc["offset"] > 0 and crc["segment"] == 0
    [torn] = [r for r in found(report, "torn-0") if r["check"] == "torn_tail"]
    assert "torn batch" in torn["message"]
    [index] = [r for r in found(report, "index-0") if r["category"] == "integrity"]
    assert index["check"] == "offset_index_mismatch" and ".index: entry 0" in index["message"]
    epoch = found(report, "epoch-0")
    assert [r["check"] for r in epoch] == ["leader_epoch_mismatch"]
    assert (
        "carry partition leader epoch 0, but leader-epoch-checkpoint gives epoch 5"
        in (epoch[0]["message"])
    )
    snapshot = found(report, "snapshot-0")
    assert snapshot and all("lastSequence" in r["message"] for r in snapshot)
    txn_index = found(report, "txnindex-0")
    assert [r["check"] for r in txn_index if r["category"] == "integrity"] == ["txn_index_mismatch"]

    # The copy's records may also go back in time, behind the original's last ones.
    duplicate = found(report, duplicate_name)
    assert {r["check"] for r in duplicate} - {"timestamp_regression"} == {"duplicate_batch"}
    [dup] = [r for r in duplicate if r["check"] == "duplicate_batch"]
    assert dup["offset"] == copy and dup["category"] == "semantics"
    assert dup["severity"] == "error"
    assert f"repeats the batch at offsets {original}-" in dup["message"]

    # Compaction leaves offset gaps and sequence gaps over them: information (as the
    # aborted transaction is), no warning, no error.
    compacted = found(report, "compacted-0")
    assert "offset_gap" in {r["check"] for r in compacted}
    assert {r["severity"] for r in compacted} == {"info"}
