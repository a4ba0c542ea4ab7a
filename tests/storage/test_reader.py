"""The read-only storage reader (brook.storage.reader): what it reads back from directories
written by Brook's own Log and by kafka-python, how it lists a log dir for split planning,
and that reading never creates, changes or locks a file, even on a read-only directory."""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import os
import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import crc32c
import pytest
from storage_helpers import BASE_TS, BatchFactory, append, build_kafka_python_segment

from brook.protocol.compression import Codec
from brook.protocol.errors import CorruptRecordError
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig
from brook.storage.errors import CorruptIndexError, CorruptSnapshotError
from brook.storage.file_records import FileRecords
from brook.storage.reader import (
    AbortedTxn,
    Batch,
    Damage,
    EpochEntry,
    OffsetIndex,
    SegmentReader,
    TimeIndex,
    TransactionIndex,
    list_partitions,
    partition_files,
    read_leader_epoch_checkpoint,
    read_snapshot,
)

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256, max_index_size=4096)
CODECS = list(Codec)
RecordTuple = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def write_brook_partition(
    directory: Path, make_batch: BatchFactory, batches: int = 60
) -> tuple[Log, list[RecordTuple]]:
    """A partition written by Brook's Log (left open): every codec, two leader epochs."""
    log = Log.open(directory, CONFIG)
    expected: list[RecordTuple] = []
    for n in range(batches):
        info = append(log, make_batch(3, BASE_TS + n, codec=CODECS[n % 5], tag=n), epoch=n // 30)
        for i in range(3):
            value = (b"%d-%d-" % (n, i)).ljust(20, b"x")
            expected.append((info.first_offset + i, BASE_TS + n, b"key", value, [("h", b"%d" % i)]))
    return log, expected


def snapshot_bytes(entries: list[tuple[int, ...]], version: int = 1) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", *entry) for entry in entries
    )
    return struct.pack(">hI", version, crc32c.crc32c(body)) + body


def write_kafka_partition(directory: Path) -> list[RecordTuple]:
    """A partition as Kafka leaves it: kafka-python's batches, no indexes, a txn index, a
    producer snapshot and a leader-epoch checkpoint."""
    directory.mkdir(parents=True)
    first, second = build_kafka_python_segment(0, 12, 4), build_kafka_python_segment(48, 5, 3)
    (directory / f"{0:020d}.log").write_bytes(first[0])
    (directory / f"{48:020d}.log").write_bytes(second[0])
    (directory / f"{48:020d}.txnindex").write_bytes(struct.pack(">hqqqq", 0, 77, 50, 55, 50))
    (directory / f"{48:020d}.snapshot").write_bytes(
        snapshot_bytes([(77, 1, 9, 47, 3, BASE_TS, 4, -1)])
    )
    (directory / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n4 48\n")
    expected: list[RecordTuple] = []
    for (base, per_batch), (_, records) in zip(((0, 4), (48, 3)), (first, second), strict=True):
        for offset, ts, key, value in records:
            # kafka-python's helper numbers each record's header by its place in its batch.
            expected.append(
                (offset, ts, key, value, [("n", b"%d" % ((offset - base) % per_batch))])
            )
    return expected


def as_tuples(records: list[Record]) -> list[RecordTuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]


def read_everything(log_dir: Path) -> dict[tuple[str, int], list[RecordTuple]]:
    """Every reader entry point over a log dir; the records of each partition."""
    found = {}
    for partition in list_partitions(log_dir):
        records: list[Record] = []
        for segment in partition.segments:
            with SegmentReader(segment.log_path) as reader:
                assert all(isinstance(item, Batch) for item in reader.batches())
                records += reader.records()
                if segment.has_offset_index:
                    index = reader.offset_index()
                    index.sanity_check()
                    assert index.lookup(segment.base_offset) == (segment.base_offset, 0)
                if segment.has_time_index:
                    reader.time_index().sanity_check()
                reader.txn_index().sanity_check()
        for offset in partition.snapshot_offsets:
            read_snapshot(partition.snapshot_path(offset))
        read_leader_epoch_checkpoint(partition.leader_epoch_checkpoint_path)
        found[(partition.topic, partition.partition)] = as_tuples(records)
    return found


def file_states(root: Path) -> dict[str, tuple[int, int, int, str]]:
    """Mode, size, mtime and content digest of every file and directory under `root`."""
    states = {}
    for path in [root, *sorted(root.rglob("*"))]:
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        states[str(path.relative_to(root))] = (
            stat.st_mode,
            stat.st_size,
            stat.st_mtime_ns,
            digest,
        )
    return states


# --- what it reads ------------------------------------------------------------------------


def test_reads_back_what_brooks_log_wrote(tmp_path: Path, make_batch: BatchFactory) -> None:
    log, expected = write_brook_partition(tmp_path / "orders-0", make_batch)
    bases = [segment.base_offset for segment in log.segments]
    log_end = log.log_end_offset
    log.close()
    assert len(bases) > 3

    (partition,) = list_partitions(tmp_path)
    assert (partition.topic, partition.partition, partition.path) == ("orders", 0, log.dir)
    assert [s.base_offset for s in partition.segments] == bases
    assert [s.size for s in partition.segments] == [
        s.log_path.stat().st_size for s in partition.segments
    ]
    assert partition.size == sum(s.size for s in partition.segments)
    assert all(s.has_offset_index and s.has_time_index for s in partition.segments)
    assert not any(s.has_txn_index for s in partition.segments)
    assert partition.has_leader_epoch_checkpoint
    # A producer snapshot at each rolled segment's base, and one at the log end on close;
    # the batches are not idempotent, so every snapshot is empty.
    assert partition.snapshot_offsets == tuple(sorted({*bases[1:], log_end}))
    assert all(read_snapshot(partition.snapshot_path(o)) == [] for o in partition.snapshot_offsets)
    assert read_leader_epoch_checkpoint(partition.leader_epoch_checkpoint_path) == [
        EpochEntry(0, 0),
        EpochEntry(1, 90),
    ]

    got: list[RecordTuple] = []
    indexed = 0
    for segment in partition.segments:
        with SegmentReader(segment.log_path) as reader:
            assert reader.base_offset == segment.base_offset and reader.size == segment.size
            batches = list(reader.batches())
            assert all(isinstance(b, Batch) and b.crc_is_valid() for b in batches)
            assert {b.header.codec for b in batches} <= set(CODECS)
            got += as_tuples(reader.records())
            # Each offset-index entry names the batch starting at its position and that
            # batch's last offset; each time-index entry a batch's max timestamp.
            last_offset_at = {b.position: b.header.last_offset for b in batches}
            index = reader.offset_index()
            entries = [index.entry(n) for n in range(index.entries)]
            assert all(last_offset_at[position] == offset for offset, position in entries)
            indexed += len(entries)
            time_index = reader.time_index()
            max_timestamp_of = {b.header.last_offset: b.header.max_timestamp for b in batches}
            for n in range(time_index.entries):
                timestamp, offset = time_index.entry(n)
                assert max_timestamp_of[offset] == timestamp
    assert indexed > 0
    assert got == expected


def test_splits_between_index_positions_read_every_record_once(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    log, expected = write_brook_partition(tmp_path / "orders-0", make_batch, batches=25)
    log.close()
    (partition,) = list_partitions(tmp_path)
    got: list[RecordTuple] = []
    ranges = 0
    for segment in partition.segments:
        with SegmentReader(segment.log_path) as reader:
            index = reader.offset_index()
            cuts = [0, *(index.entry(n)[1] for n in range(index.entries)), segment.size]
            for start, end in itertools.pairwise(cuts):
                got += as_tuples(list(reader.records(start, end)))
                ranges += 1
            # A lookup gives a batch boundary at or before the offset: a split's start.
            target = segment.base_offset + 4
            _, position = index.lookup(target)
            first = next(iter(reader.batches(position)))
            assert isinstance(first, Batch) and first.header.base_offset <= target
    assert ranges > len(partition.segments)
    assert got == expected


def write_disordered_partition(directory: Path, make_batch: BatchFactory) -> Log:
    """A partition (left open) whose timestamps go backwards now and then, as a
    producer's clock or a replay makes them: the time index's entries are maxima."""
    log = Log.open(directory, CONFIG)
    for n in range(80):
        start = BASE_TS + 1000 * n - (5000 if n % 7 == 3 else 0)
        append(log, make_batch(3, timestamps=[start, start + 7, start + 3], tag=n))
    return log


def test_positions_from_the_indexes_match_a_walk_of_the_batches(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    log = write_disordered_partition(tmp_path / "orders-0", make_batch)
    log.close()
    (partition,) = list_partitions(tmp_path)
    assert len(partition.segments) > 3
    checked_times = 0
    for segment in partition.segments:
        with SegmentReader(segment.log_path) as reader:
            batches = [b for b in reader.batches() if isinstance(b, Batch)]
            records = [(b.position, r) for b in batches for r in b.records()]
            first, last = batches[0].header.base_offset, batches[-1].header.last_offset
            for offset in range(first - 2, last + 3):
                holding = [b for b in batches if b.header.last_offset >= offset]
                start = reader.start_position(offset)
                assert start in {b.position for b in batches}
                assert all(b.position >= start for b in holding)
                found = reader.position_of_offset(offset)
                assert found == (holding[0].position if holding else None)
                after = [b.position for b in batches if b.header.base_offset > offset]
                assert reader.position_after_offset(offset) == (after or [segment.size])[0]
            stamps = [r.timestamp for _, r in records]
            assert reader.max_timestamp() == max(stamps)
            for timestamp in range(min(stamps) - 1, max(stamps) + 2, 250):
                position = reader.position_of_timestamp(timestamp)
                assert position in {b.position for b in batches} | {segment.size}
                assert all(r.timestamp < timestamp for p, r in records if p < position)
                checked_times += position > 0
    assert checked_times > 0  # the time index did narrow some reads


def test_positions_from_damaged_indexes_fall_back_to_a_walk(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    log = write_disordered_partition(tmp_path / "orders-0", make_batch)
    log.close()
    segment = list_partitions(tmp_path)[0].segments[0]
    with SegmentReader(segment.log_path) as reader:
        batches = [b for b in reader.batches() if isinstance(b, Batch)]
        target = batches[-2].header.base_offset + 1
        expected = reader.position_of_offset(target)
        assert reader.start_position(target) > 0
    index_path = segment.offset_index_path
    original = index_path.read_bytes()
    # An entry that points inside a batch, then entries out of order.
    for damaged in (
        struct.pack(">ii", target - segment.base_offset, batches[-2].position + 5),
        original[8:16] + original[0:8],
    ):
        index_path.write_bytes(damaged)
        with SegmentReader(segment.log_path) as reader:
            assert reader.start_position(target) == 0
            assert reader.position_of_offset(target) == expected
            assert reader.position_after_offset(target) == batches[-1].position
        assert index_path.read_bytes() == damaged  # reported by falling back, not repaired
    index_path.unlink()
    segment.time_index_path.write_bytes(b"\x00" * 11)  # not a whole entry
    with SegmentReader(segment.log_path) as reader:
        assert reader.position_of_offset(target) == expected
        assert reader.position_of_timestamp(BASE_TS + 10**9) == 0
        assert reader.max_timestamp() == max(b.header.max_timestamp for b in batches)


def test_reads_a_partition_kafka_python_built(tmp_path: Path) -> None:
    expected = write_kafka_partition(tmp_path / "legacy-3")
    before = file_states(tmp_path)
    (partition,) = list_partitions(tmp_path)
    assert [(s.base_offset, s.has_offset_index, s.has_txn_index) for s in partition.segments] == [
        (0, False, False),
        (48, False, True),
    ]
    assert partition.snapshot_offsets == (48,)
    assert read_everything(tmp_path) == {("legacy", 3): expected}
    with SegmentReader(partition.segments[1].log_path) as reader:
        assert reader.txn_index().all_aborted_txns() == [AbortedTxn(0, 77, 50, 55, 50)]
        with pytest.raises(FileNotFoundError):
            _ = reader.offset_index().entries  # missing, and not created
    (entry,) = read_snapshot(partition.snapshot_path(48))
    assert (entry.producer_id, entry.last_offset, entry.coordinator_epoch) == (77, 47, 4)
    assert entry.current_txn_first_offset == -1
    assert file_states(tmp_path) == before


def test_listing_keeps_only_current_partitions_and_segments(tmp_path: Path) -> None:
    for name in ("orders-1", "orders-0", "my-topic-10"):
        write_kafka_partition(tmp_path / name)
    for name in (
        "orders-2.0123456789abcdef-delete",
        "orders-3.0123456789abcdef-future",
        "lost+found",
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{0:020d}.log").write_bytes(b"")
    (tmp_path / "meta.properties").write_text("version=0\n")
    leftovers = tmp_path / "orders-0"
    (leftovers / f"{90:020d}.log.deleted").write_bytes(b"x" * 10)
    (leftovers / f"{95:020d}.log.swap").write_bytes(b"x" * 10)
    (leftovers / f"{0:020d}.index.cleaned").write_bytes(b"")
    (leftovers / "partition.metadata").write_text("version: 0\n")

    listed = list_partitions(tmp_path)
    assert [(p.topic, p.partition) for p in listed] == [
        ("my-topic", 10),
        ("orders", 0),
        ("orders", 1),
    ]
    orders = listed[1]
    assert orders == partition_files(leftovers)
    assert [s.base_offset for s in orders.segments] == [0, 48]
    assert orders.size == sum(path.stat().st_size for path in leftovers.glob("*.log"))
    with pytest.raises(ValueError, match="not a partition directory"):
        partition_files(tmp_path / "lost+found")


# --- never a change -----------------------------------------------------------------------


def test_reading_changes_no_file_of_a_running_log(tmp_path: Path, make_batch: BatchFactory) -> None:
    """The active segment's indexes are preallocated (a zero tail): reading must neither
    trim nor grow them, nor touch any other file, nor keep the log from appending."""
    log, expected = write_brook_partition(tmp_path / "orders-0", make_batch)
    kafka_expected = write_kafka_partition(tmp_path / "legacy-3")
    active = log.active_segment
    assert active.offset_index.path.stat().st_size == CONFIG.max_index_size
    before = file_states(tmp_path)

    assert read_everything(tmp_path) == {("legacy", 3): kafka_expected, ("orders", 0): expected}
    assert file_states(tmp_path) == before

    info = append(log, make_batch(2, BASE_TS + 500, tag=999))
    assert info.first_offset == expected[-1][0] + 1
    log.close()


@contextlib.contextmanager
def read_only(directory: Path) -> Iterator[Path]:
    """`directory` made read-only with chmod. Root ignores permission bits, so as root the
    directory is also bind-mounted read-only (EROFS for every write, root's too)."""
    modes = {path: path.stat().st_mode for path in [directory, *directory.rglob("*")]}
    for path, mode in modes.items():
        path.chmod(mode & ~0o222)
    try:
        if os.geteuid() != 0:
            yield directory
            return
        mount_point = directory.with_name(directory.name + "-ro")
        mount_point.mkdir()
        bound = subprocess.run(["mount", "--bind", str(directory), str(mount_point)], check=False)
        if bound.returncode != 0:
            pytest.skip("running as root, and a read-only bind mount is not allowed here")
        try:
            remounted = subprocess.run(
                ["mount", "-o", "remount,bind,ro", str(mount_point)], check=False
            )
            if remounted.returncode != 0:
                pytest.skip("running as root, and a read-only remount is not allowed here")
            yield mount_point
        finally:
            subprocess.run(["umount", str(mount_point)], check=True)
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


def test_a_read_only_directory_reads_in_full(tmp_path: Path, make_batch: BatchFactory) -> None:
    log_dir = tmp_path / "data"
    log, expected = write_brook_partition(log_dir / "orders-0", make_batch)
    log.close()
    kafka_expected = write_kafka_partition(log_dir / "legacy-3")
    before = file_states(log_dir)
    with read_only(log_dir) as readable:
        with pytest.raises(OSError):
            (readable / "orders-0" / "probe").write_bytes(b"")  # truly read-only
        got = read_everything(readable)
        assert got == {("legacy", 3): kafka_expected, ("orders", 0): expected}
        # Index files that do not exist stay missing: nothing tries to create them.
        legacy = readable / "legacy-3" / f"{0:020d}.log"
        with SegmentReader(legacy) as reader, pytest.raises(FileNotFoundError):
            _ = reader.time_index().entries
    after = file_states(log_dir)
    assert after == before


def test_writes_through_read_only_objects_are_refused(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    log, _ = write_brook_partition(tmp_path / "orders-0", make_batch, batches=5)
    log.close()
    segment = log.dir / f"{0:020d}.log"
    before = file_states(tmp_path)
    records = FileRecords(segment, mutable=False)
    with pytest.raises(io.UnsupportedOperation, match="read-only"):
        records.append(b"x" * 70)
    with pytest.raises(io.UnsupportedOperation):
        records.truncate_to(0)
    records.close()
    index = OffsetIndex(segment.with_suffix(".index"), 0, writable=False)
    for change in (lambda: index.append(10**6, 10**6), lambda: index.resize(10**6), index.reset):
        with pytest.raises(io.UnsupportedOperation):
            change()
    with pytest.raises(io.UnsupportedOperation):
        TimeIndex(segment.with_suffix(".timeindex"), 0, writable=False).delete()
    with pytest.raises(FileNotFoundError):
        FileRecords(tmp_path / "orders-0" / f"{999:020d}.log", mutable=False)
    assert file_states(tmp_path) == before


# --- damage is reported, not repaired -----------------------------------------------------


def test_damaged_segments_are_reported(tmp_path: Path) -> None:
    batches = [
        build_batch([Record(0, BASE_TS + n, b"k", b"value %d" % n)], base_offset=n)
        for n in range(3)
    ]
    bad_crc = bytearray(batches[1])
    bad_crc[-2] ^= 0xFF
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(batches[0] + bytes(bad_crc) + batches[2] + batches[0][:40])
    tails = {
        b"\x00" * 16 + b"\x01" + b"\x00" * 60: "message format v1 (magic 1) is not supported",
        b"\x00" * 16 + b"\x07" + b"\x00" * 60: "magic byte 7 is not a record format",
        struct.pack(">qi", 0, 20) + b"\x00\x00\x00\x00\x02" + b"\x00" * 60: "below the minimum",
        b"\x00" * 11: "too few bytes for a batch header",
    }
    damaged = {}
    for number, (tail, reason) in enumerate(tails.items(), start=1):
        damaged[tmp_path / f"{number:020d}.log"] = (tail, reason)
        (tmp_path / f"{number:020d}.log").write_bytes(batches[0] + tail)
    before = file_states(tmp_path)

    with SegmentReader(path) as reader:
        *good, damage = reader.batches()
        assert [isinstance(b, Batch) and b.crc_is_valid() for b in good] == [True, False, True]
        assert isinstance(damage, Damage)
        assert (damage.position, damage.invalid_bytes) == (3 * len(batches[0]), 40)
        assert "a torn batch: it claims" in damage.reason
        with pytest.raises(CorruptRecordError, match="fails its CRC"):
            list(reader.records())
    for damaged_path, (tail, reason) in damaged.items():
        with SegmentReader(damaged_path) as reader:
            *good, damage = reader.batches()
            assert len(good) == 1 and isinstance(damage, Damage), reason
            assert (damage.position, damage.invalid_bytes) == (len(batches[0]), len(tail))
            assert reason in damage.reason
            with pytest.raises(CorruptRecordError, match="damaged at position"):
                list(reader.records())
    assert file_states(tmp_path) == before


def test_a_segment_that_shrinks_while_read_ends_in_damage(tmp_path: Path) -> None:
    """A broker may truncate the segment a reader has open (a follower's truncation)."""
    batches = [build_batch([Record(0, BASE_TS, b"k", b"v" * 100)], base_offset=n) for n in range(4)]
    path = tmp_path / f"{0:020d}.log"
    path.write_bytes(b"".join(batches))
    for keep in (len(batches[0]), len(batches[0]) + 30, 5):
        with SegmentReader(path) as reader:
            os.truncate(path, keep)
            *good, damage = reader.batches()
            assert len(good) == keep // len(batches[0]) and isinstance(damage, Damage)
            assert damage.position == len(good) * len(batches[0])
        path.write_bytes(b"".join(batches))


def test_damaged_indexes_are_listed_as_they_are(tmp_path: Path) -> None:
    path = tmp_path / f"{100:020d}.index"
    path.write_bytes(struct.pack(">iiii", 5, 300, 3, 200) + bytes(16))  # out of order, zero tail
    index = OffsetIndex(path, 100, writable=False)
    assert [index.entry(n) for n in range(index.entries)] == [(105, 300), (103, 200)]
    with pytest.raises(CorruptIndexError, match="do not increase"):
        index.sanity_check()
    time_index_path = path.with_suffix(".timeindex")
    time_index_path.write_bytes(struct.pack(">qiqi", BASE_TS + 9, 5, BASE_TS, 6))
    time_index = TimeIndex(time_index_path, 100, writable=False)
    assert time_index.entry(1) == (BASE_TS, 106)
    with pytest.raises(CorruptIndexError, match="timestamps that do not increase"):
        time_index.sanity_check()
    odd = tmp_path / f"{200:020d}.index"
    odd.write_bytes(bytes(8) + b"\x01\x02\x03")
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        _ = OffsetIndex(odd, 200, writable=False).entries
    assert path.stat().st_size == 32 and odd.read_bytes() == bytes(8) + b"\x01\x02\x03"


def test_transaction_index_and_snapshot_damage(tmp_path: Path) -> None:
    txn = tmp_path / f"{50:020d}.txnindex"
    txn.write_bytes(struct.pack(">hqqqq", 0, 7, 40, 49, 40))
    assert TransactionIndex(txn, 50).all_aborted_txns() == [AbortedTxn(0, 7, 40, 49, 40)]
    with pytest.raises(CorruptIndexError, match="is less than start offset 50"):
        TransactionIndex(txn, 50).sanity_check()
    txn.write_bytes(struct.pack(">hqqqq", 1, 7, 50, 59, 50))
    with pytest.raises(CorruptIndexError, match="Unexpected aborted transaction version 1"):
        TransactionIndex(txn, 50).all_aborted_txns()
    txn.write_bytes(bytes(40))
    with pytest.raises(CorruptIndexError, match="not a multiple"):
        TransactionIndex(txn, 50).all_aborted_txns()
    assert TransactionIndex(tmp_path / "missing.txnindex", 0).all_aborted_txns() == []
    assert not (tmp_path / "missing.txnindex").exists()

    snapshot = tmp_path / f"{50:020d}.snapshot"
    entries = [(1000, 2, 9, 49, 4, BASE_TS, -1, -1), (1001, 0, 3, 40, 0, BASE_TS - 5, 7, 38)]
    snapshot.write_bytes(snapshot_bytes(entries))
    assert [tuple(vars_of(e)) for e in read_snapshot(snapshot)] == entries
    damaged = bytearray(snapshot.read_bytes())
    damaged[-1] ^= 1
    snapshot.write_bytes(bytes(damaged))
    with pytest.raises(CorruptSnapshotError, match=r"CRC is no longer valid"):
        read_snapshot(snapshot)
    snapshot.write_bytes(snapshot_bytes(entries, version=2))
    with pytest.raises(CorruptSnapshotError, match="unknown file version 2"):
        read_snapshot(snapshot)
    body = struct.pack(">i", 3) + struct.pack(">qhiqiqiq", *entries[0])
    snapshot.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    with pytest.raises(CorruptSnapshotError, match="promises 3 entries"):
        read_snapshot(snapshot)


def vars_of(entry: object) -> list[int]:
    return [getattr(entry, name) for name in entry.__slots__]  # type: ignore[attr-defined]
