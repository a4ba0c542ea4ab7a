"""Segment files open their descriptors when used and let them go when idle
(storage/idle_files.py): a log keeps working across the closing, and its unsynced bytes are
still synced by a flush that comes after."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from storage_helpers import BASE_TS, BatchFactory, append

from brook.protocol.record_batch import iter_records
from brook.storage import Log, LogConfig, idle_files

T = TypeVar("T")


def _on_a_sweeping_thread(work: Callable[[], T]) -> T:
    """Run `work` on a thread of its own that sweeps (a registry of its own, as a
    broker's loop has), and return what it returned."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        idle_files.sweep_this_thread()
        try:
            result.append(work())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def _fds_under(directory: Path) -> int:
    """Descriptors of this process open on files in `directory`."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        count += target.startswith(str(directory))
    return count


def test_a_new_or_reopened_log_holds_no_descriptor(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    def work() -> tuple[int, int]:
        log = Log.open(partition_dir, small_config)
        new = _fds_under(partition_dir)
        append(log, make_batch(3, BASE_TS))
        log.close()
        # Opened again (its active indexes preallocated again): nothing held either.
        log = Log.open(partition_dir, small_config)
        try:
            return new, _fds_under(partition_dir)
        finally:
            log.close()

    assert _on_a_sweeping_thread(work) == (0, 0)


def test_idle_files_close_and_reopen_without_loss(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    def work() -> list[int]:
        log = Log.open(partition_dir, small_config)
        try:
            for i in range(40):  # several segments, indexed
                append(log, make_batch(3, BASE_TS + i, tag=i))
            held = _fds_under(partition_dir)
            assert held >= 1 and idle_files.open_count() >= 1
            # The first look finds them used, the second idle: closed then.
            assert idle_files.close_idle() == 0
            closed = idle_files.close_idle()
            assert closed == held == idle_files.open_count() + closed
            assert _fds_under(partition_dir) == 0
            # Written after closing: reopened; then flushed while closed again.
            info = append(log, make_batch(2, BASE_TS + 100, tag=100))
            assert _fds_under(partition_dir) >= 1
            idle_files.close_idle()
            idle_files.close_idle()
            assert _fds_under(partition_dir) == 0
            log.flush()
            assert log.recovery_point == log.log_end_offset
            offsets: list[int] = []
            while not offsets or offsets[-1] + 1 < log.log_end_offset:
                data = log.read(offsets[-1] + 1 if offsets else 0, 1 << 20)
                offsets += [record.offset for record in iter_records(data.records)]
            assert info.last_offset == log.log_end_offset - 1
            return offsets
        finally:
            log.close()

    assert _on_a_sweeping_thread(work) == list(range(122))


def test_files_opened_on_a_thread_that_does_not_sweep_are_left_alone(
    partition_dir: Path, small_config: LogConfig, make_batch: BatchFactory
) -> None:
    log = Log.open(partition_dir, small_config)
    try:
        append(log, make_batch(3, BASE_TS))
        assert _fds_under(partition_dir) >= 1
        assert _on_a_sweeping_thread(lambda: (idle_files.close_idle(), idle_files.close_idle()))
        assert _fds_under(partition_dir) >= 1
    finally:
        log.close()
    assert _fds_under(partition_dir) == 0
