from __future__ import annotations

import struct
from pathlib import Path

import pytest

from brook.storage.errors import CorruptIndexError, IndexFullError
from brook.storage.time_index import TimeIndex


def test_only_growing_timestamps_are_indexed(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, max_index_size=1200)
    assert index.last_entry() == (-1, 0)  # created (lazily) on first use
    assert path.stat().st_size == 1200
    index.maybe_append(1000, 5)
    index.maybe_append(1000, 9)  # same max timestamp: nothing new
    index.maybe_append(2000, 12)
    assert index.entries == 2
    index.close()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 5, 2000, 12)


def test_lookup_returns_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 100, max_index_size=1200)
    for i in range(1, 6):
        index.maybe_append(i * 1000, 100 + i * 10)
    assert index.lookup(999) == (-1, 100)
    assert index.lookup(1000) == (1000, 110)
    assert index.lookup(3500) == (3000, 130)
    assert index.lookup(10**12) == (5000, 150)


def test_last_slot_is_reserved_for_roll(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, max_index_size=36)  # 3 slots
    index.maybe_append(10, 1)
    index.maybe_append(20, 2)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.maybe_append(30, 3)
    index.maybe_append(30, 3, skip_full_check=True)
    assert index.entries == 3


def test_truncate_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex(path, 0, max_index_size=1200)
    for ts, offset in ((10, 1), (20, 5), (30, 9)):
        index.maybe_append(ts, offset)
    index.truncate_to(5)
    assert index.last_entry() == (10, 1)
    index.close_handler()  # crash: not trimmed; the tail was zeroed by truncation
    reopened = TimeIndex(path, 0)
    assert reopened.entries == 1
    assert reopened.last_entry() == (10, 1)


def test_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qiqi", 50, 1, 40, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0).sanity_check()
    path.write_bytes(b"\x01" * 13)
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0).sanity_check()
