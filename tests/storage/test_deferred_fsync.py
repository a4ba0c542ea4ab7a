"""A new partition's files are written at once and fsynced later, together
(storage/deferred_fsync.py): inside deferring_fsyncs() atomic writes wait for
sync_deferred; outside they are fsynced as they are written; and a partition.metadata that
a machine lost (empty, its fsync never made) reads as no topic id, to be written again."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from brook.storage import deferred_fsync
from brook.storage.checkpoints import (
    atomic_write_bytes,
    read_partition_metadata,
    write_partition_metadata,
)
from brook.storage.log import Log
from brook.storage.log_config import LogConfig
from brook.storage.log_file_utils import syncfs_supported


def test_writes_inside_wait_for_sync_deferred(tmp_path: Path) -> None:
    deferred_fsync.sync_deferred()  # nothing left from elsewhere
    atomic_write_bytes(tmp_path / "now", b"fsynced as written")
    assert deferred_fsync.pending() == 0
    with deferred_fsync.deferring_fsyncs():
        atomic_write_bytes(tmp_path / "later", b"fsynced later")
        Log.open(tmp_path / "topic-0", LogConfig(), topic_id=uuid.uuid4()).close()
    assert (tmp_path / "later").read_bytes() == b"fsynced later"
    # The file and its dir, the partition's metadata and epoch files, and the new
    # partition dir's parent.
    assert deferred_fsync.pending() >= 3
    assert deferred_fsync.sync_deferred() >= 3
    assert deferred_fsync.pending() == 0


def test_a_file_gone_before_its_fsync_is_skipped(tmp_path: Path) -> None:
    with deferred_fsync.deferring_fsyncs():
        (tmp_path / "gone").mkdir()
        atomic_write_bytes(tmp_path / "gone" / "file", b"x")
    (tmp_path / "gone" / "file").unlink()
    (tmp_path / "gone").rmdir()
    assert deferred_fsync.sync_deferred() == 2


def test_an_empty_partition_metadata_reads_as_none_and_is_written_again(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    partition = tmp_path / "orders-0"
    partition.mkdir()
    (partition / "partition.metadata").write_bytes(b"")
    assert read_partition_metadata(partition) is None
    Log.open(partition, LogConfig(), topic_id=topic_id).close()
    assert read_partition_metadata(partition) == topic_id
    write_partition_metadata(partition, topic_id)
    assert read_partition_metadata(partition) == topic_id


def test_many_fsyncs_run_side_by_side_and_skip_the_gone(tmp_path: Path) -> None:
    deferred_fsync.sync_deferred()
    with deferred_fsync.deferring_fsyncs():
        for index in range(deferred_fsync.PARALLEL_FROM + 8):
            atomic_write_bytes(tmp_path / f"file-{index}", b"x")
    (tmp_path / "file-0").unlink()
    # Every file and their one directory, the gone one skipped without an error.
    assert deferred_fsync.sync_deferred() == deferred_fsync.PARALLEL_FROM + 9
    assert deferred_fsync.pending() == 0


def _dirty_kib() -> int:
    """The kernel's count of page-cache data not yet written to disk, every file's."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Dirty:"):
            return int(line.split()[1])
    raise AssertionError("no Dirty line in /proc/meminfo")


@pytest.mark.skipif(not syncfs_supported(), reason="syncfs(2) is Linux's")
def test_thousands_of_deferred_writes_reach_the_disk_in_one_sync(tmp_path: Path) -> None:
    """From SYNCFS_FROM deferred files, one syncfs of their filesystem writes them out:
    the page cache holds none of their data after."""
    deferred_fsync.sync_deferred()
    count = deferred_fsync.SYNCFS_FROM
    before = _dirty_kib()
    with deferred_fsync.deferring_fsyncs():
        for index in range(count):
            atomic_write_bytes(tmp_path / f"file-{index}", bytes(32 * 1024))
    written = _dirty_kib() - before
    # 32 MiB written and not yet on disk (the kernel writes dirty pages out after 30 s).
    assert written > count * 32 * 3 // 4
    assert deferred_fsync.sync_deferred() == count + 1  # the files and their directory
    assert deferred_fsync.pending() == 0
    assert _dirty_kib() - before < written // 4


def test_a_clean_shutdown_syncs_what_its_closing_logs_wrote(tmp_path: Path) -> None:
    """Logs loaded from disk rewrite their leader epoch checkpoints as they close (each
    truncated to its empty log's end at load); the shutdown defers those fsyncs and makes
    them all before it marks the dir cleanly shut down."""
    from brook.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager

    deferred_fsync.sync_deferred()
    manager = LogManager([tmp_path], 1, "c", lambda topic: LogConfig())
    manager.startup()
    for index in range(deferred_fsync.BULK_PARTITIONS + 6):
        manager.get_or_create_log("t", index).leader_epoch_cache.assign(0, 0)
    manager.shutdown()
    assert deferred_fsync.pending() == 0
    again = LogManager([tmp_path], 1, "c", lambda topic: LogConfig())
    again.startup()
    assert len(again.all_logs()) == deferred_fsync.BULK_PARTITIONS + 6
    again.shutdown()
    assert deferred_fsync.pending() == 0
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
