"""The log cleaner on real segment files: what it keeps, where, and how it swaps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import BASE_TS

from brook.protocol import coordinator_records as cr
from brook.protocol.errors import OutOfOrderSequenceError
from brook.protocol.record_batch import Record, build_batch, iter_records, split_batches
from brook.storage import Log, LogConfig
from brook.storage import log_file_utils as files
from brook.storage.log_cleaner import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    CleanerCheckpoints,
    CleanResult,
    clean,
    plan_cleaning,
)
from brook.storage.log_validator import AppendOrigin

CONFIG = LogConfig(
    segment_bytes=4096,
    index_interval_bytes=256,
    max_index_size=4096,
    cleanup_policy=("compact",),
    delete_retention_ms=60_000,
    file_delete_delay_ms=0,
)


class Clock:
    def __init__(self) -> None:
        self.now = BASE_TS

    def __call__(self) -> int:
        return self.now


def batch(
    items: list[tuple[bytes | None, bytes | None]],
    *,
    producer_id: int = -1,
    epoch: int = -1,
    sequence: int = -1,
) -> bytes:
    records = [Record(i, BASE_TS, key, value) for i, (key, value) in enumerate(items)]
    return build_batch(
        records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


def open_log(directory: Path, clock: Clock, config: LogConfig = CONFIG) -> Log:
    return Log.open(directory, config, clock=clock)


def append(log: Log, data: bytes) -> None:
    log.append_as_leader(data, 0)
    log.high_watermark = log.log_end_offset


def all_records(log: Log) -> list[Record]:
    records: list[Record] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = bytes(log.read(offset, 1 << 20).records)
        if not data:
            break
        headers = split_batches(data)
        records += iter_records(data)
        offset = headers[-1].next_offset
    return records


def compact(log: Log, clock: Clock, checkpoint: int | None = None) -> CleanResult:
    plan = plan_cleaning(log, checkpoint, clock(), force=True)
    assert plan is not None
    result = clean(plan)
    sizes = {s.base_offset: size for s, size in zip(plan.segments, plan.sizes, strict=True)}
    assert log.replace_segments(result.groups, sizes)
    return result


def fill(log: Log, keys: int, rounds: int) -> dict[bytes, tuple[int, bytes]]:
    """`rounds` values of each of `keys` keys, four records a batch; returns the latest."""
    latest: dict[bytes, tuple[int, bytes]] = {}
    items: list[tuple[bytes | None, bytes | None]] = []
    for r in range(rounds):
        for k in range(keys):
            items.append((b"k%d" % k, b"v%d-%d" % (k, r)))
            if len(items) == 4:
                start = log.log_end_offset
                append(log, batch(items))
                for i, (key, value) in enumerate(items):
                    assert key is not None and value is not None
                    latest[key] = (start + i, value)
                items = []
    return latest


def test_latest_value_of_each_key_at_its_original_offset(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    latest = fill(log, keys=20, rounds=30)
    log.roll()
    before = log.size_in_bytes
    result = compact(log, clock)
    records = all_records(log)
    assert {r.key: (r.offset, r.value) for r in records} == latest
    assert len(records) == len(latest)
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets)
    assert log.size_in_bytes < before / 5
    assert result.stats.records_read == 20 * 30
    # Reopened from its files, the log is the same.
    log.close()
    reopened = open_log(tmp_path / "t-0", clock)
    assert [(r.offset, r.key, r.value) for r in all_records(reopened)] == [
        (r.offset, r.key, r.value) for r in records
    ]


def test_active_segment_and_records_past_the_stable_offset_untouched(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    fill(log, keys=5, rounds=100)
    assert len(log.segments) > 2
    active_base = log.active_segment.base_offset
    active_bytes = log.active_segment.log.read(0, log.active_segment.size)
    compact(log, clock)
    assert log.active_segment.base_offset == active_base
    assert log.active_segment.log.read(0, log.active_segment.size) == active_bytes
    # Every record of the active segment is still there, superseded or not.
    in_active = [r for r in all_records(log) if r.offset >= active_base]
    assert len(in_active) == log.log_end_offset - active_base


def test_nothing_to_clean_below_the_high_watermark(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    fill(log, keys=5, rounds=40)
    log.high_watermark = log.segments[0].base_offset
    assert plan_cleaning(log, None, clock(), force=True) is None


def test_dirty_ratio_and_checkpoint(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, CONFIG.with_overrides(min_cleanable_dirty_ratio=0.9))
    fill(log, keys=5, rounds=40)
    log.roll()
    first = plan_cleaning(log, None, clock())
    assert first is not None and first.dirty_ratio == 1.0
    end = first.end_offset
    result = clean(first)
    sizes = {s.base_offset: z for s, z in zip(first.segments, first.sizes, strict=True)}
    assert log.replace_segments(result.groups, sizes)
    checkpoints = CleanerCheckpoints(tmp_path)
    checkpoints.update("t", 0, end)
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT_FILE).read_text() == f"0\n1\nt 0 {end}\n"
    assert CleanerCheckpoints(tmp_path).get("t", 0) == end
    # Everything clean now: not worth cleaning again until new dirty data arrives.
    assert plan_cleaning(log, end, clock()) is None
    fill(log, keys=5, rounds=2)
    log.roll()
    assert plan_cleaning(log, end, clock()) is None  # 0.9 not reached
    assert plan_cleaning(log, end, clock(), force=True) is not None


def test_tombstones_kept_for_delete_retention_then_dropped(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    fill(log, keys=10, rounds=5)
    append(log, batch([(b"k3", None), (b"k4", None)]))
    tombstone_offset = log.log_end_offset - 2
    log.roll()
    compact(log, clock)
    kept = {r.key: r for r in all_records(log)}
    assert kept[b"k3"].value is None and kept[b"k3"].offset == tombstone_offset
    assert kept[b"k4"].value is None
    # A cleaning within delete.retention.ms keeps them.
    clock.now += 59_000
    append(log, batch([(b"k0", b"new")]))
    log.roll()
    compact(log, clock)
    assert {b"k3", b"k4"} <= {r.key for r in all_records(log)}
    # Past the horizon (set at the first cleaning that kept them) they go.
    clock.now += 2_000
    compact(log, clock)
    keys = {r.key for r in all_records(log)}
    assert b"k3" not in keys and b"k4" not in keys
    assert {b"k0", b"k1", b"k9"} <= keys


def test_keyless_records_dropped(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock, CONFIG.with_overrides(cleanup_policy=("delete",)))
    append(log, batch([(None, b"a"), (b"k", b"b"), (None, b"c")]))
    log.roll()
    log.update_config(CONFIG)
    compact(log, clock)
    assert [(r.offset, r.key) for r in all_records(log)] == [(1, b"k")]


def test_live_producers_last_batch_kept_and_idempotence_goes_on(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    pid = 7
    sequence = 0
    for _ in range(10):
        append(
            log, batch([(b"a", b"1"), (b"b", b"2")], producer_id=pid, epoch=0, sequence=sequence)
        )
        sequence += 2
    last_batch_end = log.log_end_offset - 1
    # Others then overwrite both keys, so the producer's last batch keeps no record.
    append(log, batch([(b"a", b"x"), (b"b", b"y")]))
    log.roll()
    compact(log, clock)
    headers = split_batches(bytes(log.read(0, 1 << 20).records))
    mine = [h for h in headers if h.producer_id == pid]
    assert len(mine) == 1
    assert mine[0].record_count == 0 and mine[0].last_offset == last_batch_end
    assert mine[0].base_sequence == 18
    # After a restart with the state rebuilt from the log alone (no snapshot), the
    # next sequence is accepted and a gap is still refused.
    log.close()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()
    reopened = Log.open(tmp_path / "t-0", CONFIG, clock=clock)
    reopened.high_watermark = reopened.log_end_offset
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_as_leader(batch([(b"c", b"3")], producer_id=pid, epoch=0, sequence=21), 0)
    reopened.append_as_leader(batch([(b"c", b"3")], producer_id=pid, epoch=0, sequence=20), 0)


def test_swap_refused_when_the_segments_moved_meanwhile(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    fill(log, keys=5, rounds=40)
    plan = plan_cleaning(log, None, clock(), force=True)
    assert plan is not None
    result = clean(plan)
    log.maybe_increment_log_start_offset(log.segments[1].base_offset)
    sizes = {s.base_offset: z for s, z in zip(plan.segments, plan.sizes, strict=True)}
    assert not log.replace_segments(result.groups, sizes)
    result.discard()
    assert not list((tmp_path / "t-0").glob("*.cleaned"))


@pytest.mark.parametrize("stage", ["cleaned", "swap", "swap-old-deleted"])
def test_crash_mid_swap_leaves_the_log_whole(tmp_path: Path, stage: str) -> None:
    clock = Clock()
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    latest = fill(log, keys=10, rounds=30)
    log.roll()
    everything = [(r.offset, r.key, r.value) for r in all_records(log)]
    plan = plan_cleaning(log, None, clock(), force=True)
    assert plan is not None
    result = clean(plan)
    log.close()
    # What a crash at each step of replace_segments leaves on disk.
    if stage != "cleaned":
        for cleaned, old in result.groups:
            cleaned.change_file_suffixes(files.CLEANED_FILE_SUFFIX, files.SWAP_FILE_SUFFIX)
            if stage == "swap-old-deleted":
                for segment in old:
                    segment.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
    reopened = Log.open(directory, CONFIG, clock=clock, clean_shutdown=False)
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))]
    records = [(r.offset, r.key, r.value) for r in all_records(reopened)]
    if stage == "cleaned":
        assert records == everything
    else:
        assert {key: (offset, value) for offset, key, value in records} == latest
        assert len(records) == len(latest)
    assert reopened.log_end_offset == log.log_end_offset


def test_aborted_data_removed_committed_kept_markers_kept(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    append(log, batch([(b"a", b"base"), (b"b", b"base")]))

    def transaction(pid: int, value: bytes, result: cr.ControlRecordType) -> None:
        records = [Record(0, BASE_TS, b"a", value)]
        data = build_batch(
            records, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True
        )
        append(log, data)
        control = Record(
            0,
            BASE_TS,
            cr.encode_key(cr.ControlRecordKey(int(result))),
            cr.encode_value(cr.EndTxnMarker(coordinator_epoch=0)),
        )
        marker = build_batch(
            [control], producer_id=pid, producer_epoch=0, transactional=True, control=True
        )
        log.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR)
        log.high_watermark = log.log_end_offset

    transaction(1, b"aborted", cr.ControlRecordType.ABORT)
    aborted_at = 2
    transaction(2, b"committed", cr.ControlRecordType.COMMIT)
    append(log, batch([(b"c", b"after")] * 3))
    log.roll()
    compact(log, clock)
    headers = split_batches(bytes(log.read(0, 1 << 20).records))
    values = {r.offset: r.value for r in all_records(log) if r.key in (b"a", b"b")}
    # The committed value is a's latest; the aborted one neither shadows it nor stays.
    assert values == {1: b"base", 4: b"committed"}
    assert aborted_at not in {r.offset for r in all_records(log)}
    # Both markers are kept (their transactions had data here); the aborted one is
    # still in the cleaned segment's txn index, so read_committed still skips it.
    assert [h.base_offset for h in headers if h.is_control] == [3, 5]
    read = log.read(0, 1 << 20, include_aborted_txns=True)
    assert read.aborted_transactions is not None
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions] == [(1, 2)]


def test_crash_mid_swap_keeps_the_aborted_transactions_index(tmp_path: Path) -> None:
    clock = Clock()
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    append(log, batch([(b"a", b"base")]))
    data = build_batch(
        [Record(0, BASE_TS, b"a", b"aborted"), Record(1, BASE_TS, b"b", b"aborted")],
        producer_id=1,
        producer_epoch=0,
        base_sequence=0,
        transactional=True,
    )
    append(log, data)
    control = Record(
        0,
        BASE_TS,
        cr.encode_key(cr.ControlRecordKey(int(cr.ControlRecordType.ABORT))),
        cr.encode_value(cr.EndTxnMarker(coordinator_epoch=0)),
    )
    marker = build_batch(
        [control], producer_id=1, producer_epoch=0, transactional=True, control=True
    )
    log.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR)
    # The aborted batch is producer 1's last: kept as an empty header, so its
    # marker and its txn index entry stay too.
    log.high_watermark = log.log_end_offset
    log.roll()
    plan = plan_cleaning(log, None, clock(), force=True)
    assert plan is not None
    result = clean(plan)
    log.close()
    for cleaned, _ in result.groups:
        cleaned.change_file_suffixes(files.CLEANED_FILE_SUFFIX, files.SWAP_FILE_SUFFIX)
    # Even with every other segment trusted (a recovery point at the log end), the
    # swapped-in segment's txn index is rebuilt from its markers.
    reopened = Log.open(directory, CONFIG, clock=clock, recovery_point=log.log_end_offset)
    reopened.high_watermark = reopened.log_end_offset
    data_records = [r for r in all_records(reopened) if r.key in (b"a", b"b", b"z")]
    assert [(r.offset, r.value) for r in data_records] == [(0, b"base")]
    read = reopened.read(0, 1 << 20, include_aborted_txns=True)
    assert read.aborted_transactions is not None
    assert [(t.producer_id, t.first_offset) for t in read.aborted_transactions] == [(1, 1)]


# Rounds of batches, each batch some (key, value) records: a few keys, so that keys repeat
# within a batch, across batches and across rounds; None keys (dropped by a cleaning) and
# None values (tombstones, kept within delete.retention.ms).
_ITEMS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"e", b"f"])),
        st.one_of(st.none(), st.binary(min_size=1, max_size=40)),
    ),
    min_size=1,
    max_size=12,
)
_ROUNDS = st.lists(st.lists(_ITEMS, min_size=1, max_size=8), min_size=1, max_size=5)


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=_ROUNDS)
def test_cleanings_after_each_round_keep_what_one_cleaning_of_all_would(
    tmp_path_factory: pytest.TempPathFactory, rounds: list[list[list[tuple[Any, Any]]]]
) -> None:
    """Whatever was cleaned before (a clean section, batches dropped whole or in part,
    batches kept whole), each keyed record below the active segment stays exactly when no
    later record has its key, at its own offset, and the records of the active segment
    all stay."""
    clock = Clock()
    log = open_log(tmp_path_factory.mktemp("rounds") / "t-0", clock)
    appended: list[tuple[int, bytes | None, bytes | None]] = []
    checkpoint: int | None = None
    for number, batches in enumerate(rounds):
        # Keyless records reach a compacted log written before it was compacted.
        log.update_config(CONFIG.with_overrides(cleanup_policy=("delete",)))
        for items in batches:
            start = log.log_end_offset
            append(log, batch(items))
            appended += [(start + i, key, value) for i, (key, value) in enumerate(items)]
        log.update_config(CONFIG)
        log.roll()
        if number % 2 == 0 or number == len(rounds) - 1:
            result = compact(log, clock, checkpoint)
            checkpoint = result.end_offset
    end = log.active_segment.base_offset
    last_of = {key: offset for offset, key, _ in appended if offset < end}
    expected = [
        (offset, key, value)
        for offset, key, value in appended
        if offset >= end or (key is not None and last_of[key] == offset)
    ]
    assert [(r.offset, r.key, r.value) for r in all_records(log)] == expected
    log.close()
