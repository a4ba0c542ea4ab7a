from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

import pytest
from storage_helpers import BASE_TS, BatchFactory, append

from brook.protocol.errors import InconsistentTopicIdError
from brook.storage import (
    InconsistentBrokerIdError,
    InconsistentClusterIdError,
    LogConfig,
    LogManager,
)
from brook.storage.checkpoints import OffsetCheckpointFile, read_meta_properties

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=256, max_index_size=4096)


def manager(
    dirs: list[Path], broker_id: int = 1, cluster_id: str | None = "cluster-a", **kwargs: object
) -> LogManager:
    lm = LogManager(dirs, broker_id, cluster_id, lambda topic: CONFIG, **kwargs)  # type: ignore[arg-type]
    lm.startup()
    return lm


def test_startup_writes_meta_and_shutdown_is_clean(
    tmp_path: Path, make_batch: BatchFactory
) -> None:
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    lm = manager(dirs)
    meta = read_meta_properties(dirs[0])
    assert meta is not None and (meta.version, meta.broker_id, meta.cluster_id) == (
        0,
        1,
        "cluster-a",
    )
    topic_id = uuid.uuid4()
    logs = [lm.get_or_create_log("orders", p, topic_id=topic_id) for p in range(4)]
    assert {log.dir.parent for log in logs} == set(dirs)  # spread over the dirs
    for i, log in enumerate(logs):
        for n in range(30 + i):
            append(log, make_batch(1, tag=n))
    assert lm.get_or_create_log("orders", 0) is logs[0]
    with pytest.raises(InconsistentTopicIdError):
        lm.get_or_create_log("orders", 0, topic_id=uuid.uuid4())
    lm.shutdown()
    for d in dirs:
        assert (d / ".kafka_cleanshutdown").exists()
        assert set(OffsetCheckpointFile(d / "recovery-point-offset-checkpoint").read().values())
        assert set(OffsetCheckpointFile(d / "replication-offset-checkpoint").read().values())

    messages: list[str] = []
    lm = manager(dirs, progress=messages.append)
    # One line per partition, and a clean shutdown means no recovery.
    assert sorted(message.split("] ", 1)[1].split(" with ")[0] for message in messages) == [
        f"Loaded log orders-{p}" for p in range(4)
    ]
    assert not any("recovering" in message for message in messages)
    assert not any((d / ".kafka_cleanshutdown").exists() for d in dirs)
    for p in range(4):
        log = lm.get_log("orders", p)
        assert log is not None
        assert log.log_end_offset == 30 + p
        assert log.high_watermark == 30 + p
        assert log.recovery_point == 30 + p
        assert log.topic_id == topic_id
    lm.shutdown()


def test_unclean_start_recovers_past_checkpoint(
    tmp_path: Path, make_batch: BatchFactory, caplog: pytest.LogCaptureFixture
) -> None:
    dirs = [tmp_path / "d"]
    lm = manager(dirs)
    log = lm.get_or_create_log("t", 0)
    for n in range(100):
        append(log, make_batch(1, tag=n))
    lm.flush_dirty_logs()  # flushes what the rolls left behind
    lm.checkpoint_recovery_points_and_log_start_offsets()
    recovery_point = log.recovery_point
    assert 0 < recovery_point < 100
    # Crash: no shutdown, no marker; release the dir lock as a dead process would.
    for fd in lm._lock_fds.values():
        os.close(fd)
    log.close_handlers()

    messages: list[str] = []
    with caplog.at_level(logging.INFO, logger="brook.storage"):
        lm2 = manager(dirs, progress=messages.append)
    reopened = lm2.get_log("t", 0)
    assert reopened is not None and reopened.log_end_offset == 100
    assert len(messages) == 1
    assert messages[0].startswith(f"[1/1 in {dirs[0]}] Loaded log t-0 with ")
    assert messages[0].endswith(
        f", after recovering 1 unflushed segment(s) from recovery point {recovery_point}"
    )
    assert "Loading 1 partition(s)" in caplog.text and "unclean" in caplog.text
    lm2.shutdown()


def test_broker_and_cluster_id_checks(tmp_path: Path) -> None:
    dirs = [tmp_path / "d"]
    manager(dirs, broker_id=1).shutdown()
    with pytest.raises(InconsistentBrokerIdError):
        manager(dirs, broker_id=2)
    with pytest.raises(InconsistentClusterIdError):
        manager(dirs, broker_id=1, cluster_id="other")
    lm = manager(dirs, broker_id=1, cluster_id=None)
    assert lm.cluster_id == "cluster-a"
    lm.shutdown()


def test_generated_cluster_id_is_kept(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d"], cluster_id=None)
    cluster_id = lm.cluster_id
    assert cluster_id is not None and len(cluster_id) == 22
    lm.shutdown()
    lm = manager([tmp_path / "d"], cluster_id=None)
    assert lm.cluster_id == cluster_id
    lm.shutdown()


def test_log_dir_lock(tmp_path: Path) -> None:
    lm = manager([tmp_path / "d"])
    # fcntl locks are per process; a second process must be refused.
    import subprocess
    import sys

    code = (
        "import sys; from brook.storage import LogManager, LogConfig, LogDirLockedError\n"
        f"lm = LogManager([{str(tmp_path / 'd')!r}], 1, 'cluster-a', lambda t: LogConfig())\n"
        "try:\n    lm.startup()\nexcept LogDirLockedError:\n    sys.exit(7)\n"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 7
    lm.shutdown()


def test_deleted_and_foreign_directories(tmp_path: Path, make_batch: BatchFactory) -> None:
    d = tmp_path / "d"
    lm = manager([d])
    log = lm.get_or_create_log("gone", 2)
    append(log, make_batch(1))
    assert lm.delete_log("gone", 2)
    assert not lm.delete_log("gone", 2)
    assert not (d / "gone-2").exists()
    lm.get_or_create_log("kept", 0)
    lm.shutdown()
    half_deleted = d / f"old-1.{uuid.uuid4().hex}-delete"
    half_deleted.mkdir()
    (half_deleted / "00000000000000000000.log").write_bytes(b"")
    (d / "not_a_partition").mkdir()
    lm = manager([d])
    assert not half_deleted.exists()
    assert [log.name for log in lm.all_logs()] == ["kept-0"]
    with pytest.raises(ValueError):
        lm.get_or_create_log("../x", 0)
    lm.shutdown()


def test_log_start_offset_checkpoint(tmp_path: Path, make_batch: BatchFactory) -> None:
    d = tmp_path / "d"
    lm = manager([d])
    log = lm.get_or_create_log("t", 0)
    for n in range(10):
        append(log, make_batch(1, tag=n))
    log.maybe_increment_log_start_offset(4)
    lm.shutdown()
    assert OffsetCheckpointFile(d / "log-start-offset-checkpoint").read() == {("t", 0): 4}
    lm = manager([d])
    log = lm.get_log("t", 0)
    assert log is not None and log.log_start_offset == 4
    lm.shutdown()


def test_retention_pass(tmp_path: Path, make_batch: BatchFactory) -> None:
    lm = LogManager([tmp_path / "d"], 1, "c", lambda t: CONFIG.with_overrides(retention_ms=1000))
    lm.startup()
    log = lm.get_or_create_log("t", 0)
    for n in range(100):
        append(log, make_batch(1, tag=n))
    before = len(log.segments)
    assert lm.delete_old_segments(now_ms=10**15) == before  # all expired: active rolled too
    assert log.log_start_offset == log.log_end_offset == 100
    lm.shutdown()


def test_the_managers_clock_runs_every_log(tmp_path: Path, make_batch: BatchFactory) -> None:
    """One injected clock (Kafka's Time): segment creation times, retention and delayed
    deletes all read it, never the system clock (which is years past these records)."""
    now = [BASE_TS]
    config = CONFIG.with_overrides(retention_ms=10_000, file_delete_delay_ms=5_000)
    lm = LogManager([tmp_path / "d"], 1, "c", lambda topic: config, clock=lambda: now[0])
    lm.startup()
    log = lm.get_or_create_log("t", 0)
    for n in range(60):
        append(log, make_batch(1, BASE_TS, tag=n))
    segments = len(log.segments)
    assert segments > 1
    assert {segment.created_ms for segment in log.segments} == {BASE_TS}
    assert lm.delete_old_segments() == 0  # 0 ms old by the manager's clock
    now[0] += 10_001
    assert lm.delete_old_segments() == segments
    assert log.active_segment.created_ms == now[0]  # rolled by retention, at the clock's time
    assert len(list(log.dir.glob("*.log.deleted"))) == segments
    now[0] += 4_999
    assert lm.purge_deleted_segments() == 0
    now[0] += 1
    assert lm.purge_deleted_segments() == segments
    assert not list(log.dir.glob("*.deleted"))
    lm.shutdown()


def test_new_logs_go_to_the_log_dir_holding_fewest(tmp_path: Path) -> None:
    """Placement by the count of logs each dir holds, kept as logs come and go (not
    counted again at each creation, which made creating n partitions cost n squared)."""
    first, second = tmp_path / "a", tmp_path / "b"
    lm = manager([first, second])
    try:
        for partition in range(4):
            lm.get_or_create_log("spread", partition)
        placed = [lm.dir_of("spread", p) for p in range(4)]
        assert sorted(placed) == [first, first, second, second]
        gone = next(p for p in range(4) if placed[p] == second)
        assert lm.delete_log("spread", gone)
        lm.get_or_create_log("spread", 4)
        assert lm.dir_of("spread", 4) == second
        lm.get_or_create_log("spread", 5)
        assert lm.dir_of("spread", 5) == first  # a tie: the first listed
    finally:
        lm.shutdown()


@pytest.mark.parametrize("dir_count", [1, 2])
def test_a_high_watermark_checkpoint_writes_only_what_moved(
    tmp_path: Path, make_batch: BatchFactory, dir_count: int
) -> None:
    """The checkpoint runs every few seconds over every log: a dir whose high watermarks
    have not moved since its file was written is not written again (the same file, not
    a new one of the same content); one whose have is."""
    dirs = [tmp_path / f"d{i}" for i in range(dir_count)]
    lm = manager(dirs)
    logs = [lm.get_or_create_log("orders", p) for p in range(4)]
    for log in logs:
        for n in range(3):
            append(log, make_batch(1, tag=n))
        log.high_watermark = 2
    lm.checkpoint_high_watermarks()
    files = [d / "replication-offset-checkpoint" for d in dirs]
    inodes = [f.stat().st_ino for f in files]
    assert all(set(OffsetCheckpointFile(f).read().values()) == {2} for f in files)
    lm.checkpoint_high_watermarks()
    assert [f.stat().st_ino for f in files] == inodes
    logs[0].high_watermark = 3
    lm.checkpoint_high_watermarks()
    moved = logs[0].dir.parent / "replication-offset-checkpoint"
    assert OffsetCheckpointFile(moved).read()[("orders", 0)] == 3
    assert moved.stat().st_ino != inodes[files.index(moved)]
    for f, inode in zip(files, inodes, strict=True):
        if f != moved:
            assert f.stat().st_ino == inode
    lm.shutdown()
