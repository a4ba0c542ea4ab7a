from __future__ import annotations

import struct
from pathlib import Path

import pytest

from brook.storage.errors import CorruptIndexError, IndexFullError, InvalidOffsetError
from brook.storage.offset_index import OffsetIndex


def test_new_index_is_preallocated_and_trimmed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, max_index_size=1001)
    assert index.entries == 0
    assert path.stat().st_size == 1000  # rounded down to whole entries
    assert index.max_entries == 125
    index.append(110, 4200)
    index.append(125, 8400)
    index.close()
    assert path.read_bytes() == struct.pack(">iiii", 10, 4200, 25, 8400)


def test_lookup_finds_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "a.index", 50, max_index_size=800)
    for i in range(1, 11):
        index.append(50 + i * 10, i * 1000)
    assert index.lookup(0) == (50, 0)
    assert index.lookup(59) == (50, 0)
    assert index.lookup(60) == (60, 1000)
    assert index.lookup(75) == (70, 2000)
    assert index.lookup(10**9) == (150, 10000)
    assert index.floor_position(999) == 0
    assert index.floor_position(2500) == 2000
    assert index.last_offset == 150


def test_entries_survive_reopen_and_zero_tail_is_free_space(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=800)
    index.append(5, 100)
    index.append(9, 300)
    index.flush()
    # Simulate a crash: the preallocated file is never trimmed.
    index.close_handler()
    assert path.stat().st_size == 800
    reopened = OffsetIndex(path, 0, max_index_size=800)
    assert reopened.entries == 2
    assert reopened.lookup(7) == (5, 100)
    reopened.append(20, 500)
    assert reopened.entries == 3


def test_append_rules(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, max_index_size=16)
    index.append(3, 10)
    with pytest.raises(InvalidOffsetError):
        index.append(3, 20)
    index.append(4, 20)
    assert index.is_full
    with pytest.raises(IndexFullError):
        index.append(5, 30)


def test_truncate_to(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, max_index_size=800)
    for offset in (10, 20, 30, 40):
        index.append(offset, offset * 10)
    index.truncate_to(30)  # exact entry: it goes too
    assert index.entries == 2
    index.truncate_to(15)  # between entries: keep those below
    assert index.entries == 1
    index.append(12, 120)
    index.close()
    assert OffsetIndex(path, 0).lookup(100) == (12, 120)
    reopened = OffsetIndex(path, 0)
    reopened.truncate_to(0)
    assert reopened.entries == 0


@pytest.mark.parametrize(
    "content",
    [
        b"\x00" * 7,  # not a whole number of entries
        struct.pack(">iiii", 10, 100, 5, 200),  # offsets go backwards
        struct.pack(">iiii", 10, 300, 20, 200),  # positions go backwards
        struct.pack(">ii", -1, 10),
    ],
)
def test_sanity_check_rejects_damaged_files(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0).sanity_check()
