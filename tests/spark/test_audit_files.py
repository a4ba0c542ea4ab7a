"""The audit's per-directory checks (brook.spark.audit.partition_files) without Spark: on
a log the broker's storage wrote and its cleaner compacted, and on damaged copies."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from brook.spark.audit.partition_files import PartitionTask, Settings, check_partition
from brook.storage.producer_snapshot import encode_snapshot, read_snapshot

from .audit_logs import compacted_partition

SETTINGS = Settings(max_findings=10, producer_id_expiration_ms=86_400_000)


def check(directory: Path) -> dict:
    topic, _, number = directory.name.rpartition("-")
    return check_partition(PartitionTask(topic, int(number), str(directory), 0), SETTINGS)


def test_a_compacted_log_is_consistent(tmp_path):
    directory = tmp_path / "compacted-0"
    compacted_partition(directory)
    assert len(list(directory.glob("*.log"))) > 1 and list(directory.glob("*.txnindex"))
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    result = check(directory)
    assert result["findings"] == [] and result["counts"] == {}
    assert result["facts"]["aborted_txns_indexed"] == 1
    assert result["facts"]["leader_epochs"] == [(0, 0)]
    # Nothing was written: the files are as they were.
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before


def test_snapshot_and_txn_index_disagreements_are_named(tmp_path):
    directory = tmp_path / "compacted-0"
    compacted_partition(directory)
    listing_before = sorted(p.name for p in directory.iterdir())
    newest = sorted(directory.glob("*.snapshot"))[-1]
    entries = read_snapshot(newest)
    changed = [dataclasses.replace(e, producer_epoch=e.producer_epoch + 1) for e in entries]
    newest.write_bytes(encode_snapshot(changed))
    for index in directory.glob("*.txnindex"):
        index.unlink()
    result = check(directory)
    assert set(result["counts"]) == {"snapshot_mismatch", "txn_index_mismatch"}
    snapshot = [f for f in result["findings"] if f["check"] == "snapshot_mismatch"]
    assert all("producerEpoch 1 in the file, 0 from the log" in f["message"] for f in snapshot)
    [txn] = [f for f in result["findings"] if f["check"] == "txn_index_mismatch"]
    assert txn["producer_id"] == 8 and "lacks the aborted transaction" in txn["message"]
    # The checks opened everything read-only: no file appeared or went.
    assert sorted(p.name for p in directory.iterdir()) == [
        name for name in listing_before if not name.endswith(".txnindex")
    ]


def test_an_unreadable_checkpoint_is_named(tmp_path):
    directory = tmp_path / "compacted-0"
    compacted_partition(directory)
    (directory / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n")  # promises 3 entries
    result = check(directory)
    assert result["counts"] == {"file_unreadable": 1}
    assert "leader-epoch-checkpoint does not read" in result["findings"][0]["message"]
