from __future__ import annotations

import os
import shutil
from pathlib import Path

from storage_helpers import BatchFactory, append

from brook.protocol.record_batch import iter_records, split_batches
from brook.storage import Log, LogConfig
from brook.storage.load_progress import LoadProgress


def build(partition_dir: Path, config: LogConfig, make_batch: BatchFactory, count: int) -> Log:
    log = Log.open(partition_dir, config)
    for i in range(count):
        append(log, make_batch(1 + i % 3, tag=i), epoch=i // 50)
    return log


def every_segment(messages: list[str]) -> LoadProgress:
    """Progress that reports each segment recovered (the broker's reports one every few
    seconds), into `messages`."""
    return LoadProgress(sink=messages.append, interval_s=0)


def segment_lines(messages: list[str]) -> list[str]:
    return [message for message in messages if message.startswith("Recovering segment")]


def read_all(log: Log) -> list[tuple[int, bytes | None]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        records = list(iter_records(log.read(offset, 10**6).records))
        out += [(r.offset, r.value) for r in records]
        offset = records[-1].offset + 1
    return out


def crash(log: Log) -> None:
    """Drop a log without closing it: indexes stay preallocated, nothing is trimmed."""
    log.close_handlers()


def test_torn_tail_is_truncated(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = build(partition_dir, small_config, make_batch, 120)
    expected = read_all(log)
    active = log.active_segment
    last = split_batches(active.read(log.log_end_offset - 1, 10**6, min_one_message=True))[0]
    crash(log)
    os.truncate(active.log.path, active.size - 7)  # mid-way through the last batch
    messages: list[str] = []
    reopened = Log.open(
        partition_dir, small_config, clean_shutdown=False, progress=every_segment(messages)
    )
    assert reopened.log_end_offset == last.base_offset
    assert read_all(reopened) == [e for e in expected if e[0] < last.base_offset]
    total = len(reopened.segments)
    assert segment_lines(messages)[-1] == f"Recovering segment {total}/{total} of topic-0 (100%)"
    # Then the one line of the partition, with what recovery did.
    assert messages[-1].startswith(f"Loaded log topic-0 with {total} segment(s)")
    assert messages[-1].endswith(
        f", after recovering {total} unflushed segment(s) from recovery point 0"
    )
    # The log takes appends again right after the cut.
    assert append(reopened, make_batch(1)).first_offset == last.base_offset


def test_crc_corruption_truncates_and_drops_later_segments(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = build(partition_dir, small_config, make_batch, 200)
    expected = read_all(log)
    segments = log.segments
    assert len(segments) >= 4
    victim = segments[1]
    batches = split_batches(victim.read(victim.base_offset, 10**6))
    bad = batches[len(batches) // 2]
    crash(log)
    with open(victim.log.path, "r+b") as f:
        f.seek(bad.position + bad.size - 3)  # a byte in the records: the CRC no longer matches
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    messages: list[str] = []
    reopened = Log.open(
        partition_dir,
        small_config,
        recovery_point=victim.base_offset,
        clean_shutdown=False,
        progress=every_segment(messages),
    )
    assert reopened.log_end_offset == bad.base_offset
    assert [s.base_offset for s in reopened.segments] == [s.base_offset for s in segments[:2]]
    assert read_all(reopened) == [e for e in expected if e[0] < bad.base_offset]
    recovered = segment_lines(messages)
    assert len(recovered) == 1 and "1/" + str(len(segments) - 1) in recovered[0]
    assert not any(
        p.endswith(".log") and int(p[:20]) > victim.base_offset for p in os.listdir(partition_dir)
    )
    # The epoch cache no longer names epochs that began after the cut.
    entries = reopened.leader_epoch_cache.epoch_entries()
    assert all(e.start_offset < bad.base_offset for e in entries)


def test_recovery_point_limits_the_work(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = build(partition_dir, small_config, make_batch, 200)
    segments = log.segments
    crash(log)
    messages: list[str] = []
    Log.open(
        partition_dir,
        small_config,
        recovery_point=segments[-2].base_offset + 1,
        clean_shutdown=False,
        progress=every_segment(messages),
    )
    assert [m.split(" (")[0] for m in segment_lines(messages)] == [
        "Recovering segment 1/2 of topic-0",
        "Recovering segment 2/2 of topic-0",
    ]


def test_a_long_recovery_reports_the_segment_it_has_reached_every_few_seconds(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    """Progress lines come at most every interval of the progress's clock (here each
    segment takes two seconds of it), then the partition's one line."""
    log = build(partition_dir, small_config, make_batch, 200)
    total = len(log.segments)
    assert total >= 6
    crash(log)
    now = [0.0]

    def two_seconds_a_call() -> float:
        now[0] += 2.0
        return now[0]

    messages: list[str] = []
    progress = LoadProgress(sink=messages.append, interval_s=5.0, clock=two_seconds_a_call)
    Log.open(partition_dir, small_config, clean_shutdown=False, progress=progress)
    assert segment_lines(messages) == [
        f"Recovering segment {n}/{total} of topic-0 ({n * 100 // total}%)"
        for n in range(3, total + 1, 3)
    ]
    assert len(messages) == len(segment_lines(messages)) + 1
    assert messages[-1].startswith("Loaded log topic-0 ")


def test_missing_index_files_are_rebuilt(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = build(partition_dir, small_config, make_batch, 150)
    expected = read_all(log)
    log.close()
    originals = {
        name: (partition_dir / name).read_bytes()
        for name in os.listdir(partition_dir)
        if name.endswith((".index", ".timeindex"))
    }
    for name in originals:
        (partition_dir / name).unlink()
    reopened = Log.open(partition_dir, small_config, clean_shutdown=True)
    assert read_all(reopened) == expected
    reopened.close()
    rebuilt = {name: (partition_dir / name).read_bytes() for name in originals}
    assert rebuilt == originals


def test_damaged_index_is_rebuilt_on_first_use(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = build(partition_dir, small_config, make_batch, 150)
    expected = read_all(log)
    first = log.segments[0]
    log.close()
    first.offset_index.path.write_bytes(b"\x7f" * 24)  # entries that point nowhere
    reopened = Log.open(partition_dir, small_config, clean_shutdown=True)
    assert read_all(reopened) == expected


def test_leftovers_are_cleaned_and_swaps_completed(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory, tmp_path: Path
) -> None:
    log = build(partition_dir, small_config, make_batch, 150)
    expected = read_all(log)
    segments = log.segments
    log.close()
    # A compaction result for the first two segments, left as .swap by a crash.
    first, second = segments[0], segments[1]
    merged = first.log.path.read_bytes() + second.log.path.read_bytes()
    (partition_dir / (first.log.path.name + ".swap")).write_bytes(merged)
    (partition_dir / (first.offset_index.path.name + ".swap")).write_bytes(b"junk")
    (partition_dir / "00000000000000000099.log.deleted").write_bytes(b"old")
    (partition_dir / "00000000000000000098.log.cleaned").write_bytes(b"old")
    (partition_dir / "00000000000000099999.index").write_bytes(b"")  # orphan
    reopened = Log.open(partition_dir, small_config, clean_shutdown=True)
    names = sorted(os.listdir(partition_dir))
    assert not any(n.endswith((".swap", ".deleted", ".cleaned")) for n in names)
    assert "00000000000000099999.index" not in names
    assert second.log.path.name not in names
    assert [s.base_offset for s in reopened.segments] == [
        s.base_offset for s in segments if s is not second
    ]
    assert read_all(reopened) == expected


def test_log_start_beyond_log_end_empties_the_log(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = build(partition_dir, small_config, make_batch, 20)
    log.close()
    reopened = Log.open(partition_dir, small_config, log_start_offset=500)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (500, 500)
    assert [s.base_offset for s in reopened.segments] == [500]


def test_unclean_open_of_copied_directory_rebuilds_epochs(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory, tmp_path: Path
) -> None:
    log = build(partition_dir, small_config, make_batch, 120)
    entries = log.leader_epoch_cache.epoch_entries()
    log.close()
    copy = tmp_path / "copy" / "other-3"
    shutil.copytree(partition_dir, copy)
    (copy / "leader-epoch-checkpoint").unlink()
    reopened = Log.open(copy, small_config, clean_shutdown=False)
    assert (reopened.topic, reopened.partition) == ("other", 3)
    assert reopened.leader_epoch_cache.epoch_entries() == entries
    assert reopened.recovery_point == 0  # only a flush moves it


def test_clean_shutdown_does_not_vouch_for_bytes_past_the_last_batch(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    # What a write cut short by a full disk could leave: bytes after the last whole
    # batch. A clean start still recovers the active segment instead of trusting it.
    log = build(partition_dir, small_config, make_batch, 120)
    expected = read_all(log)
    end = log.log_end_offset
    active_path = log.active_segment.log.path
    log.close()
    size = active_path.stat().st_size
    partial = make_batch(3, tag=999)[:40]
    with open(active_path, "ab") as file:
        file.write(partial)
    reopened = Log.open(partition_dir, small_config, clean_shutdown=True)
    assert reopened.log_end_offset == end
    assert active_path.stat().st_size == size
    assert read_all(reopened) == expected
    assert append(reopened, make_batch(1)).first_offset == end
    assert read_all(reopened)[-1][0] == end


def test_clean_shutdown_with_an_index_pointing_inside_a_batch_recovers(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = build(partition_dir, small_config, make_batch, 120)
    expected = read_all(log)
    active = log.active_segment
    assert active.offset_index.entries > 0
    end = log.log_end_offset
    index_path = active.offset_index.path
    log.close()
    # The last entry points a few bytes into a batch: no batch starts there.
    data = bytearray(index_path.read_bytes())
    data[-4:] = (int.from_bytes(data[-4:], "big") + 5).to_bytes(4, "big")
    index_path.write_bytes(bytes(data))
    reopened = Log.open(partition_dir, small_config, clean_shutdown=True)
    assert reopened.log_end_offset == end
    assert read_all(reopened) == expected
