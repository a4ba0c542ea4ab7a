"""Transactions in a partition's log: the last stable offset, the `.txnindex` and its
recovery, the aborted transactions of a read_committed read, and the producer-state
checks by append origin.

The `.txnindex` files are decoded here by hand from Kafka's format (34-byte entries:
version int16, producer id int64, first offset int64, last offset int64, last stable
offset int64), not through the module that writes them.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from storage_helpers import BASE_TS, make_batch

from brook.protocol import coordinator_records as cr
from brook.protocol.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig
from brook.storage.log_validator import AppendOrigin
from brook.storage.transaction_index import AbortedTxn, TransactionIndex

A, B = 1000, 2000
ABORT, COMMIT = cr.ControlRecordType.ABORT, cr.ControlRecordType.COMMIT
ENTRY = struct.Struct(">hqqqq")


def txn(producer_id: int, sequence: int, count: int = 2, epoch: int = 0) -> bytearray:
    records = [Record(i, BASE_TS, None, b"t%d" % (sequence + i)) for i in range(count)]
    return bytearray(
        build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        )
    )


def idempotent(producer_id: int, sequence: int, epoch: int = 0) -> bytearray:
    records = [Record(0, BASE_TS, None, b"i%d" % sequence)]
    return bytearray(
        build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    )


def marker(
    producer_id: int, result: cr.ControlRecordType, epoch: int = 0, coordinator_epoch: int = 0
) -> bytearray:
    record = Record(
        0,
        BASE_TS,
        cr.encode_key(cr.ControlRecordKey(int(result))),
        cr.encode_value(cr.EndTxnMarker(coordinator_epoch=coordinator_epoch)),
    )
    return bytearray(
        build_batch(
            [record],
            producer_id=producer_id,
            producer_epoch=epoch,
            transactional=True,
            control=True,
        )
    )


def produce(log: Log, batch: bytearray, move_hw: bool = True) -> int:
    """A client's append as leader; returns its first offset."""
    info = log.append_as_leader(batch, 0, BASE_TS, AppendOrigin.CLIENT)
    if move_hw:
        log.high_watermark = log.log_end_offset
    return info.first_offset


def end_txn(log: Log, batch: bytearray, move_hw: bool = True) -> int:
    """A coordinator's marker append; returns its offset."""
    info = log.append_as_leader(batch, 0, BASE_TS, AppendOrigin.COORDINATOR)
    if move_hw:
        log.high_watermark = log.log_end_offset
    return info.first_offset


def txn_index_entries(path: Path) -> list[tuple[int, int, int, int, int]]:
    data = path.read_bytes()
    assert len(data) % ENTRY.size == 0
    return [tuple(fields) for fields in ENTRY.iter_unpack(data)]


def txn_index_file(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}.txnindex"


def txn_indexes(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.txnindex"))}


# --- the last stable offset ------------------------------------------------------------


def test_last_stable_offset_follows_the_earliest_open_transaction(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    log.append_as_leader(make_batch(2), 0, BASE_TS)
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == log.high_watermark == 2
    assert produce(log, txn(A, 0)) == 2  # A's transaction begins at 2
    assert produce(log, txn(B, 0, count=1)) == 4  # B's at 4
    assert produce(log, txn(A, 2)) == 5
    assert (log.last_stable_offset, log.high_watermark) == (2, 7)
    assert log.producer_state.producers[A].current_txn_first_offset == 2
    assert end_txn(log, marker(A, COMMIT)) == 7
    assert log.last_stable_offset == 4, "B's transaction is still open"
    assert not txn_index_file(partition_dir, 0).exists(), "a commit is not indexed"
    assert end_txn(log, marker(B, ABORT)) == 8
    assert log.last_stable_offset == log.high_watermark == 9
    # B's abort: first offset 4, marker 8, and nothing undecided after it (LSO 9).
    assert txn_index_entries(txn_index_file(partition_dir, 0)) == [(0, B, 4, 8, 9)]
    # An abort while another transaction is open records where that one starts.
    assert produce(log, txn(A, 4, count=1)) == 9
    assert produce(log, txn(B, 1, count=1)) == 10
    assert end_txn(log, marker(A, ABORT)) == 11
    assert txn_index_entries(txn_index_file(partition_dir, 0))[1] == (0, A, 9, 11, 10)
    assert log.last_stable_offset == 10
    # A marker of a transaction that wrote nothing here leaves no entry.
    assert end_txn(log, marker(A, ABORT)) == 12
    assert len(txn_index_entries(txn_index_file(partition_dir, 0))) == 2
    log.close()


def test_a_completed_transaction_stays_unstable_until_its_marker_is_replicated(
    partition_dir: Path,
) -> None:
    log = Log.open(partition_dir, LogConfig())
    produce(log, txn(A, 0))
    end_txn(log, marker(A, COMMIT), move_hw=False)  # the marker at 2, the HW still at 2
    assert log.producer_state.ongoing_txns == {}
    assert log.last_stable_offset == 0, "the commit is not replicated yet"
    log.high_watermark = 3
    assert log.last_stable_offset == 3
    log.close()


def test_open_transactions_survive_a_clean_restart(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    produce(log, make_batch(1))
    produce(log, txn(A, 0))
    produce(log, txn(B, 0))
    end_txn(log, marker(A, ABORT))
    log.close()  # a snapshot at the log end, holding B's open transaction at 3
    log = Log.open(partition_dir, LogConfig())
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 3
    assert log.producer_state.producers[B].current_txn_first_offset == 3
    end_txn(log, marker(B, COMMIT))
    assert log.last_stable_offset == log.log_end_offset == 7
    log.close()


# --- read_committed reads ------------------------------------------------------------------


def test_read_committed_returns_the_aborted_transactions_it_overlaps(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    produce(log, txn(A, 0))  # 0-1, aborted at 2
    end_txn(log, marker(A, ABORT))
    produce(log, txn(B, 0))  # 3-4, committed at 5
    end_txn(log, marker(B, COMMIT))
    produce(log, txn(A, 2, epoch=0))  # 6-7, aborted at 8
    end_txn(log, marker(A, ABORT))
    produce(log, make_batch(1))  # 9
    read = log.read(0, 1 << 20, log.last_stable_offset, include_aborted_txns=True)
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions or []] == [
        (A, 0),
        (A, 6),
    ]
    later = log.read(3, 1 << 20, log.last_stable_offset, include_aborted_txns=True)
    assert [t.first_offset for t in later.aborted_transactions or []] == [6]
    past = log.read(9, 1 << 20, log.last_stable_offset, include_aborted_txns=True)
    assert past.aborted_transactions == []
    at_end = log.read(10, 1 << 20, log.last_stable_offset, include_aborted_txns=True)
    assert at_end.records == b"" and at_end.aborted_transactions == []
    assert log.read(0, 1 << 20, log.high_watermark).aborted_transactions is None
    log.close()


def test_a_transaction_spanning_segments_is_found_from_the_fetched_one(
    partition_dir: Path,
) -> None:
    log = Log.open(partition_dir, LogConfig())
    produce(log, txn(A, 0))  # 0-1 in the first segment
    log.roll()
    produce(log, txn(A, 2))  # 2-3 in the second
    log.roll()
    end_txn(log, marker(A, ABORT))  # 4 in the third, which holds the entry
    assert not txn_index_file(partition_dir, 0).exists()
    assert txn_index_entries(txn_index_file(partition_dir, 4)) == [(0, A, 0, 4, 5)]
    read = log.read(0, 1 << 20, log.last_stable_offset, include_aborted_txns=True)
    assert read.records and [t.first_offset for t in read.aborted_transactions or []] == [0]
    log.close()


def test_read_committed_stops_at_the_last_stable_offset(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    produce(log, make_batch(2))
    produce(log, txn(A, 0))  # open at 2
    produce(log, make_batch(2))  # 4-5, after the open transaction
    read = log.read(0, 1 << 20, log.last_stable_offset, include_aborted_txns=True)
    assert read.last_stable_offset == 2 and read.high_watermark == 6
    assert read.records and struct.unpack_from(">q", read.records)[0] == 0
    assert len(read.records) == len(make_batch(2))
    assert log.read(2, 1 << 20, log.last_stable_offset).records == b""
    log.close()


# --- the index follows its segment -----------------------------------------------------


def test_truncation_and_deletion_take_the_txn_index_along(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig(file_delete_delay_ms=0))
    produce(log, txn(A, 0))
    end_txn(log, marker(A, ABORT))  # 2
    produce(log, txn(B, 0))
    end_txn(log, marker(B, ABORT))  # 5
    path = txn_index_file(partition_dir, 0)
    assert [entry[3] for entry in txn_index_entries(path)] == [2, 5]
    log.truncate_to(4)  # B's marker goes, and with it B's entry
    assert [entry[3] for entry in txn_index_entries(path)] == [2]
    assert log.last_stable_offset == 3, "B's transaction is open again"
    log.truncate_to(2)
    assert not path.exists(), "no entry left: no file"
    end_txn(log, marker(A, ABORT))  # A's transaction ends again at 2
    assert txn_index_entries(path) == [(0, A, 0, 2, 3)]
    log.roll()
    produce(log, make_batch(1))
    log.high_watermark = log.log_end_offset
    log.maybe_increment_log_start_offset(3)
    assert not path.exists(), "the deleted segment's txn index is gone too"
    log.close()


# --- recovery --------------------------------------------------------------------------


def _write_transactions(directory: Path) -> Log:
    """Three segments: A aborted across the first two, B aborted in the third while C
    stays open from the second segment on."""
    log = Log.open(directory, LogConfig())
    produce(log, make_batch(1))  # 0
    produce(log, txn(A, 0))  # 1-2
    log.roll()  # segment 3 (a snapshot there holds A's open transaction)
    produce(log, txn(2999, 0))  # 3-4: C, left open
    end_txn(log, marker(A, ABORT))  # 5: A [1, 5], LSO 3 (C)
    log.roll()  # segment 6
    produce(log, txn(B, 0))  # 6-7
    end_txn(log, marker(B, ABORT))  # 8: B [6, 8], LSO 3
    produce(log, make_batch(1))  # 9
    return log


@pytest.mark.parametrize("damage", ["deleted", "torn", "kept", "no snapshots"])
def test_recovery_after_a_crash_rebuilds_the_txn_index(partition_dir: Path, damage: str) -> None:
    log = _write_transactions(partition_dir)
    expected = txn_indexes(partition_dir)
    assert [txn_index_entries(partition_dir / name) for name in expected] == [
        [(0, A, 1, 5, 3)],
        [(0, B, 6, 8, 3)],
    ]
    lso = log.last_stable_offset
    assert lso == 3
    log.flush(3)  # the first segment reaches the disk: recovery starts at the second
    recovery_point = log.recovery_point
    log.close_handlers()  # a crash: no clean close, no snapshot at the log end
    if damage == "no snapshots":  # the state is replayed from the log start instead
        for path in partition_dir.glob("*.snapshot"):
            path.unlink()
    for path in partition_dir.glob("*.txnindex"):
        if damage in ("deleted", "no snapshots"):
            path.unlink()
        elif damage == "torn":
            path.write_bytes(path.read_bytes()[:-5])
    reopened = Log.open(
        partition_dir, LogConfig(), recovery_point=recovery_point, clean_shutdown=False
    )
    assert txn_indexes(partition_dir) == expected
    reopened.high_watermark = reopened.log_end_offset
    assert reopened.last_stable_offset == lso
    # A read stays within one segment: each sees the aborted transactions it overlaps.
    for offset, aborted in ((0, [(A, 1)]), (3, [(A, 1)]), (6, [(B, 6)])):
        read = reopened.read(offset, 1 << 20, include_aborted_txns=True)
        assert read.records
        assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions or []] == aborted
    reopened.close()


def test_a_damaged_txn_index_is_rebuilt_at_a_clean_start(partition_dir: Path) -> None:
    log = _write_transactions(partition_dir)
    expected = txn_indexes(partition_dir)
    log.close()
    txn_index_file(partition_dir, 3).write_bytes(b"\x00" * 40)
    reopened = Log.open(partition_dir, LogConfig())
    assert txn_indexes(partition_dir) == expected
    reopened.close()


# --- checks by origin ------------------------------------------------------------------


def test_a_coordinators_transactional_writes_carry_no_sequence(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    # A coordinator's transactional offset commit: producer id and epoch, no sequence.
    unsequenced = txn(A, -1, count=1)
    assert end_txn(log, unsequenced) == 0
    assert end_txn(log, unsequenced) == 1, "not taken for a retried client batch"
    assert log.last_stable_offset == 0
    end_txn(log, marker(A, COMMIT))
    assert log.last_stable_offset == 3
    log.close()


def test_markers_are_checked_against_epochs(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    produce(log, txn(A, 0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        end_txn(log, marker(A, ABORT, epoch=2))
    end_txn(log, marker(A, ABORT, epoch=3, coordinator_epoch=5))
    with pytest.raises(TransactionCoordinatorFencedError):
        end_txn(log, marker(A, COMMIT, epoch=3, coordinator_epoch=4))
    assert log.log_end_offset == 3, "a refused marker is not written"
    # A marker with a newer epoch (the coordinator fenced the producer) is taken.
    end_txn(log, marker(A, ABORT, epoch=4, coordinator_epoch=5))
    assert log.producer_state.producers[A].producer_epoch == 4
    log.close()


def test_a_producer_inside_a_transaction_writes_transactionally(partition_dir: Path) -> None:
    log = Log.open(partition_dir, LogConfig())
    produce(log, txn(A, 0))
    with pytest.raises(InvalidTxnStateError):
        produce(log, idempotent(A, 2))
    assert log.log_end_offset == 2
    log.close()


def test_a_follower_indexes_the_aborts_it_copies(tmp_path: Path) -> None:
    leader = Log.open(tmp_path / "leader" / "t-0", LogConfig())
    produce(leader, txn(A, 0))
    produce(leader, txn(B, 0))
    end_txn(leader, marker(A, ABORT))
    data = leader.read(0, 1 << 20, leader.log_end_offset).records
    follower = Log.open(tmp_path / "follower" / "t-0", LogConfig())
    follower.append_as_follower(bytes(data))
    follower.high_watermark = follower.log_end_offset
    assert txn_indexes(follower.dir) == txn_indexes(leader.dir)
    assert follower.last_stable_offset == leader.last_stable_offset == 2
    leader.close()
    follower.close()


# --- the index itself ------------------------------------------------------------------


def test_the_transaction_index_writes_kafkas_format(tmp_path: Path) -> None:
    path = tmp_path / f"{10:020d}.txnindex"
    index = TransactionIndex(path, 10)
    assert index.all_aborted_txns() == [] and not path.exists(), "created by the first entry"
    index.append(AbortedTxn.of(A, 5, 12, 12))
    index.append(AbortedTxn.of(B, 11, 15, 14))
    assert txn_index_entries(path) == [(0, A, 5, 12, 12), (0, B, 11, 15, 14)]
    with pytest.raises(ValueError, match="must increase"):
        index.append(AbortedTxn.of(A, 13, 15, 16))
    assert len(path.read_bytes()) == 68
    # A fetch of [12, 14) overlaps both; A's LSO (12) does not reach 14, B's does:
    # the search is complete after B.
    result = index.collect_aborted_txns(12, 14)
    assert [t.producer_id for t in result.aborted_transactions] == [A, B]
    assert result.is_complete
    result = index.collect_aborted_txns(13, 20)
    assert [t.producer_id for t in result.aborted_transactions] == [B]
    assert not result.is_complete, "a later segment may hold more"
    index.flush()
    # A new reader of the same file (the tools' way) sees what was written.
    assert TransactionIndex(path, 10).all_aborted_txns() == index.all_aborted_txns()
    index.truncate_to(13)
    assert txn_index_entries(path) == [(0, A, 5, 12, 12)]
    renamed = path.with_name(path.name + ".deleted")
    index.rename_to(renamed)
    assert renamed.exists() and not path.exists()
    assert index.delete() and not renamed.exists()
