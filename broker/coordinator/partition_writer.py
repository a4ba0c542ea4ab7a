"""The runtime's one seam to the log: append a shard's records, read a partition back.

Like Kafka's PartitionWriter, an append either fails at once (nothing was written: the
error is raised) or returns at once with where the records went; awaiting the result
waits until they are committed (the high watermark passed them), which is when the
runtime answers the request that wrote them. Reading gives the committed batches for
replay, control batches included.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from brook.protocol.coordinator_records import ControlRecordType

from .records import CoordinatorRecord, StoredBatch, TransactionalProducer


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Appended:
    """Where an append went; awaiting it waits for the commit."""

    base_offset: int
    next_offset: int
    committed: Awaitable[None]

    def __await__(self) -> Generator[Any, None, None]:
        return self.committed.__await__()


class AlreadyCommitted:
    """The commit of an append that was committed as it was written."""

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


class PartitionWriter(Protocol):
    def append(
        self,
        tp: TopicPartition,
        records: Sequence[CoordinatorRecord],
        now_ms: int,
        producer: TransactionalProducer | None = None,
    ) -> Appended:
        """Append the records as one batch (in `producer`'s transaction, if given).
        Raises a KafkaError (or OSError) when nothing was written; the returned Appended
        completes when they are committed, or raises if they never will be."""
        ...

    def append_end_transaction_marker(
        self,
        tp: TopicPartition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType,
        now_ms: int,
    ) -> Appended:
        """Append a COMMIT or ABORT marker of a producer's transaction, as `append`."""
        ...

    def read(self, tp: TopicPartition) -> Iterator[StoredBatch]:
        """The partition's committed batches from its log start, in order."""
        ...
