"""Moving a partition to another log dir (AlterReplicaLogDirs), as Kafka's
ReplicaAlterLogDirsThread does.

The partition keeps serving from its current log while a future log in the target dir
copies it batch by batch (a chunk per turn of the event loop, so nobody waits on the
copy). Appends go on meanwhile; once the copy has caught up with the log end offset the
future log is swapped in, within one step on the loop, so no append falls between the
last copy and the swap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from brook.protocol.errors import KafkaError
from brook.storage.log_manager import LogManager

if TYPE_CHECKING:
    from brook.storage.log import Log

    from .partition import Partition

log = logging.getLogger("brook.log_dir_mover")

# Bytes read from the current log at a time, and how long one turn of the event loop
# may copy before it lets other work run. The copy must outpace the appends of a busy
# partition, or it would never catch up; a few milliseconds a turn keep the others served.
COPY_CHUNK_BYTES = 1024 * 1024
COPY_TURN_S = 0.005

PartitionLookup = Callable[[str, int], "Partition | None"]


class LogDirMover:
    def __init__(self, log_manager: LogManager, partition_of: PartitionLookup) -> None:
        self._log_manager = log_manager
        self._partition_of = partition_of
        self._tasks: dict[tuple[str, int], asyncio.Task[None]] = {}

    def move(self, partition: Partition, log_dir: Path) -> None:
        """Start copying `partition` to `log_dir` (a no-op when it is there already).

        Raises KafkaError (KAFKA_STORAGE_ERROR) when the future log cannot be created.
        """
        key = (partition.topic, partition.index)
        manager = self._log_manager
        if manager.dir_of(*key) == log_dir:
            # Asked to stay where it is: a move elsewhere in progress is called off.
            self._cancel(key)
            manager.abandon_future_log(*key)
            return
        future = manager.future_log(*key)
        if future is not None and future.dir.parent == log_dir:
            return  # already on its way there
        self._cancel(key)
        future = manager.create_future_log(partition.topic, partition.index, log_dir)
        log.info("Moving %s-%d to %s", partition.topic, partition.index, log_dir)
        self._tasks[key] = asyncio.get_running_loop().create_task(self._copy(key, future))

    def _cancel(self, key: tuple[str, int]) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def stop(self) -> None:
        """Stop every copy; the unfinished future logs are removed at the next start."""
        for task in self._tasks.values():
            task.cancel()
        self._tasks.clear()

    async def _copy(self, key: tuple[str, int], future: Log) -> None:
        topic, index = key
        try:
            while True:
                partition = self._partition_of(topic, index)
                if partition is None or self._log_manager.future_log(topic, index) is not future:
                    return  # the partition was deleted, or another move replaced this one
                if partition.is_offline or future.is_offline:
                    return
                if self._copy_for_a_turn(partition.log, future):
                    self._swap(partition, future)
                    return
                await asyncio.sleep(0)
        except KafkaError as exc:
            log.error("Moving %s-%d to %s failed: %s", topic, index, future.dir.parent, exc)
            if self._log_manager.future_log(topic, index) is future:
                self._log_manager.abandon_future_log(topic, index)
        finally:
            if self._tasks.get(key) is asyncio.current_task():
                del self._tasks[key]

    def _copy_for_a_turn(self, current: Log, future: Log) -> bool:
        """Copy chunks for up to COPY_TURN_S; True once the future log has caught up."""
        deadline = time.monotonic() + COPY_TURN_S
        while True:
            if self._copy_chunk(current, future):
                return True
            if time.monotonic() >= deadline:
                return False

    def _copy_chunk(self, current: Log, future: Log) -> bool:
        """Copy the next batches; True once the future log has caught up."""
        fetch_offset = future.log_end_offset
        starting = fetch_offset < current.log_start_offset
        if starting:
            # A fresh copy, or retention moved the current log's start past the copy.
            fetch_offset = current.log_start_offset
        if fetch_offset >= current.log_end_offset:
            if future.log_end_offset != current.log_end_offset:
                future.truncate_fully_and_start_at(current.log_end_offset)
            return True
        data = current.read(fetch_offset, COPY_CHUNK_BYTES, min_one_message=True)
        from brook.protocol.record_batch import split_batches  # only once a move runs

        records = data.data
        batches = split_batches(records)
        if not batches:
            return False
        if starting or batches[0].base_offset != future.log_end_offset:
            # The batch holding the log start may begin below it.
            future.truncate_fully_and_start_at(batches[0].base_offset)
        future.append_as_follower(records, batches)
        return False

    def _swap(self, partition: Partition, future: Log) -> None:
        current = partition.log
        future.high_watermark = current.high_watermark
        partition.log = self._log_manager.replace_current_with_future_log(
            partition.topic, partition.index, log_start_offset=current.log_start_offset
        )
        # The new dir learns the partition's log start at once, not at the next tick.
        self._log_manager.checkpoint_recovery_points_and_log_start_offsets()
