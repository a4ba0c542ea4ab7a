from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from storage_helpers import BASE_TS, BatchFactory, append

from brook.protocol.errors import OffsetOutOfRangeError, RecordBatchTooLargeError
from brook.protocol.record_batch import iter_records, split_batches
from brook.storage import Log, LogConfig
from brook.storage.checkpoints import read_partition_metadata


def open_log(directory: Path, config: LogConfig, **kwargs: object) -> Log:
    return Log.open(directory, config, **kwargs)  # type: ignore[arg-type]


def test_offsets_epochs_and_round_trip_across_rolls(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    assert (log.topic, log.partition) == ("topic", 0)
    expected = []
    for i in range(120):
        info = append(log, make_batch(3, BASE_TS + i, tag=i), epoch=i // 40)
        assert info.first_offset == i * 5 and info.last_offset == i * 5 + 2
        assert info.record_count == 3 and info.log_append_time == -1
        info = append(log, make_batch(2, BASE_TS + i, tag=1000 + i), epoch=i // 40)
        assert info.first_offset == i * 5 + 3 and info.last_offset == i * 5 + 4
        expected += [(i * 5 + n, b"%d-%d-" % (i, n)) for n in range(3)]
        expected += [(i * 5 + 3 + n, b"%d-%d-" % (1000 + i, n)) for n in range(2)]
    assert log.log_end_offset == 600
    assert len(log.segments) > 5
    assert log.leader_epoch_cache.epoch_entries()[1].start_offset == 200

    got = []
    offset = 0
    while offset < log.log_end_offset:
        records = list(iter_records(log.read(offset, 3000).records))
        assert records and records[0].offset <= offset
        for record in records:
            if record.offset >= offset:
                got.append((record.offset, record.value[: len(expected[record.offset][1])]))
        offset = records[-1].offset + 1
    assert got == expected
    for header in split_batches(log.read(0, 10**6).records):
        assert header.partition_leader_epoch == header.base_offset // 200


def test_read_at_every_offset_lands_on_its_batch(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    for i in range(100):
        append(log, make_batch(1 + i % 4, tag=i))
    for offset in range(log.log_end_offset):
        batches = split_batches(log.read(offset, 1).records)
        assert len(batches) == 1
        assert batches[0].base_offset <= offset <= batches[0].last_offset
    assert log.read(log.log_end_offset, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(log.log_end_offset + 1, 1000)


def test_max_offset_and_min_one_message(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    for i in range(10):
        append(log, make_batch(2, tag=i))
    big = make_batch(1, value_size=1500, tag=99)
    append(log, big)
    # The high watermark excludes batches at or beyond it.
    records = log.read(0, 10**6, max_offset=6).records
    assert [h.last_offset for h in split_batches(records)] == [1, 3, 5]
    assert log.read(6, 10**6, max_offset=6).records == b""
    assert split_batches(log.read(0, 10**6, max_offset=7).records)[-1].last_offset == 5
    # A batch larger than max_bytes still comes back alone with min_one_message.
    records = log.read(20, 10, min_one_message=True).records
    assert len(records) == len(big)
    assert log.read(20, 10, min_one_message=False).records == b""


def test_out_of_range_and_log_start(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    for i in range(200):
        append(log, make_batch(1, tag=i))
    segments = log.segments
    assert len(segments) >= 3
    cut = segments[2].base_offset + 1
    assert log.maybe_increment_log_start_offset(cut)
    assert log.log_start_offset == cut
    assert log.segments[0].base_offset == segments[2].base_offset
    first_log = partition_dir / f"{segments[0].base_offset:020d}.log"
    assert not first_log.exists()
    # Renamed at once; removed when file.delete.delay.ms has passed.
    deleted = first_log.with_name(first_log.name + ".deleted")
    assert deleted.exists()
    assert log.purge_deleted_segments(now_ms=2**62) >= 1
    assert not deleted.exists()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(cut - 1, 100)
    assert split_batches(log.read(cut, 100).records)[0].base_offset == cut
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(log.high_watermark + 1)
    assert log.earliest_timestamp_and_offset().offset == cut


def test_high_watermark_is_clamped(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    assert log.high_watermark == 0
    append(log, make_batch(5))
    log.high_watermark = 100
    assert log.high_watermark == 5 == log.last_stable_offset
    log.high_watermark = -4
    assert log.high_watermark == 0


def test_batch_larger_than_segment_is_rejected(
    partition_dir: Path, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, LogConfig(segment_bytes=1000))
    with pytest.raises(RecordBatchTooLargeError):
        append(log, make_batch(1, value_size=2000))
    assert log.log_end_offset == 0


def test_roll_by_time_uses_record_timestamps(partition_dir: Path, make_batch: BatchFactory) -> None:
    log = open_log(partition_dir, LogConfig(segment_ms=1000))
    append(log, make_batch(1, BASE_TS))
    append(log, make_batch(1, BASE_TS + 1000))
    assert len(log.segments) == 1
    append(log, make_batch(1, BASE_TS + 1001))
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_fetch_offset_by_timestamp_across_segments(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    # Timestamps mostly rise but step back now and then.
    stamps = [BASE_TS + i * 10 - (25 if i % 7 == 3 else 0) for i in range(150)]
    for ts in stamps:
        append(log, make_batch(1, ts))
    assert len(log.segments) > 2
    for target in range(BASE_TS - 50, BASE_TS + 1600, 7):
        expected = next((i for i, ts in enumerate(stamps) if ts >= target), None)
        found = log.fetch_offset_by_timestamp(target)
        assert (found.offset if found else None) == expected
        if found:
            assert found.timestamp == stamps[expected] and found.leader_epoch == 0
    best = log.max_timestamp_and_offset()
    assert (best.timestamp, best.offset) == (max(stamps), 149)
    latest = log.latest_timestamp_and_offset()
    assert (latest.offset, latest.leader_epoch) == (150, 0)


def test_log_append_time_is_reported(partition_dir: Path, make_batch: BatchFactory) -> None:
    log = open_log(partition_dir, LogConfig(message_timestamp_type="LogAppendTime"))
    info = append(log, make_batch(2), now_ms=BASE_TS + 5)
    assert info.log_append_time == BASE_TS + 5


def test_follower_append_checks_offsets(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory, tmp_path: Path
) -> None:
    leader = open_log(partition_dir, small_config)
    for i in range(30):
        append(leader, make_batch(2, tag=i), epoch=3)
    follower = open_log(tmp_path / "f" / "topic-0", small_config)
    offset = 0
    while offset < leader.log_end_offset:
        records = leader.read(offset, 700).records
        info = follower.append_as_follower(bytes(records))
        offset = info.last_offset + 1
    assert follower.log_end_offset == 60
    assert follower.leader_epoch_cache.epoch_entries()[0].epoch == 3
    assert bytes(follower.read(0, 10**6).records) == bytes(leader.read(0, 10**6).records)
    from brook.protocol.errors import UnexpectedAppendOffsetError

    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(bytes(leader.read(0, 100).records))


def test_an_empty_follower_log_starting_inside_a_batch_starts_at_the_batch(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory, tmp_path: Path
) -> None:
    """The leader's log start moved into a batch (DeleteRecords): a follower that
    started over there gets the whole batch, and takes it from its first offset."""
    leader = open_log(partition_dir, small_config)
    append(leader, make_batch(5), epoch=0)  # offsets 0-4 in one batch
    follower = open_log(tmp_path / "f" / "topic-0", small_config)
    follower.truncate_fully_and_start_at(3)
    follower.append_as_follower(bytes(leader.read(3, 10**6).records))
    assert (follower.log_start_offset, follower.log_end_offset) == (0, 5)
    # A log that is not empty refuses an overlapping batch, as before.
    from brook.protocol.errors import UnexpectedAppendOffsetError

    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(bytes(leader.read(0, 10**6).records))


def test_truncate_to_and_fully(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    for i in range(100):
        append(log, make_batch(2, tag=i), epoch=i // 50)
    assert log.leader_epoch_cache.latest_epoch == 1
    assert log.truncate_to(81)  # inside a batch: the whole batch goes
    assert log.log_end_offset == 80
    assert log.high_watermark == 80
    assert log.leader_epoch_cache.latest_epoch == 0
    assert all(s.base_offset <= 80 for s in log.segments)
    assert not log.truncate_to(500)
    info = append(log, make_batch(1), epoch=2)
    assert info.first_offset == 80
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert [s.base_offset for s in log.segments] == [1000]
    assert append(log, make_batch(1)).first_offset == 1000
    assert sorted(p for p in os.listdir(partition_dir) if p.endswith(".log")) == [
        "00000000000000001000.log"
    ]


def test_retention_by_size_and_time(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    for i in range(200):
        append(log, make_batch(1, BASE_TS + i * 1000, tag=i))
    total = len(log.segments)
    segment_size = log.segments[0].size
    sized = LogConfig(
        segment_bytes=small_config.segment_bytes,
        index_interval_bytes=256,
        max_index_size=4096,
        retention_bytes=log.size_in_bytes - 2 * segment_size,
        retention_ms=-1,
    )
    log.update_config(sized)
    assert log.delete_old_segments(BASE_TS) == 2
    assert len(log.segments) == total - 2
    assert log.log_start_offset == log.segments[0].base_offset
    # By time: everything older than retention.ms, measured on record timestamps.
    log.update_config(LogConfig(retention_ms=10_000, segment_bytes=2048))
    newest_first_segment_ts = log.segments[1].max_timestamp_so_far
    assert log.delete_old_segments(newest_first_segment_ts + 10_001) == 2
    # An idle, fully expired log rolls and empties, as in Kafka.
    assert log.delete_old_segments(BASE_TS + 10**9) > 0
    assert log.log_start_offset == log.log_end_offset == 200
    assert log.read(200, 100).records == b""


def test_time_retention_ages_segments_without_timestamps_by_mtime(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    # Records a client sent without timestamps: the segments' max timestamp is -1, so
    # retention.ms counts from the .log file's mtime, as in Kafka, not from 1970.
    log = open_log(partition_dir, small_config)
    for i in range(100):
        append(log, make_batch(1, -1, tag=i))
    assert len(log.segments) > 3
    week = 7 * 24 * 3600 * 1000
    log.update_config(LogConfig(retention_ms=week, segment_bytes=2048))
    now = int(time.time() * 1000)
    assert log.delete_old_segments(now) == 0
    best = log.max_timestamp_and_offset()
    assert best is not None and (best.timestamp, best.offset) == (-1, 0)
    # Segments whose files were last written more than a week ago go; the rest stay.
    old = (now - week - 60_000) * 1_000_000
    for segment in log.segments[:2]:
        os.utime(segment.log.path, ns=(old, old))
    assert log.delete_old_segments(now) == 2
    assert log.log_start_offset == log.segments[0].base_offset > 0


def test_retention_never_passes_the_high_watermark(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    for i in range(100):
        append(log, make_batch(1, BASE_TS, tag=i))
    log.high_watermark = 0
    log.update_config(LogConfig(retention_ms=1, segment_bytes=2048))
    assert log.delete_old_segments(BASE_TS + 10**6) == 0


def test_partition_metadata_and_flush(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    topic_id = uuid.uuid4()
    log = open_log(partition_dir, small_config, topic_id=topic_id)
    assert read_partition_metadata(partition_dir) == topic_id
    for i in range(50):
        append(log, make_batch(1, tag=i))
    assert log.recovery_point == 0
    assert log.flush_if_due(BASE_TS)  # the roll asked for a flush of older segments
    assert log.recovery_point == log.active_segment.base_offset
    log.flush()
    assert log.recovery_point == 50
    log.close()
    reopened = open_log(partition_dir, small_config)
    assert reopened.topic_id == topic_id
    assert reopened.log_end_offset == 50


def test_flush_messages(partition_dir: Path, make_batch: BatchFactory) -> None:
    log = open_log(partition_dir, LogConfig(flush_messages=3))
    append(log, make_batch(2))
    assert log.recovery_point == 0
    append(log, make_batch(1))
    assert log.recovery_point == 3


def test_delete_removes_directory(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = open_log(partition_dir, small_config)
    append(log, make_batch(1))
    log.delete()
    assert not partition_dir.exists()
    assert os.listdir(partition_dir.parent) == []


def test_max_offset_bounds_reads_in_every_segment(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = Log.open(partition_dir, small_config)
    for i in range(60):
        append(log, make_batch(1 + i % 3, tag=i))
    assert len(log.segments) > 3
    ends = [
        h.next_offset
        for h in split_batches(
            b"".join(bytes(log.read(s.base_offset, 10**6).records) for s in log.segments)
        )
    ]
    for fetch in range(0, log.log_end_offset, 3):
        for limit in range(fetch, log.log_end_offset + 1, 5):
            batches = split_batches(log.read(fetch, 10**6, max_offset=limit).records)
            assert all(b.last_offset < limit for b in batches)
            # The batch holding `fetch` comes back whenever it ends at or below the limit.
            holder_end = next(end for end in ends if end > fetch)
            assert bool(batches) == (holder_end <= limit)
