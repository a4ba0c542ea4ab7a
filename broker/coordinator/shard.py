"""What a coordinator implements for the runtime: one shard per partition it leads.

A shard is a state machine over its partition's records. The runtime replays the
partition into it when it loads, then runs each request as an operation on it: the
operation returns a CoordinatorResult with the records to write and the response, and
the runtime answers once the records are committed. An operation whose records stand
for state it keeps itself (a classic group's members) changes that state itself and
says so with `replay_records=False`; otherwise the runtime replays the records into
the shard as soon as the partition has taken them, so the next operation sees them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from brook.protocol.coordinator_records import ControlRecordType
from brook.protocol.errors import KafkaError

from .records import CoordinatorRecord, TransactionalProducer

T = TypeVar("T")

# Called once the records of an operation are committed (None) or failed (the error).
WriteCallback = Callable[[KafkaError | None], None]


@dataclass
class CoordinatorResult(Generic[T]):
    records: Sequence[CoordinatorRecord]
    response: T
    replay_records: bool = True
    on_written: WriteCallback | None = field(default=None)
    # Written inside this producer's transaction (TxnOffsetCommit); None for the
    # coordinator's own records.
    producer: TransactionalProducer | None = None


class CoordinatorShard(Protocol):
    def replay(
        self,
        offset: int,
        producer_id: int,
        producer_epoch: int,
        key: bytes,
        value: bytes | None,
    ) -> None:
        """Apply one data record. A transactional write carries its producer id and
        epoch; it takes effect only when its transaction's marker commits it."""
        ...

    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, result: ControlRecordType
    ) -> None:
        """A transaction of `producer_id` ended (COMMIT or ABORT)."""
        ...

    def on_loaded(self) -> None:
        """The partition is replayed: the shard starts serving (and its timers)."""
        ...

    def on_unloaded(self) -> None:
        """The partition left this broker: the shard stops; its state is dropped."""
        ...
