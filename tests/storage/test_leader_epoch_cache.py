from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import append, make_batch

from brook.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
)
from brook.storage.log import Log
from brook.storage.log_config import LogConfig


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def pairs(cache: LeaderEpochFileCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in cache.epoch_entries()]


def test_file_format_and_reload(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 50), (5, 90))
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n0 0\n2 50\n5 90\n"
    assert pairs(LeaderEpochFileCache(tmp_path / "leader-epoch-checkpoint")) == pairs(cache)


def test_assign(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 10))
    cache.assign(1, 15)  # same epoch, later offset: nothing to do
    assert pairs(cache) == [(1, 10)]
    cache.assign(1, 5)  # same epoch, earlier offset: replaces
    assert pairs(cache) == [(1, 5)]
    cache.assign(3, 20)
    cache.assign(4, 30)
    cache.assign(2, 25)  # contradicts later epochs: they go
    assert pairs(cache) == [(1, 5), (2, 25)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    assert cache.latest_epoch == 2
    assert cache.previous_epoch() == 1
    assert cache.epoch_entry(2) == EpochEntry(2, 25)


def test_end_offset_for(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 10), (4, 20), (7, 40))
    log_end = 55
    assert cache.end_offset_for(UNDEFINED_EPOCH, log_end) == (
        UNDEFINED_EPOCH,
        UNDEFINED_EPOCH_OFFSET,
    )
    assert cache.end_offset_for(7, log_end) == (7, 55)  # the latest: the log end
    assert cache.end_offset_for(4, log_end) == (4, 40)
    assert cache.end_offset_for(5, log_end) == (4, 40)  # unknown epoch: the one below it
    assert cache.end_offset_for(2, log_end) == (2, 20)
    assert cache.end_offset_for(1, log_end) == (1, 10)  # below all: first start offset
    assert cache.end_offset_for(8, log_end) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    empty = LeaderEpochFileCache(tmp_path / "other")
    assert empty.end_offset_for(0, 9) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 10), (4, 20))
    assert cache.epoch_for_offset(5) is None
    assert cache.epoch_for_offset(10) == 2
    assert cache.epoch_for_offset(19) == 2
    assert cache.epoch_for_offset(20) == 4
    assert cache.epoch_for_offset(10**6) == 4


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    cache.truncate_from_end(25)
    assert pairs(cache) == [(1, 0), (2, 10), (3, 20)]
    cache.truncate_from_end(10)
    assert pairs(cache) == [(1, 0)]
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    cache.truncate_from_start(15)
    assert pairs(cache) == [(2, 15), (3, 20)]
    cache.truncate_from_start(20)  # exclusive: an entry at 20 stays at 20
    assert pairs(cache) == [(3, 20)]
    cache.truncate_from_start(5)
    assert pairs(cache) == [(3, 20)]
    cache.clear_and_flush()
    assert cache.is_empty() and cache.latest_epoch is None


def test_a_new_cache_writes_its_file_and_an_unchanged_one_never_rewrites_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    empty = LeaderEpochFileCache(path)
    empty.flush()
    assert path.read_text() == "0\n0\n"  # made, as Kafka makes it for a new log
    cache = cache_with(tmp_path, (0, 0))
    written = path.stat().st_ino  # each write replaces the file (a new inode)
    # A load of the empty log truncates in memory only; leading it again assigns the same
    # entry: the file was right all along and is not written.
    reloaded = LeaderEpochFileCache(path)
    reloaded.truncate_from_end(0, flush=False)
    assert pairs(reloaded) == [] and path.read_text() == "0\n1\n0 0\n"
    reloaded.assign(0, 0)
    reloaded.flush()
    assert path.stat().st_ino == written
    # A real change is written, and a truncation left in memory goes with it.
    reloaded.truncate_from_end(0, flush=False)
    reloaded.assign(1, 0)
    assert path.read_text() == "0\n1\n1 0\n"
    assert pairs(LeaderEpochFileCache(path)) == pairs(reloaded) != pairs(cache)


def test_a_new_leaders_epoch_is_written_with_its_first_record(tmp_path: Path) -> None:
    """A leader's epoch assigned at the log end (assign with flush=False, as
    Partition._become_leader does) stays in memory until the log appends a record of it:
    the file holds it before the record; a log reopened without it (a crash before any
    record) reads as it would have had the entry been written (a load drops an entry
    starting at the log end)."""
    directory = tmp_path / "orders-0"
    checkpoint = directory / "leader-epoch-checkpoint"
    log = Log.open(directory, LogConfig())
    append(log, make_batch(2), epoch=0)
    assert checkpoint.read_text() == "0\n1\n0 0\n"
    log.leader_epoch_cache.assign(3, log.log_end_offset, flush=False)
    assert pairs(log.leader_epoch_cache) == [(0, 0), (3, 2)]  # answered from memory
    assert checkpoint.read_text() == "0\n1\n0 0\n"
    # A crash now: the log read again from disk is what it would be with the entry written.
    crashed = Log.open(directory, LogConfig())
    assert pairs(crashed.leader_epoch_cache) == [(0, 0)]
    crashed.close()
    append(log, make_batch(1), epoch=3)
    assert checkpoint.read_text() == "0\n2\n0 0\n3 2\n"
    # Led again and closed before any record of the new epoch: the close writes nothing
    # (the next load would drop the entry), and what the file holds is what a load keeps.
    log.leader_epoch_cache.assign(4, log.log_end_offset, flush=False)
    written = checkpoint.stat().st_ino  # a write replaces the file (a new inode)
    log.close()
    assert checkpoint.stat().st_ino == written
    reopened = Log.open(directory, LogConfig())
    assert pairs(reopened.leader_epoch_cache) == [(0, 0), (3, 2)]
    reopened.close()
