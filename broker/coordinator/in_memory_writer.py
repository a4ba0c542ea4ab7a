"""A PartitionWriter that keeps each partition's batches in memory.

The coordinator's own seam, implemented without a log: tests of a coordinator run its
real runtime and shards against it, with no broker and no disk. Batches are encoded and
decoded exactly as the log stores them. A test can hold commits back (as replicas that
have not caught up would), fail them (as a lost leadership would: the uncommitted tail
is truncated), make the next appends fail (as a full disk would), and append batches of
other writers (a transactional producer's offsets, transaction markers).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

from brook.protocol.coordinator_records import ControlRecordType
from brook.protocol.record_batch import set_base_offset, split_batches

from .partition_writer import AlreadyCommitted, Appended, TopicPartition
from .records import (
    CoordinatorRecord,
    StoredBatch,
    TransactionalProducer,
    encode_batch,
    encode_end_transaction_marker,
    encode_write,
    stored_batches,
)


class InMemoryPartitionWriter:
    def __init__(self) -> None:
        self._batches: dict[TopicPartition, list[bytes]] = {}
        self._log_end: dict[TopicPartition, int] = {}
        self._high_watermark: dict[TopicPartition, int] = {}
        self._append_failures: list[BaseException] = []
        self.hold_commits = False
        self._held: list[tuple[TopicPartition, int, asyncio.Future[None]]] = []
        self.appends = 0

    # --- PartitionWriter --------------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        records: Sequence[CoordinatorRecord],
        now_ms: int,
        producer: TransactionalProducer | None = None,
    ) -> Appended:
        if self._append_failures:
            raise self._append_failures.pop(0)
        return self._store(tp, encode_write(records, now_ms, producer))

    def append_end_transaction_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType,
        now_ms: int,
    ) -> Appended:
        if self._append_failures:
            raise self._append_failures.pop(0)
        return self._store(
            tp,
            encode_end_transaction_marker(
                producer_id, producer_epoch, coordinator_epoch, result, now_ms
            ),
        )

    def read(self, tp: TopicPartition) -> Iterator[StoredBatch]:
        high_watermark = self._high_watermark.get(tp, 0)
        for data in list(self._batches.get(tp, [])):
            for batch in stored_batches(data):
                if batch.next_offset > high_watermark:
                    return
                yield batch

    # --- what a test arranges ---------------------------------------------------------

    def fail_next_append(self, error: BaseException) -> None:
        """The next append raises `error` and writes nothing."""
        self._append_failures.append(error)

    def append_batch(
        self,
        tp: TopicPartition,
        records: Sequence[CoordinatorRecord],
        now_ms: int,
        **attributes: Any,
    ) -> Appended:
        """A batch some other writer puts in the partition; `attributes` are those of
        encode_batch (producer id and epoch, transactional, control)."""
        return self._store(tp, encode_batch(records, now_ms, **attributes))

    def commit_held(self) -> None:
        """The held appends are committed: the high watermark reaches the log end."""
        held, self._held = self._held, []
        for tp, offset, future in held:
            self._high_watermark[tp] = max(self._high_watermark.get(tp, 0), offset)
            if not future.done():
                future.set_result(None)

    def fail_held(self, error: BaseException) -> None:
        """The held appends will never commit: they are truncated away."""
        held, self._held = self._held, []
        for tp, _, future in held:
            self._truncate(tp, self._high_watermark.get(tp, 0))
            if not future.done():
                future.set_exception(error)

    def log_end_offset(self, tp: TopicPartition) -> int:
        return self._log_end.get(tp, 0)

    # --- storage ----------------------------------------------------------------------

    def _store(self, tp: TopicPartition, buffer: bytearray) -> Appended:
        base_offset = self._log_end.get(tp, 0)
        header = split_batches(buffer)[0]
        set_base_offset(buffer, header, base_offset)
        self._batches.setdefault(tp, []).append(bytes(buffer))
        next_offset = header.next_offset
        self._log_end[tp] = next_offset
        self.appends += 1
        if self.hold_commits:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._held.append((tp, next_offset, future))
            return Appended(base_offset, next_offset, future)
        self._high_watermark[tp] = next_offset
        return Appended(base_offset, next_offset, AlreadyCommitted())

    def _truncate(self, tp: TopicPartition, offset: int) -> None:
        kept = [
            data
            for data in self._batches.get(tp, [])
            if split_batches(data)[0].next_offset <= offset
        ]
        self._batches[tp] = kept
        self._log_end[tp] = offset
