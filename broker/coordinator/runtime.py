"""The coordinator runtime: one shard per partition of an internal topic.

Requests run as operations on the shard of their key's partition, at once, on the event
loop: a write operation's records go to the partition through the PartitionWriter and
its response is answered when they are committed; a read operation answers at once. A
write the partition refuses changes nothing and fails the operation with the error, with
a log line. A partition is loaded (replayed into a new shard) when this broker starts to
lead it, and unloaded when it stops; while loading it answers
COORDINATOR_LOAD_IN_PROGRESS, and a partition this broker does not serve answers
NOT_COORDINATOR, as Kafka's CoordinatorRuntime does.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from brook.protocol.coordinator_records import NO_PRODUCER_EPOCH, ControlRecordType
from brook.protocol.errors import CoordinatorLoadInProgressError, KafkaError, NotCoordinatorError
from brook.protocol.record_batch import NO_PRODUCER_ID
from brook.storage.clock import Clock

from .coordinator_timer import CoordinatorTimer, TimerOperation
from .internal_topic import InternalTopic
from .loader import CoordinatorLoader
from .partition_writer import PartitionWriter, TopicPartition
from .shard import CoordinatorResult, CoordinatorShard
from .timer import Timer
from .write_errors import as_kafka_error

log = logging.getLogger("brook.coordinator")

S = TypeVar("S", bound=CoordinatorShard)
T = TypeVar("T")

ShardBuilder = Callable[[TopicPartition, CoordinatorTimer], S]


class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    FAILED = "failed"


@dataclass(eq=False)
class _Context(Generic[S]):
    tp: TopicPartition
    shard: S
    timer: CoordinatorTimer
    state: PartitionState = PartitionState.LOADING
    # The commit of the partition's latest write: an operation without records answers
    # after it, so that no response shows state that is not committed yet.
    last_commit: asyncio.Future[None] | None = field(default=None)


class CoordinatorRuntime(Generic[S]):
    def __init__(
        self,
        topic: InternalTopic,
        writer: PartitionWriter,
        timer: Timer,
        clock: Clock,
        build_shard: ShardBuilder[S],
    ) -> None:
        self.topic = topic
        self.writer = writer
        self.loader = CoordinatorLoader(writer)
        self.timer = timer
        self.clock = clock
        self.build_shard = build_shard
        self._contexts: dict[int, _Context[S]] = {}
        self._reloads: set[asyncio.Future[None]] = set()

    # --- the topic ----------------------------------------------------------------------

    def ensure_topic(self) -> int:
        """Create the topic on first use, with an empty shard for each partition; returns
        its partition count. Raises the creation's KafkaError when it cannot be made."""
        count = self.topic.partition_count()
        if count is None:
            self.topic.create()
            count = self.topic.partition_count()
            assert count is not None
            # The partitions led here were activated as their leadership arrived (see
            # on_election); the others are served by their leaders.
            # The controller has logged the topic's creation (one line for its partitions).
        return count

    def partition_for(self, key: str) -> int:
        """The key's partition, where Kafka's tools expect its records."""
        return self.topic.partition_of(key, self.ensure_topic())

    def topic_partition(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic.name, partition)

    # --- load and unload ----------------------------------------------------------------

    async def start(self) -> None:
        """Load every partition this broker leads: all of them, on a single broker."""
        count = self.topic.partition_count()
        if count is None:
            return
        led = [partition for partition in range(count) if self.topic.leads(partition)]
        if not led:
            return
        log.info("Loading %d of %d partitions of %s", len(led), count, self.topic.name)
        for partition in led:
            await self.load(partition)

    def on_election(self, partition: int, empty: bool) -> asyncio.Future[None] | None:
        """This broker now leads `partition` (Kafka's onElection): an empty partition
        serves at once, one with records loads (COORDINATOR_LOAD_IN_PROGRESS meanwhile);
        the future, when there is one, completes with the load."""
        if empty:
            self.unload(partition)
            self._activate(self._new_context(partition))
            return None
        loading = asyncio.get_running_loop().create_task(self.load(partition))
        self._reloads.add(loading)
        loading.add_done_callback(self._reloads.discard)
        return loading

    def on_resignation(self, partition: int) -> None:
        """Another broker leads `partition` now (Kafka's onResignation): NOT_COORDINATOR
        from here on, and the shard's state and timers go."""
        self.unload(partition)

    async def load(self, partition: int) -> None:
        """Replay one partition into a new shard, which then serves its keys."""
        if partition in self._contexts:
            self.unload(partition)
        context = self._new_context(partition)
        self._contexts[partition] = context
        try:
            summary = await self.loader.load(context.tp, context.shard)
        except (KafkaError, OSError) as exc:
            error = as_kafka_error(exc)
            context.state = PartitionState.FAILED
            log.error("Could not load %s: %s", context.tp, error.message or error.error_code.name)
            return
        if self._contexts.get(partition) is not context:
            return  # unloaded while it loaded
        self._activate(context)
        if summary.records or summary.markers:
            log.info(
                "Loaded %s: %d records and %d transaction markers up to offset %d in %.0f ms",
                context.tp,
                summary.records,
                summary.markers,
                summary.end_offset,
                summary.elapsed_ms,
            )

    def unload(self, partition: int) -> None:
        """Stop serving a partition: its timers stop and its shard's state is dropped."""
        context = self._contexts.pop(partition, None)
        if context is None:
            return
        context.timer.cancel_all()
        if context.state is PartitionState.ACTIVE:
            context.shard.on_unloaded()
        log.info("Unloaded %s", context.tp)

    def state_of(self, partition: int) -> PartitionState | None:
        context = self._contexts.get(partition)
        return context.state if context is not None else None

    def active_shards(self) -> Iterator[S]:
        for context in self._contexts.values():
            if context.state is PartitionState.ACTIVE:
                yield context.shard

    def _new_context(self, partition: int) -> _Context[S]:
        tp = self.topic_partition(partition)
        timer = CoordinatorTimer(
            self.timer,
            partition,
            lambda name, operation: self._run_timer(partition, name, operation),
        )
        return _Context(tp, self.build_shard(tp, timer), timer)

    def _activate(self, context: _Context[S]) -> None:
        self._contexts[context.tp.partition] = context
        context.state = PartitionState.ACTIVE
        context.shard.on_loaded()

    def _active(self, partition: int) -> _Context[S]:
        context = self._contexts.get(partition)
        if context is None or context.state is PartitionState.FAILED:
            raise NotCoordinatorError(
                f"This broker is not the coordinator of {self.topic.name}-{partition}"
            )
        if context.state is PartitionState.LOADING:
            raise CoordinatorLoadInProgressError(f"{context.tp} is still loading")
        return context

    # --- operations ---------------------------------------------------------------------

    def schedule_read_operation(self, partition: int, operation: Callable[[S], T]) -> T:
        """Run an operation that writes nothing, and answer at once from the shard's
        latest state, committed or not (a heartbeat, a produce's transaction check);
        answers that must show only committed state wait for `writes_committed` first."""
        return operation(self._active(partition).shard)

    async def writes_committed(self, partition: int) -> None:
        """Wait until the partition's writes so far are committed, so that a read made
        next shows no state a failed write could take back: the shard applies records as
        the partition takes them, as Kafka's runtime does, and Kafka answers such reads
        (OffsetFetch, DescribeTransactions) from its last committed snapshot. Raises
        NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS as a read would."""
        while True:
            pending = self._active(partition).last_commit
            if pending is None or pending.done():
                return
            # A failed commit reloads the shard; the loop then waits for the reload.
            await asyncio.wait([pending])

    def schedule_write_operation(
        self, name: str, partition: int, operation: Callable[[S], CoordinatorResult[T]]
    ) -> asyncio.Future[T]:
        """Run an operation now; the future answers when its records are committed, or
        fails with the KafkaError that kept them from being written."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        try:
            context = self._active(partition)
            result = operation(context.shard)
        except KafkaError as exc:
            future.set_exception(exc)
            return future
        self._write(context, name, result, future)
        return future

    def schedule_transaction_completion(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: ControlRecordType,
    ) -> asyncio.Future[None]:
        """Write a transaction's COMMIT or ABORT marker to this partition (the transaction
        coordinator asks); the shard applies it at once, and the future answers when the
        marker is committed."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        try:
            context = self._active(partition)
            appended = self.writer.append_end_transaction_marker(
                context.tp, producer_id, producer_epoch, coordinator_epoch, result, self.clock()
            )
        except (KafkaError, OSError) as exc:
            future.set_exception(as_kafka_error(exc))
            return future
        context.shard.replay_end_transaction_marker(producer_id, producer_epoch, result)
        outcome: CoordinatorResult[None] = CoordinatorResult([], None)
        committed = asyncio.ensure_future(_wait(appended))
        context.last_commit = committed
        committed.add_done_callback(
            lambda done: self._on_commit(context, f"{result.name} marker", outcome, future, done)
        )
        return future

    def _run_timer(
        self, partition: int, name: str, operation: TimerOperation
    ) -> asyncio.Future[Any]:
        return self.schedule_write_operation(name, partition, lambda _shard: operation())

    def _write(
        self,
        context: _Context[S],
        name: str,
        result: CoordinatorResult[T],
        future: asyncio.Future[T],
    ) -> None:
        if not result.records:
            self._after_last_commit(context, lambda: _complete(result, future, None))
            return
        try:
            appended = self.writer.append(context.tp, result.records, self.clock(), result.producer)
        except (KafkaError, OSError) as exc:
            error = as_kafka_error(exc)
            log.warning(
                "%s: could not write the %d record(s) of %s: %s",
                context.tp,
                len(result.records),
                name,
                error.message or error.error_code.name,
            )
            _complete(result, future, error)
            return
        if result.replay_records:
            producer_id, producer_epoch = (
                (result.producer.producer_id, result.producer.producer_epoch)
                if result.producer is not None
                else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            )
            for index, record in enumerate(result.records):
                context.shard.replay(
                    appended.base_offset + index,
                    producer_id,
                    producer_epoch,
                    record.key,
                    record.value,
                )
        committed = asyncio.ensure_future(_wait(appended))
        context.last_commit = committed
        committed.add_done_callback(
            lambda done: self._on_commit(context, name, result, future, done)
        )

    def _on_commit(
        self,
        context: _Context[S],
        name: str,
        result: CoordinatorResult[T],
        future: asyncio.Future[T],
        done: asyncio.Future[None],
    ) -> None:
        if context.last_commit is done:
            context.last_commit = None
        exc = done.exception()
        if exc is None:
            _complete(result, future, None)
            return
        error = as_kafka_error(exc)
        log.warning(
            "%s: the records of %s were written but not committed: %s; reloading it",
            context.tp,
            name,
            error.message or error.error_code.name,
        )
        _complete(result, future, error)
        if self._contexts.get(context.tp.partition) is context:
            # The shard has replayed records that will never be committed: rebuild it
            # from what is.
            reload = asyncio.ensure_future(self.load(context.tp.partition))
            self._reloads.add(reload)
            reload.add_done_callback(self._reloads.discard)

    def _after_last_commit(self, context: _Context[S], then: Callable[[], None]) -> None:
        pending = context.last_commit
        if pending is None or pending.done():
            then()
        else:
            pending.add_done_callback(lambda _: then())


async def _wait(appended: Any) -> None:
    await appended


def _complete(
    result: CoordinatorResult[T], future: asyncio.Future[T], error: KafkaError | None
) -> None:
    if result.on_written is not None:
        result.on_written(error)
    if future.done():
        return
    if error is None:
        future.set_result(result.response)
    else:
        future.set_exception(error)
