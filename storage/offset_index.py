"""The offset index (`.index`): a sparse map from offsets to positions in the `.log`.

Each 8-byte entry is (int32 offset relative to the segment's base offset, int32 byte
position in the segment), big-endian. An entry is added once `index.interval.bytes`
have been appended since the previous one; it names the last offset of a batch and the
position where that batch starts, so `lookup(offset)` gives a position at or before
the batch holding `offset`, and a short forward scan finds the batch. Every indexed
position is a batch boundary, which reads also use to cut a range at whole batches.
"""

from __future__ import annotations

import bisect
import struct
import sys
from array import array

from .abstract_index import AbstractIndex, strictly_increasing
from .errors import CorruptIndexError, IndexFullError, InvalidOffsetError

_ENTRY = struct.Struct(">ii")


class OffsetIndex(AbstractIndex):
    ENTRY_SIZE = 8
    _positions: array[int]  # each entry's byte position in the segment

    # --- AbstractIndex hooks ----------------------------------------------------------

    def _parse(self, data: bytes) -> None:
        values = array("i")
        values.frombytes(data)
        if sys.byteorder == "little":
            values.byteswap()
        self._offsets = values[0::2]
        self._positions = values[1::2]

    def _check(self) -> None:
        offsets, positions = self._offsets, self._positions
        if offsets and (offsets[0] < 0 or positions[0] < 0):
            raise CorruptIndexError(f"index file {self.path} starts with a negative entry")
        if not strictly_increasing(offsets):
            raise CorruptIndexError(f"index file {self.path} has offsets that do not increase")
        if not strictly_increasing(positions):
            raise CorruptIndexError(f"index file {self.path} has positions that do not increase")

    def _truncate_entries(self, count: int) -> None:
        del self._offsets[count:]
        del self._positions[count:]

    # --- queries ----------------------------------------------------------------------

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when there is none."""
        self._ensure_loaded()
        return self.base_offset + self._offsets[-1] if self._offsets else self.base_offset

    @property
    def last_position(self) -> int:
        self._ensure_loaded()
        return self._positions[-1] if self._positions else 0

    def entry(self, n: int) -> tuple[int, int]:
        self._ensure_loaded()
        return self.base_offset + self._offsets[n], self._positions[n]

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry <= target, else (base offset, 0)."""
        self._ensure_loaded()
        slot = bisect.bisect_right(self._offsets, target_offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._offsets[slot], self._positions[slot]

    def floor_position(self, position: int) -> int:
        """The largest indexed position <= `position` (a batch boundary), else 0."""
        self._ensure_loaded()
        slot = bisect.bisect_right(self._positions, position) - 1
        return self._positions[slot] if slot >= 0 else 0

    def upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after `position` (Kafka's
        fetchUpperBoundOffset); None when every entry lies before it."""
        self._ensure_loaded()
        slot = bisect.bisect_left(self._positions, position)
        if slot >= len(self._positions):
            return None
        return self.base_offset + self._offsets[slot]

    # --- updates ----------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        self._check_writable("append to")
        self._ensure_loaded()
        if self._entry_count() >= self._max_entries:
            raise IndexFullError(f"attempt to append to a full index {self.path}")
        relative = self._relative_offset(offset)
        if self._offsets and relative <= self._offsets[-1]:
            raise InvalidOffsetError(
                f"attempt to append offset {offset} to index {self.path} after offset"
                f" {self.last_offset}"
            )
        self._write_entry(_ENTRY.pack(relative, position))
        self._offsets.append(relative)
        self._positions.append(position)
