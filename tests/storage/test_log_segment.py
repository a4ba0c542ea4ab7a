from __future__ import annotations

import os
import struct
from pathlib import Path

from storage_helpers import BASE_TS, BatchFactory

from brook.protocol.record_batch import BatchHeader, decode_records, set_base_offset, split_batches
from brook.storage.log_segment import LogSegment


def fill(
    segment: LogSegment,
    make_batch: BatchFactory,
    count: int,
    *,
    start: int = 0,
    timestamps: list[int] | None = None,
    records: int = 2,
) -> list[BatchHeader]:
    """Append `count` batches of `records` records one by one; returns their headers."""
    offset = start
    headers = []
    for i in range(count):
        ts = timestamps[i] if timestamps else BASE_TS + i
        buffer = make_batch(records, ts, tag=i)
        header = split_batches(buffer)[0]
        set_base_offset(buffer, header, offset)
        header.position = segment.size
        segment.append(header.last_offset, header.max_timestamp, header.last_offset, buffer)
        headers.append(header)
        offset = header.next_offset
    return headers


def test_files_are_named_by_base_offset(tmp_path: Path, make_batch: BatchFactory) -> None:
    segment = LogSegment(tmp_path, 1234)
    fill(segment, make_batch, 3, start=1234)
    names = sorted(os.listdir(tmp_path))
    assert names == [
        "00000000000000001234.index",
        "00000000000000001234.log",
        "00000000000000001234.timeindex",
    ]
    assert segment.next_offset == 1240


def test_every_offset_reads_its_batch(tmp_path: Path, make_batch: BatchFactory) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=300)
    headers = fill(segment, make_batch, 60, records=3)
    assert 5 < segment.offset_index.entries < 60  # sparse
    for header in headers:
        for offset in range(header.base_offset, header.next_offset):
            data = segment.read(offset, 1)  # too small for any batch
            assert data == b""
            data = segment.read(offset, 1, min_one_message=True)
            batches = split_batches(data)
            assert len(batches) == 1 and batches[0].base_offset == header.base_offset
            assert segment.translate_offset(offset) == (header.position, header.size)
    assert segment.read(headers[-1].next_offset, 1000) is None


def test_read_returns_whole_batches_within_limits(tmp_path: Path, make_batch: BatchFactory) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=200)
    headers = fill(segment, make_batch, 40)
    size = headers[0].size
    for max_size in (size, size + 1, 3 * size - 1, 7 * size + size // 2, 10**6):
        data = segment.read(0, max_size)
        assert len(data) % size == 0 and len(data) <= max_size
        assert len(data) == min(max_size // size, 40) * size
        assert len(split_batches(data)) == len(data) // size
    # max_position stops before a batch boundary (e.g. the high watermark's batch).
    data = segment.read(0, 10**6, max_position=headers[10].position)
    assert len(split_batches(data)) == 10
    assert segment.read(headers[10].base_offset, 10**6, max_position=headers[10].position) == b""


def test_find_offset_by_timestamp_with_out_of_order_timestamps(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=100)
    # Per batch (2 records): timestamps wander backwards and forwards.
    stamps = [100, 300, 200, 250, 500, 400, 450, 900, 600, 700]
    fill(segment, make_batch, len(stamps), timestamps=stamps)
    entries = [segment.time_index.entry(n) for n in range(segment.time_index.entries)]
    assert [ts for ts, _ in entries] == sorted({ts for ts, _ in entries})
    records = [
        (record.offset, record.timestamp)
        for _, header, buffer in segment.batches()
        for record in decode_records(buffer, header)
    ]
    for target in range(0, 1000, 25):
        expected = next(((ts, off) for off, ts in records if ts >= target), None)
        found = segment.find_offset_by_timestamp(target)
        assert (found and (found.timestamp, found.offset)) == (expected or None), target
    found = segment.find_offset_by_timestamp(250, starting_offset=8)
    assert (found.timestamp, found.offset) == (500, 8)
    assert segment.max_timestamp_so_far == 900
    assert segment.offset_of_max_timestamp_so_far == 15
    best = segment.find_max_timestamp_record()
    assert (best.timestamp, best.offset) == (900, 14)


def test_max_timestamp_is_reloaded_after_reopen(tmp_path: Path, make_batch: BatchFactory) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=10**6)  # no index entries
    fill(segment, make_batch, 5, timestamps=[5, 9, 7, 3, 1])
    segment.close()
    # close() records the max in the time index, as a roll does.
    assert (tmp_path / "00000000000000000000.timeindex").read_bytes() == struct.pack(">qi", 9, 3)
    reopened = LogSegment(tmp_path, 0)
    assert reopened.max_timestamp_so_far == 9
    assert reopened.offset_of_max_timestamp_so_far == 3
    assert reopened.next_offset == 10


def test_should_roll(tmp_path: Path, make_batch: BatchFactory) -> None:
    segment = LogSegment(tmp_path, 0, max_index_size=24, created_ms=0)

    def should_roll(size: int = 10, ts: int = BASE_TS, offset: int = 1, now: int = 0) -> bool:
        return segment.should_roll(
            messages_size=size,
            max_timestamp_in_messages=ts,
            max_offset_in_messages=offset,
            now_ms=now,
            max_segment_bytes=1000,
            max_segment_ms=60_000,
        )

    assert not should_roll(now=10**9)  # an empty segment never rolls by time
    fill(segment, make_batch, 1)
    assert should_roll(size=1000 - segment.size + 1)
    assert not should_roll(size=1000 - segment.size)
    # segment.ms counts from the first batch's timestamp.
    assert not should_roll(ts=BASE_TS + 60_000)
    assert should_roll(ts=BASE_TS + 60_001)
    assert should_roll(offset=2**31 + 5)
    segment.offset_index.append(1, 0)
    segment.offset_index.append(2, 1)
    segment.offset_index.append(3, 2)
    assert should_roll()  # the offset index is full


def test_recover_truncates_torn_tail_and_rebuilds_indexes(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=200)
    headers = fill(segment, make_batch, 30)
    entries = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    segment.close()
    log_path = tmp_path / "00000000000000000000.log"
    size = log_path.stat().st_size
    os.truncate(log_path, size - 10)
    reopened = LogSegment(tmp_path, 0, index_interval_bytes=200)
    assert reopened.recover() == headers[-1].size - 10
    assert reopened.size == headers[-1].position
    assert reopened.next_offset == headers[-1].base_offset
    rebuilt = [reopened.offset_index.entry(n) for n in range(reopened.offset_index.entries)]
    assert rebuilt == [e for e in entries if e[1] < headers[-1].position]


def test_truncate_to(tmp_path: Path, make_batch: BatchFactory) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=100)
    headers = fill(segment, make_batch, 20, timestamps=list(range(100, 120)))
    removed = segment.truncate_to(headers[12].base_offset + 1)  # inside batch 12
    assert removed == sum(h.size for h in headers[12:])
    assert segment.next_offset == headers[12].base_offset
    assert segment.max_timestamp_so_far == 111
    assert segment.offset_index.last_offset < headers[12].base_offset
    fill(segment, make_batch, 2, start=segment.next_offset, timestamps=[50, 500])
    assert segment.max_timestamp_so_far == 500
    assert segment.find_offset_by_timestamp(112).offset == headers[13].base_offset


def test_suffix_change_and_delete(tmp_path: Path, make_batch: BatchFactory) -> None:
    segment = LogSegment(tmp_path, 7)
    fill(segment, make_batch, 2, start=7)
    segment.change_file_suffixes("", ".deleted")
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000007.index.deleted",
        "00000000000000000007.log.deleted",
        "00000000000000000007.timeindex.deleted",
    ]
    segment.delete()
    assert os.listdir(tmp_path) == []


def test_rebuild_grows_indexes_too_small_for_the_segment(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    segment = LogSegment(tmp_path, 0, index_interval_bytes=50)
    headers = fill(segment, make_batch, 50, timestamps=list(range(50)))
    segment.close()
    tiny = LogSegment(tmp_path, 0, index_interval_bytes=50, max_index_size=24)
    assert tiny.recover() == 0
    assert tiny.offset_index.entries > 10
    for header in headers:
        assert tiny.translate_offset(header.base_offset) == (header.position, header.size)


def test_records_without_timestamps(tmp_path: Path, make_batch: BatchFactory) -> None:
    """-1 (NO_TIMESTAMP) everywhere: no time index entry, the file's mtime for retention,
    ListOffsets -3 answering the first record with -1, as Kafka's LogSegment does."""
    segment = LogSegment(tmp_path, 0, index_interval_bytes=1)  # an index entry per batch
    fill(segment, make_batch, 4, timestamps=[-1] * 4)
    assert segment.max_timestamp_so_far == -1
    assert segment.time_index.entries == 0
    os.utime(segment.log.path, ns=(0, 1_234_567 * 1_000_000))
    assert segment.largest_timestamp == 1_234_567
    best = segment.find_max_timestamp_record()
    assert best is not None and (best.timestamp, best.offset) == (-1, 0)
    assert segment.find_offset_by_timestamp(0) is None
    segment.close()
    reopened = LogSegment(tmp_path, 0)
    assert (reopened.max_timestamp_so_far, reopened.time_index.entries) == (-1, 0)
    assert reopened.largest_timestamp == 1_234_567
    best = reopened.find_max_timestamp_record()
    assert best is not None and (best.timestamp, best.offset) == (-1, 0)


def test_empty_segment_has_no_max_timestamp_record(tmp_path: Path) -> None:
    assert LogSegment(tmp_path, 0).find_max_timestamp_record() is None
