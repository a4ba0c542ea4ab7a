"""Which byte ranges of which segments a read needs: the input partitions of a Spark job.

A segment is one input partition unless it is larger than `max_bytes` (Spark's
spark.sql.files.maxPartitionBytes plays this part for files): then it is cut at
offset-index positions, each a batch boundary confirmed by reading the batch there, into
ranges of at most about `max_bytes`. A batch belongs to the range it starts in, so the
ranges of a segment read every batch once.

Bounds from pushed-down filters (BatchBounds) narrow the plan before it is cut:

- offsets: a segment holds the offsets from its base offset to the next segment's base
  (file names alone, no file opened); within a segment, the offset index gives the
  position of the first batch reaching the lowest offset wanted and the end of the last
  batch starting at or below the highest (storage.reader's position_of_offset and
  position_after_offset, as Kafka's fetch translates an offset).
- timestamps: a segment whose max timestamp (its time index's last entry and the batches
  after it) is below the lowest timestamp wanted is not read; otherwise the read starts
  after the records the time index shows to be all older.

With no bounds and segments within `max_bytes`, planning opens no file.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass
from pathlib import Path

from brook.storage.reader import PartitionFiles, SegmentFiles, SegmentReader

from .segment_rows import BatchBounds

DEFAULT_MAX_BYTES = 128 * 1024 * 1024  # Spark's default spark.sql.files.maxPartitionBytes


@dataclass(frozen=True, slots=True)
class SegmentRange:
    """The batches of one segment starting in [start_position, end_position)."""

    topic: str
    partition: int
    log_path: Path
    start_position: int
    end_position: int | None  # None: to the end of the file as the task finds it


def plan_partition(
    partition: PartitionFiles, bounds: BatchBounds, max_bytes: int = DEFAULT_MAX_BYTES
) -> list[SegmentRange]:
    """The ranges to read of one partition's segments, in offset order."""
    ranges: list[SegmentRange] = []
    segments = partition.segments
    for n, segment in enumerate(segments):
        if bounds.last_offset is not None and segment.base_offset > bounds.last_offset:
            break
        next_base = segments[n + 1].base_offset if n + 1 < len(segments) else None
        if (
            bounds.first_offset is not None
            and next_base is not None
            and next_base <= bounds.first_offset
        ):
            continue  # every offset of this segment is below the first wanted
        ranges += plan_segment(partition, segment, next_base, bounds, max_bytes)
    return ranges


def plan_segment(
    partition: PartitionFiles,
    segment: SegmentFiles,
    next_base: int | None,
    bounds: BatchBounds,
    max_bytes: int,
) -> list[SegmentRange]:
    narrow_start = bounds.first_offset is not None and bounds.first_offset > segment.base_offset
    narrow_end = bounds.last_offset is not None and (
        next_base is None or bounds.last_offset < next_base - 1
    )
    narrow_time = bounds.min_timestamp is not None

    def make(start: int, end: int | None) -> SegmentRange:
        return SegmentRange(partition.topic, partition.partition, segment.log_path, start, end)

    if not (narrow_start or narrow_end or narrow_time) and segment.size <= max_bytes:
        return [make(0, None)]
    with SegmentReader(segment.log_path) as reader:
        start, end = 0, reader.size
        if narrow_start:
            assert bounds.first_offset is not None
            found = reader.position_of_offset(bounds.first_offset)
            if found is None:
                return []
            start = found
        if narrow_end:
            assert bounds.last_offset is not None
            end = reader.position_after_offset(bounds.last_offset)
        if narrow_time:
            assert bounds.min_timestamp is not None
            if reader.max_timestamp() < bounds.min_timestamp:
                return []
            start = max(start, reader.position_of_timestamp(bounds.min_timestamp))
        if start >= end:
            return []
        cuts = split_points(reader, start, end, max_bytes)
    return [make(a, b) for a, b in itertools.pairwise(cuts)]


def split_points(reader: SegmentReader, start: int, end: int, max_bytes: int) -> list[int]:
    """[start, cut, ..., end]: cuts at confirmed offset-index positions, each range at
    most `max_bytes` where the index allows (a longer run between two entries, e.g. one
    large batch, stays whole)."""
    cuts = [start]
    if end - start <= max_bytes:
        return [start, end]
    positions = [p for p in reader.indexed_positions() if start < p < end]
    while positions and end - cuts[-1] > max_bytes:
        # The last entry within reach, else the first beyond it.
        slot = max(bisect.bisect_right(positions, cuts[-1] + max_bytes) - 1, 0)
        position = positions[slot]
        if reader.batch_at(position) is None:
            del positions[slot]  # not a batch there: the index is damaged
            continue
        cuts.append(position)
        del positions[: slot + 1]
    cuts.append(end)
    return cuts
