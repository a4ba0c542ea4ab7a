"""Reading a partition directory the way Kafka's tools do, with code no one here wrote:
kafka-python decodes the batches; the index checks follow what Kafka's DumpLogSegments
verifies (each offset-index entry names a batch boundary and that batch's last offset;
each time-index entry names the batch holding its timestamp, the largest so far)."""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka.record import MemoryRecords

LOG_OVERHEAD = 12  # base offset + batch length, the part batchLength does not count


@dataclass
class OnDisk:
    position: int
    batch: Any  # kafka.record.default_records.DefaultRecordBatch
    records: list[Any]


def decode_segment(path: Path) -> list[OnDisk]:
    """Every batch of a .log file, decoded by kafka-python; the file must be whole batches."""
    data = path.read_bytes()
    out = []
    position = 0
    while position < len(data):
        assert len(data) - position >= LOG_OVERHEAD, f"{path.name}: torn tail at {position}"
        (length,) = struct.unpack_from(">i", data, position + 8)
        size = length + LOG_OVERHEAD
        assert position + size <= len(data), f"{path.name}: torn batch at {position}"
        records = MemoryRecords(data[position : position + size])
        batch = records.next_batch()
        assert batch is not None and not records.has_next()
        assert batch.magic == 2
        assert batch.validate_crc(), f"{path.name}: CRC mismatch at {position}"
        out.append(OnDisk(position, batch, list(batch)))
        position += size
    return out


def segments_of(partition_dir: Path) -> list[Path]:
    return sorted(partition_dir.glob("*.log"))


def check_indexes(partition_dir: Path, expect_entries: bool = True) -> None:
    """The .index and .timeindex of every segment, as DumpLogSegments verifies them, and
    trimmed to their entries (as after a clean stop)."""
    entries_seen = 0
    for path in segments_of(partition_dir):
        base_offset = int(path.stem)
        batches = decode_segment(path)
        by_position = {b.position: b for b in batches}
        by_last_offset = {b.batch.last_offset: b for b in batches}

        index = path.with_suffix(".index").read_bytes()
        assert len(index) % 8 == 0, f"{path.stem}.index is not 8-byte entries"
        offset_entries = list(struct.iter_unpack(">ii", index))
        for (offset_a, position_a), (offset_b, position_b) in itertools.pairwise(offset_entries):
            assert offset_a < offset_b and position_a < position_b, "index not increasing"
        for relative, position in offset_entries:
            # Each entry names a batch boundary, and the last offset of the batch there.
            assert position in by_position, f"{path.stem}.index points inside a batch"
            assert by_position[position].batch.last_offset == base_offset + relative

        time_index = path.with_suffix(".timeindex").read_bytes()
        assert len(time_index) % 12 == 0, f"{path.stem}.timeindex is not 12-byte entries"
        time_entries = list(struct.iter_unpack(">qi", time_index))
        for (ts_a, offset_a), (ts_b, offset_b) in itertools.pairwise(time_entries):
            assert ts_a < ts_b and offset_a <= offset_b, "time index not increasing"
        for timestamp, relative in time_entries:
            # The batch ending at the entry's offset holds the entry's timestamp, which is
            # the largest up to there.
            holder = by_last_offset.get(base_offset + relative)
            assert holder is not None, f"{path.stem}.timeindex offset is not a batch's last"
            assert max(r.timestamp for r in holder.records) == timestamp
            assert timestamp == max(
                b.batch.max_timestamp
                for b in batches
                if b.batch.last_offset <= holder.batch.last_offset
            )
        if batches:
            # Closed segments end with their largest timestamp (Kafka appends it on roll
            # and close), so retention and ListOffsets -3 need no scan.
            assert time_entries, f"{path.stem}.timeindex is empty"
            assert time_entries[-1][0] == max(b.batch.max_timestamp for b in batches)
        entries_seen += len(offset_entries)
    if expect_entries:
        assert entries_seen > 0, "no offset index entries at all: interval too large?"
