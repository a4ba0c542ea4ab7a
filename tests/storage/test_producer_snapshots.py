"""Producer-state snapshots: written in Kafka's format, loaded back, pruned, and never
the reason a live producer's state is lost.

Snapshots are decoded here by hand from Kafka's schema (ProducerStateManager's
PID_SNAPSHOT_MAP_SCHEMA, version 1), independently of Brook's reader.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import crc32c
import pytest
from storage_helpers import BASE_TS

from brook.protocol.errors import OutOfOrderSequenceError
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig
from brook.storage.producer_state_config import ProducerStateManagerConfig

DAY_MS = 86_400_000
SMALL = LogConfig(segment_bytes=300, index_interval_bytes=128, max_index_size=4096)


class Clock:
    """The storage clock, held by the test."""

    def __init__(self, now: int = BASE_TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def batch(producer_id: int, sequence: int, count: int = 2, epoch: int = 0, ts: int = BASE_TS):
    records = [Record(i, ts, None, b"value-%d" % (sequence + i)) for i in range(count)]
    return bytearray(
        build_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    )


def plain(count: int = 2, ts: int = BASE_TS) -> bytearray:
    return bytearray(build_batch([Record(i, ts, None, b"plain") for i in range(count)]))


def produce(log: Log, data: bytearray, clock: Clock):
    info = log.append_as_leader(bytes(data), 0, clock.now)
    log.high_watermark = log.log_end_offset
    return info


def decode(path: Path) -> dict[int, tuple[int, ...]]:
    """A snapshot file by Kafka's schema: version int16, crc uint32 (CRC32C of the rest),
    then an array (int32 count) of producer entries."""
    data = path.read_bytes()
    version, crc = struct.unpack_from(">hI", data)
    assert version == 1
    assert crc == crc32c.crc32c(data[6:])
    (count,) = struct.unpack_from(">i", data, 6)
    entries = {}
    for i in range(count):
        # producer id, epoch, last sequence, last offset, offset delta, timestamp,
        # coordinator epoch, current transaction first offset
        fields = struct.unpack_from(">qhiqiqiq", data, 10 + i * 46)
        entries[fields[0]] = fields[1:]
    assert len(data) == 10 + count * 46
    return entries


def encode(entries: list[tuple[int, ...]]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", *entry) for entry in entries
    )
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def snapshots(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))


def state(log: Log) -> dict[int, tuple[int, int, int, int]]:
    return {
        e.producer_id: (e.producer_epoch, e.last_sequence, e.last_data_offset, e.last_timestamp)
        for e in log.active_producers()
    }


def open_log(
    directory: Path,
    clock: Clock,
    expiration_ms: int = DAY_MS,
    config: LogConfig = SMALL,
    **kwargs,
) -> Log:
    return Log.open(
        directory,
        config,
        clock=clock,
        producer_state_config=ProducerStateManagerConfig(expiration_ms),
        **kwargs,
    )


def test_a_roll_writes_the_state_in_kafkas_format(partition_dir: Path) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock, config=LogConfig())
    produce(log, batch(7, 0, ts=BASE_TS - 5), clock)
    produce(log, batch(7, 2, count=3, ts=BASE_TS - 4), clock)
    produce(log, batch(9, 0, epoch=3, ts=BASE_TS - 3), clock)
    produce(log, plain(), clock)
    end = log.log_end_offset
    log.roll()
    assert snapshots(partition_dir) == [end]
    assert decode(partition_dir / f"{end:020d}.snapshot") == {
        # epoch, last sequence, last offset, offset delta, timestamp, coord. epoch, txn
        7: (0, 4, 4, 2, BASE_TS - 4, -1, -1),
        9: (3, 1, 6, 1, BASE_TS - 3, -1, -1),
    }
    before = state(log)
    log.close()
    # Close writes none at the log end: the roll's snapshot is already there.
    assert snapshots(partition_dir) == [end]

    reopened = open_log(partition_dir, clock, config=LogConfig())
    assert state(reopened) == before
    reopened.close()


def test_the_state_comes_from_the_snapshot_not_from_the_log(partition_dir: Path) -> None:
    """After a clean close, the snapshot at the log end is all a start reads: a snapshot
    written by someone else (here by hand, as Kafka would) is taken as it is."""
    clock = Clock()
    log = open_log(partition_dir, clock)
    produce(log, batch(7, 0), clock)
    log.producer_state  # noqa: B018 - loaded, so close writes a snapshot
    log.close()
    end = 2
    assert snapshots(partition_dir) == [end]
    assert decode(partition_dir / f"{end:020d}.snapshot") == {7: (0, 1, 1, 1, BASE_TS, -1, -1)}
    (partition_dir / f"{end:020d}.snapshot").write_bytes(
        encode([(7, 4, 41, 1, 0, BASE_TS, 12, -1), (8, 0, 5, 0, 0, BASE_TS, -1, -1)])
    )
    reopened = open_log(partition_dir, clock)
    assert state(reopened) == {7: (4, 41, 1, BASE_TS), 8: (0, 5, 0, BASE_TS)}
    (entry,) = [e for e in reopened.active_producers() if e.producer_id == 7]
    assert entry.coordinator_epoch == 12
    reopened.close()


def test_retries_after_a_restart_are_duplicates_and_sequences_continue(
    partition_dir: Path,
) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    offsets = [produce(log, batch(7, seq), clock).first_offset for seq in range(0, 20, 2)]
    assert len(log.segments) > 2
    log.flush()
    log.close_handlers()  # a crash: no snapshot at the log end

    reopened = open_log(
        partition_dir, clock, clean_shutdown=False, recovery_point=log.recovery_point
    )
    # The last batch, retried, gets its first offset back; nothing is written.
    end = reopened.log_end_offset
    assert produce(reopened, batch(7, 18), clock).first_offset == offsets[-1]
    assert reopened.log_end_offset == end
    with pytest.raises(OutOfOrderSequenceError):
        produce(reopened, batch(7, 30), clock)
    assert produce(reopened, batch(7, 20), clock).first_offset == end
    reopened.close()


def test_an_unclean_start_uses_no_snapshot_past_the_recovery_point(partition_dir: Path) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    for seq in range(0, 24, 2):
        produce(log, batch(7, seq), clock)
    rolled = snapshots(partition_dir)
    assert len(rolled) >= 3
    before = state(log)
    log.close_handlers()

    recovery_point = rolled[1]
    reopened = open_log(partition_dir, clock, clean_shutdown=False, recovery_point=recovery_point)
    assert snapshots(partition_dir) == [s for s in rolled if s <= recovery_point]
    assert state(reopened) == before
    reopened.close()


def test_a_corrupt_snapshot_is_skipped_for_an_older_one(
    partition_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    for seq in range(0, 24, 2):
        produce(log, batch(7, seq), clock)
        produce(log, batch(8, seq), clock)
    before = state(log)
    log.close()
    taken = snapshots(partition_dir)
    newest = partition_dir / f"{taken[-1]:020d}.snapshot"
    damaged = bytearray(newest.read_bytes())
    damaged[-3] ^= 0x40
    newest.write_bytes(bytes(damaged))
    (partition_dir / f"{taken[-2]:020d}.snapshot").write_bytes(b"\x00\x01\x00")

    with caplog.at_level(logging.WARNING, logger="brook.storage.producer_state"):
        reopened = open_log(partition_dir, clock)
        assert state(reopened) == before
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("CRC is no longer valid" in w and newest.name in w for w in warnings)
    assert any("too few" in w for w in warnings)
    # Both went; the older snapshot that was used stays, and a new one at the log end.
    assert snapshots(partition_dir) == [*taken[:-2], reopened.log_end_offset]
    reopened.close()


def test_every_snapshot_corrupt_means_a_full_rebuild(partition_dir: Path) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    for seq in range(0, 16, 2):
        produce(log, batch(7, seq), clock)
    before = state(log)
    log.close()
    for offset in snapshots(partition_dir):
        (partition_dir / f"{offset:020d}.snapshot").write_bytes(encode([])[:-1] + b"\x09")
    reopened = open_log(partition_dir, clock)
    assert state(reopened) == before
    reopened.close()


def test_retention_and_delete_records_keep_a_live_producers_state(partition_dir: Path) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    produce(log, batch(7, 0), clock)
    for _ in range(12):
        produce(log, plain(), clock)
    assert len(log.segments) > 3
    # DeleteRecords past producer 7's only batch, then retention of every full segment.
    log.maybe_increment_log_start_offset(log.segments[2].base_offset + 1)
    assert log.segments[0].base_offset > 1
    assert 7 in state(log)
    log.close()
    reopened = open_log(partition_dir, clock, log_start_offset=log.log_start_offset)
    assert state(reopened)[7][1] == 1
    assert produce(reopened, batch(7, 2), clock).record_count == 2
    reopened.close()


def test_deleted_segments_take_their_snapshots_along(partition_dir: Path) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    for seq in range(0, 30, 2):
        produce(log, batch(7, seq), clock)
    bases = [s.base_offset for s in log.segments]
    assert snapshots(partition_dir) == bases[1:]
    log.maybe_increment_log_start_offset(bases[3])
    assert [s.base_offset for s in log.segments] == bases[3:]
    assert snapshots(partition_dir) == bases[3:]
    log.close()


def test_the_recovery_point_checkpoint_keeps_the_last_two_segments_snapshots(
    partition_dir: Path,
) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    for seq in range(0, 30, 2):
        produce(log, batch(7, seq), clock)
    bases = [s.base_offset for s in log.segments]
    log.flush()
    assert log.delete_snapshots_after_recovery_point_checkpoint() == bases[-2]
    assert snapshots(partition_dir) == bases[-2:]
    log.close()


def test_truncation_removes_the_snapshots_above_it(partition_dir: Path) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock)
    for seq in range(0, 30, 2):
        produce(log, batch(7, seq), clock)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 2  # a batch boundary: every batch holds two records
    log.truncate_to(target)
    assert snapshots(partition_dir) == [b for b in bases[1:] if b <= target]
    # The state is what the remaining log says: the batch ending at `target` - 1 is last.
    assert state(log)[7][2] == target - 1
    assert produce(log, batch(7, target), clock).first_offset == target
    log.truncate_fully_and_start_at(500)
    assert snapshots(partition_dir) == []
    assert state(log) == {}
    log.close()


def test_producers_idle_past_the_expiration_go(partition_dir: Path) -> None:
    clock = Clock()
    log = open_log(partition_dir, clock, expiration_ms=60_000)
    produce(log, batch(7, 0, ts=clock.now), clock)
    clock.now += 30_000
    produce(log, batch(8, 0, ts=clock.now), clock)
    clock.now += 30_000  # producer 7 idle for exactly the expiration, 8 for half of it
    assert log.remove_expired_producers() == 1
    assert set(state(log)) == {8}
    # Forgotten: its next sequence is out of order, as for a producer never seen.
    with pytest.raises(OutOfOrderSequenceError, match="no state for this producer"):
        produce(log, batch(7, 2, ts=clock.now), clock)
    log.close()

    # A snapshot's expired entries are dropped as it loads.
    clock.now += 30_000
    reopened = open_log(partition_dir, clock, expiration_ms=60_000)
    assert state(reopened) == {}
    reopened.close()
