"""The log cleaner's limits: the offset map's memory (log.cleaner.dedupe.buffer.size),
the I/O throttle (log.cleaner.io.max.bytes.per.second), and the producer snapshots of
segments merged away."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from storage_helpers import BASE_TS
from test_log_cleaner import CONFIG, Clock, all_records, append, batch, fill, open_log

from brook.storage import log_file_utils as files
from brook.storage.log_cleaner import (
    CleanerCheckpoints,
    OffsetMapTooSmallError,
    clean,
    plan_cleaning,
)
from brook.storage.offset_map import ENTRY_OVERHEAD, OffsetMap
from brook.storage.throttler import Throttler


def swap(log, result) -> None:  # type: ignore[no-untyped-def]
    plan = result.plan
    sizes = {s.base_offset: size for s, size in zip(plan.segments, plan.sizes, strict=True)}
    assert log.replace_segments(result.groups, sizes)


def test_offset_map_stays_within_its_memory_as_measured() -> None:
    """The budget is what CPython really spends on the map (keys, offsets, the dict)."""
    memory = 4 * 1024 * 1024
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        offset_map = OffsetMap(memory)
        first = offset = 10**6

        def key(n: int) -> bytes:
            # Fresh key objects of 12 to 42 bytes, as decoded records give them.
            return b"key-%d-" % n + b"x" * (n % 31)

        while offset_map.put(key(offset), offset):
            offset += 1
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(offset_map) > 10_000
    assert used <= memory
    # ... and most of it is used: the estimate is not wildly pessimistic either.
    assert used >= memory * 0.9 * 0.7
    # Full: a new key is refused, a mapped key may still move on.
    assert not offset_map.put(b"another key", offset)
    assert offset_map.put(key(first), offset)
    assert offset_map.get(key(first)) == offset
    assert offset_map.get(b"never") == -1


def test_a_full_offset_map_cleans_as_far_as_it_fits_then_goes_on(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    # 200 distinct keys, each written three times, in batches of four.
    latest = fill(log, keys=200, rounds=3)
    log.roll()
    end_of_log = log.log_end_offset
    # Room for about 40 keys of 3-4 bytes: the map fills inside the dirty section.
    memory = int(40 * (4 + ENTRY_OVERHEAD) / 0.9)
    checkpoint: int | None = None
    ends: list[int] = []
    while True:
        plan = plan_cleaning(log, checkpoint, clock(), force=True)
        if plan is None:
            break
        before = {(r.offset, r.key, r.value) for r in all_records(log)}
        result = clean(plan, offset_map_memory=memory)
        assert plan.first_dirty_offset < result.end_offset <= plan.end_offset
        if result.end_offset < plan.end_offset:
            assert result.stats.buffer_utilization > 0.8  # it stopped because it was full
        swap(log, result)
        after = {(r.offset, r.key, r.value) for r in all_records(log)}
        # Nothing from the end of the map on was touched by this cleaning.
        assert {r for r in before if r[0] >= result.end_offset} == {
            r for r in after if r[0] >= result.end_offset
        }
        checkpoint = result.end_offset
        ends.append(checkpoint)
        assert len(ends) < 100
    # Several cleanings, each ending at a batch boundary (four records a batch).
    assert len(ends) > 3
    assert all(end % 4 == 0 for end in ends)
    assert ends[-1] == end_of_log
    records = all_records(log)
    assert {r.key: (r.offset, r.value) for r in records} == latest
    assert len(records) == len(latest)
    # The checkpoint the broker would keep: where the last cleaning ended.
    checkpoints = CleanerCheckpoints(tmp_path)
    checkpoints.update("t", 0, ends[-1])
    assert CleanerCheckpoints(tmp_path).get("t", 0) == end_of_log


def test_an_offset_map_too_small_for_one_batch_refuses_to_clean(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    fill(log, keys=20, rounds=3)
    log.roll()
    plan = plan_cleaning(log, None, clock(), force=True)
    assert plan is not None
    with pytest.raises(OffsetMapTooSmallError, match=r"log\.cleaner\.dedupe\.buffer\.size"):
        clean(plan, offset_map_memory=2 * (3 + ENTRY_OVERHEAD))
    # No `.cleaned` file left behind, the log unchanged.
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    assert len(all_records(log)) == 60


class FakeTime:
    """A clock that only the throttler's sleeps (and the test) move."""

    def __init__(self) -> None:
        self.ns = 0
        self.slept: list[float] = []

    def clock_ns(self) -> int:
        return self.ns

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.ns += int(seconds * 1e9)


def test_throttler_sleeps_until_the_bytes_fit_the_rate() -> None:
    fake = FakeTime()
    throttler = Throttler(1000.0, 300, sleep=fake.sleep, clock_ns=fake.clock_ns)
    throttler.maybe_throttle(500)  # within the first check interval: no check yet
    assert fake.slept == []
    fake.ns += 400_000_000  # 0.4 s later, 1,500 bytes in all: 1.5 s at 1,000 B/s
    throttler.maybe_throttle(1000)
    assert fake.slept == [pytest.approx(1.1)]
    # Under the rate: no sleep.
    fake.ns += 1_000_000_000
    throttler.maybe_throttle(900)
    assert len(fake.slept) == 1
    # A new rate applies at the next check.
    throttler.update_desired_rate(100.0)
    fake.ns += 500_000_000
    throttler.maybe_throttle(100)
    assert fake.slept[-1] == pytest.approx(0.5)
    assert throttler.slept_s == pytest.approx(1.6)


def test_unlimited_throttler_never_sleeps() -> None:
    fake = FakeTime()
    throttler = Throttler(sleep=fake.sleep, clock_ns=fake.clock_ns)
    for _ in range(10):
        fake.ns += 400_000_000
        throttler.maybe_throttle(10**12)
    assert fake.slept == []


def test_cleaning_reports_every_byte_to_the_throttler(tmp_path: Path) -> None:
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    fill(log, keys=20, rounds=30)
    log.roll()
    plan = plan_cleaning(log, None, clock(), force=True)
    assert plan is not None
    fake = FakeTime()
    rate = 2000.0
    throttler = Throttler(rate, 300, sleep=fake.sleep, clock_ns=fake.clock_ns)
    # Each reported chunk also takes 50 ms of the fake clock's time.
    report = throttler.maybe_throttle

    def observe(observed: float) -> None:
        fake.ns += 50_000_000
        report(observed)

    throttler.maybe_throttle = observe  # type: ignore[method-assign]
    result = clean(plan, throttler=throttler)
    stats = result.stats
    total = stats.map_bytes_read + stats.bytes_read + stats.bytes_written
    assert fake.slept, "the throttler never slowed the cleaning down"
    # The fake time that passed is what the bytes take at the rate (less the last
    # period's, not yet checked when the cleaning ended).
    elapsed_s = fake.ns / 1e9
    assert elapsed_s == pytest.approx(total / rate, rel=0.2)


def test_snapshots_of_segments_merged_away_are_removed(tmp_path: Path) -> None:
    clock = Clock()
    directory = tmp_path / "t-0"
    log = open_log(directory, clock)
    sequence = 0

    def produce(rounds: int) -> None:
        nonlocal sequence
        for round_ in range(rounds):
            items = [(b"k%d" % (i % 3), b"v%d" % round_) for i in range(4)]
            append(log, batch(items, producer_id=7, epoch=0, sequence=sequence))
            sequence += 4
        log.roll()

    # Full segments do not merge; once cleaned, they are small and the next cleaning
    # merges them.
    produce(200)
    first = plan_cleaning(log, None, clock(), force=True)
    assert first is not None
    swap(log, clean(first))
    produce(10)
    bases = [segment.base_offset for segment in log.segments]
    # A snapshot at every segment's base but the first (the broker writes one at each
    # roll), the cleaned ones included.
    for base in bases[1:]:
        assert files.producer_snapshot_file(directory, base).exists(), base
    plan = plan_cleaning(log, first.end_offset, clock(), force=True)
    assert plan is not None
    swap(log, clean(plan))
    kept = {segment.base_offset for segment in log.segments}
    merged = [base for base in bases if base not in kept]
    assert merged, "the cleaning merged no segments"
    for base in merged:
        assert not files.producer_snapshot_file(directory, base).exists()
    for base in sorted(kept)[1:]:
        assert files.producer_snapshot_file(directory, base).exists()
    # The producer's state, rebuilt from what is left, still takes its next batch.
    log.close()
    reopened = open_log(directory, clock, CONFIG)
    reopened.high_watermark = reopened.log_end_offset
    append(reopened, batch([(b"k0", b"next")], producer_id=7, epoch=0, sequence=sequence))
    assert all_records(reopened)[-1].value == b"next"
    assert all_records(reopened)[-1].timestamp == BASE_TS
