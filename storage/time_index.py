"""The time index (`.timeindex`): a sparse map from timestamps to offsets.

Each 12-byte entry is (int64 timestamp, int32 offset relative to the segment's base
offset), big-endian. Entries carry the largest timestamp seen so far in the segment
and the offset where it was reached, and one is added only when that maximum grows,
so timestamps in the index increase even when record timestamps go backwards.

The last slot is kept free so that rolling or closing the segment can always append
the segment's final maximum, as Kafka does.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from operator import itemgetter

from .abstract_index import (
    AbstractIndex,
    non_decreasing,
    strictly_increasing,
)
from .errors import CorruptIndexError, IndexFullError, InvalidOffsetError

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(AbstractIndex):
    ENTRY_SIZE = 12
    _timestamps: array[int]  # each entry's timestamp (the segment's maximum so far)

    # --- AbstractIndex hooks ----------------------------------------------------------

    def _parse(self, data: bytes) -> None:
        self._timestamps = array("q", map(itemgetter(0), _ENTRY.iter_unpack(data)))
        self._offsets = array("i", map(itemgetter(1), _ENTRY.iter_unpack(data)))

    def _check(self) -> None:
        timestamps, offsets = self._timestamps, self._offsets
        if offsets and offsets[0] < 0:
            raise CorruptIndexError(f"time index file {self.path} has a negative offset")
        if not strictly_increasing(timestamps):
            raise CorruptIndexError(
                f"time index file {self.path} has timestamps that do not increase"
            )
        if not non_decreasing(offsets):
            raise CorruptIndexError(f"time index file {self.path} has offsets that go backwards")

    def _truncate_entries(self, count: int) -> None:
        del self._timestamps[count:]
        del self._offsets[count:]

    @property
    def is_full(self) -> bool:
        # One slot is reserved for the entry appended when the segment rolls.
        self._ensure_loaded()
        return self._entry_count() >= self._max_entries - 1

    # --- queries ----------------------------------------------------------------------

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        self._ensure_loaded()
        if not self._offsets:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self.base_offset + self._offsets[-1]

    def entry(self, n: int) -> tuple[int, int]:
        self._ensure_loaded()
        return self._timestamps[n], self.base_offset + self._offsets[n]

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The largest entry with timestamp <= target, else (-1, base offset).

        Every record before the returned offset's batch has a smaller timestamp, so a
        search for the first record >= target may start there.
        """
        self._ensure_loaded()
        slot = bisect.bisect_right(self._timestamps, target_timestamp) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[slot], self.base_offset + self._offsets[slot]

    # --- updates ----------------------------------------------------------------------

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if `timestamp` is larger than the last entry's."""
        self._check_writable("append to")
        self._ensure_loaded()
        if not skip_full_check and self.is_full:
            raise IndexFullError(f"attempt to append to a full time index {self.path}")
        if self._offsets:
            last_timestamp, last_offset = self.last_entry()
            if offset < last_offset:
                raise InvalidOffsetError(
                    f"attempt to append offset {offset} to time index {self.path} after"
                    f" offset {last_offset}"
                )
            if timestamp < last_timestamp:
                raise InvalidOffsetError(
                    f"attempt to append timestamp {timestamp} to time index {self.path}"
                    f" after timestamp {last_timestamp}"
                )
            if timestamp == last_timestamp:
                return
        if timestamp <= NO_TIMESTAMP:
            return
        relative = self._relative_offset(offset)
        self._write_entry(_ENTRY.pack(timestamp, relative))
        self._timestamps.append(timestamp)
        self._offsets.append(relative)
