"""Check a segment's `.index` and `.timeindex` against the batches of its `.log`.

Kafka writes an offset-index entry as (the last offset of a batch, the position where
that batch starts) and a time-index entry as (a batch's max timestamp, the last offset
of that batch) whenever that timestamp is the largest of the segment so far. So:

- every offset-index entry sits at the start of a batch, and names that batch's last
  offset; entries increase in offset and position;
- every time-index entry names a batch (older Kafka versions may name a record inside
  it rather than its last offset) whose max timestamp is the entry's, and the largest
  of the segment up to that batch; entries increase in timestamp.

`brook dump-log --verify-index-only` and the Spark audit use these checks; both read
the files read-only (brook.storage.reader). A segment damaged part way (a torn tail)
is checked up to the damage: entries past it cannot be judged and are not reported
here; the caller reports the damage itself.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from brook.protocol.record_batch import BatchHeader

from .reader import Damage, SegmentReader


@dataclass
class SegmentScan:
    """What the index checks need from a segment: each batch's place and facts, in
    file order, and where the file stops being readable (if it does)."""

    size: int = 0
    positions: list[int] = field(default_factory=list)
    base_offsets: list[int] = field(default_factory=list)
    last_offsets: list[int] = field(default_factory=list)
    max_timestamps: list[int] = field(default_factory=list)
    damage: Damage | None = None

    def add(self, position: int, header: BatchHeader) -> None:
        self.positions.append(position)
        self.base_offsets.append(header.base_offset)
        self.last_offsets.append(header.last_offset)
        self.max_timestamps.append(header.max_timestamp)


@dataclass(frozen=True, slots=True)
class IndexProblem:
    """One index entry that does not match its segment (or its neighbour)."""

    entry: int  # its number in the file, from 0
    key: int  # the entry's offset (.index) or timestamp (.timeindex)
    value: int  # the entry's position (.index) or offset (.timeindex)
    message: str


def scan_segment(reader: SegmentReader) -> SegmentScan:
    """Walk a segment's batch headers once."""
    scan = SegmentScan(size=reader.size)
    for item in reader.batches():
        if isinstance(item, Damage):
            scan.damage = item
            break
        scan.add(item.position, item.header)
    return scan


def _before_damage(scan: SegmentScan, position: int) -> bool:
    return scan.damage is None or position < scan.damage.position


def check_offset_index(
    entries: Sequence[tuple[int, int]], scan: SegmentScan | None
) -> list[IndexProblem]:
    """The problems of an offset index's (offset, position) entries, as stored (not
    sanity-checked first); without a scan (no segment beside it) only their order."""
    problems: list[IndexProblem] = []
    batch_at = dict(zip(scan.positions, scan.last_offsets, strict=True)) if scan else {}
    previous: tuple[int, int] | None = None
    for number, (offset, position) in enumerate(entries):
        where = f"entry {number} (offset {offset}, position {position})"
        found = []
        if previous is not None and (offset <= previous[0] or position <= previous[1]):
            found.append(
                f"{where} does not increase on the entry before it"
                f" (offset {previous[0]}, position {previous[1]})"
            )
        previous = (offset, position)
        if scan is None:
            pass
        elif position >= scan.size:
            found.append(f"{where} points past the end of the segment ({scan.size} bytes)")
        elif position not in batch_at:
            if _before_damage(scan, position):
                found.append(f"{where} points inside a batch, not at the start of one")
        elif batch_at[position] != offset:
            found.append(
                f"{where}: index offset {offset}, but the batch there ends at log offset"
                f" {batch_at[position]}"
            )
        problems += [IndexProblem(number, offset, position, message) for message in found]
    return problems


def check_time_index(
    entries: Sequence[tuple[int, int]], scan: SegmentScan | None
) -> list[IndexProblem]:
    """The problems of a time index's (timestamp, offset) entries, as stored; without a
    scan only their order."""
    problems: list[IndexProblem] = []
    running_max: list[int] = []
    if scan is not None:
        largest = -1
        for timestamp in scan.max_timestamps:
            largest = max(largest, timestamp)
            running_max.append(largest)
    previous: tuple[int, int] | None = None
    for number, (timestamp, offset) in enumerate(entries):
        where = f"entry {number} (timestamp {timestamp}, offset {offset})"
        found = []
        if previous is not None and (timestamp <= previous[0] or offset < previous[1]):
            found.append(
                f"{where} is out of order after timestamp {previous[0]}, offset {previous[1]}"
            )
        previous = (timestamp, offset)
        if scan is not None:
            found += _time_entry_problems(where, timestamp, offset, scan, running_max)
        problems += [IndexProblem(number, timestamp, offset, message) for message in found]
    return problems


def _time_entry_problems(
    where: str, timestamp: int, offset: int, scan: SegmentScan, running_max: list[int]
) -> list[str]:
    # The batch holding the entry's offset (Kafka indexes a batch's last offset;
    # older Kafka versions may name a record inside it).
    slot = bisect.bisect_right(scan.base_offsets, offset) - 1
    if slot < 0 or scan.last_offsets[slot] < offset:
        if scan.damage is None:
            return [f"{where}: no batch in the segment holds offset {offset}"]
        return []
    if scan.max_timestamps[slot] != timestamp:
        return [
            f"{where}: timestamp mismatch, the batch holding offset {offset} has max"
            f" timestamp {scan.max_timestamps[slot]}"
        ]
    if running_max[slot] != timestamp:
        return [f"{where}: an earlier batch has the larger timestamp {running_max[slot]}"]
    return []
