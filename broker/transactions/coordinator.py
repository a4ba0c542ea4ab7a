"""The transaction coordinator the APIs call: finds a transactional id's shard (its
partition of `__transaction_state`), runs the request on it, writes the markers of a
transaction that is being completed, and turns failures into Kafka's errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from brook.coordinator_state.transaction_metadata import (
    TV_0,
    TopicPartitionKey,
    TransactionMetadata,
)
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode, InvalidTransactionTimeoutError, KafkaError
from brook.storage.clock import Clock

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.internal_topic import InternalTopic, broker_internal_topic
from ..coordinator.partition_writer import PartitionWriter, TopicPartition
from ..coordinator.runtime import CoordinatorRuntime
from ..coordinator.shard import CoordinatorResult
from ..coordinator.timer import Timer
from ..coordinator.write_errors import as_coordinator_write_error
from ..groups.coordinator import GroupCoordinator
from .markers import RETRY_BACKOFF_S, MarkerRoute, TransactionMarkerWriter
from .shard import (
    InitProducerIdResult,
    ProducerIdAndEpoch,
    TransactionCoordinatorShard,
    TransactionTimeouts,
)

if TYPE_CHECKING:
    from ..metadata.cache import MetadataCache
    from ..metadata.controller import Controller

log = logging.getLogger("brook.transactions")
T = TypeVar("T")

TRANSACTION_STATE_TOPIC = cr.TRANSACTION_STATE_TOPIC


def transaction_state_topic(
    metadata: MetadataCache, controller: Controller, config: Callable[[], Any]
) -> InternalTopic:
    """`__transaction_state` as the broker keeps it (transaction.state.log.* settings)."""
    return broker_internal_topic(
        TRANSACTION_STATE_TOPIC,
        cr.transactional_id_partition,
        metadata,
        controller,
        config,
        "transaction.state.log.",
        "uncompressed",
        # Kafka's TransactionLog: a transaction's state is written to at least
        # transaction.state.log.min.isr replicas, and never elected uncleanly.
        lambda settings: {
            "min.insync.replicas": str(settings["transaction.state.log.min.isr"]),
            "unclean.leader.election.enable": "false",
        },
    )


class TransactionCoordinator:
    def __init__(
        self,
        config: Any,
        topic: InternalTopic,
        writer: PartitionWriter,
        timer: Timer,
        clock: Clock,
        groups: GroupCoordinator,
        next_producer_id: Callable[[], int],
        marker_route: MarkerRoute | None = None,
    ) -> None:
        self.max_timeout_ms = int(config["transaction.max.timeout.ms"])
        timeouts = TransactionTimeouts(
            max_timeout_ms=self.max_timeout_ms,
            abort_check_interval_ms=int(
                config["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
            ),
            id_expiration_ms=int(config["transactional.id.expiration.ms"]),
            id_expiration_check_interval_ms=int(
                config["transaction.remove.expired.transaction.cleanup.interval.ms"]
            ),
        )
        self.markers = TransactionMarkerWriter(writer, groups, self._complete, clock, marker_route)

        def build_shard(
            tp: TopicPartition, shard_timer: CoordinatorTimer
        ) -> TransactionCoordinatorShard:
            return TransactionCoordinatorShard(
                tp, shard_timer, timeouts, clock, next_producer_id, self.markers.write
            )

        self.runtime: CoordinatorRuntime[TransactionCoordinatorShard] = CoordinatorRuntime(
            topic, writer, timer, clock, build_shard
        )

    async def start(self) -> None:
        """Load `__transaction_state`, and finish the transactions a stop left completing."""
        await self.runtime.start()
        for shard in self.runtime.active_shards():
            self._complete_left_over(shard, "after a restart")

    def on_election(self, partition: int, empty: bool) -> None:
        """This broker leads a partition of `__transaction_state` now: load it, then
        finish the transactions its previous coordinator left completing."""
        loading = self.runtime.on_election(partition, empty)
        if loading is None:
            return

        def loaded(_: asyncio.Future[None]) -> None:
            for shard in self.runtime.active_shards():
                if shard.tp.partition == partition:
                    self._complete_left_over(shard, "after a coordinator change")

        loading.add_done_callback(loaded)

    def on_resignation(self, partition: int) -> None:
        self.runtime.on_resignation(partition)

    def _complete_left_over(self, shard: TransactionCoordinatorShard, why: str) -> None:
        for prepared in shard.completing():
            log.info(
                "Transactional id %s: completing its transaction (%s) %s",
                prepared.transactional_id,
                prepared.state.name,
                why,
            )
            self.markers.write(prepared)

    def stop(self) -> None:
        self.markers.stop()

    def ensure_topic(self) -> None:
        """Create `__transaction_state` the first time a client looks for a coordinator."""
        self.runtime.ensure_topic()

    # --- requests -----------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
    ) -> asyncio.Future[InitProducerIdResult]:
        if not 0 < txn_timeout_ms <= self.max_timeout_ms:
            raise InvalidTransactionTimeoutError(
                f"The transaction timeout {txn_timeout_ms} ms is larger than"
                f" transaction.max.timeout.ms ({self.max_timeout_ms}) or not positive"
            )
        return self._write(
            "InitProducerId",
            transactional_id,
            lambda shard: shard.init_producer_id(transactional_id, txn_timeout_ms, expected),
        )

    def add_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: list[TopicPartitionKey],
        client_transaction_version: int = TV_0,
    ) -> asyncio.Future[None]:
        return self._write(
            "AddPartitionsToTxn",
            transactional_id,
            lambda shard: shard.add_partitions(
                transactional_id, producer, partitions, client_transaction_version
            ),
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: list[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        """KIP-890's verify-only AddPartitionsToTxn: the partitions not in the producer's
        ongoing transaction, with INVALID_TXN_STATE (nothing is written)."""
        return self.runtime.schedule_read_operation(
            self._partition(transactional_id),
            lambda shard: shard.verify_partitions(transactional_id, producer, partitions),
        )

    def end_transaction(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        client_transaction_version: int = TV_0,
    ) -> asyncio.Future[ProducerIdAndEpoch]:
        return self._write(
            "EndTxn",
            transactional_id,
            lambda shard: shard.end_transaction(
                transactional_id, producer, commit, client_transaction_version
            ),
        )

    async def writes_committed(self, transactional_id: str) -> None:
        """Wait until the id's partition has committed every write so far (a read
        answered after it shows only committed state); errors are left to the read."""
        with contextlib.suppress(KafkaError):
            await self.runtime.writes_committed(self._partition(transactional_id))

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.runtime.schedule_read_operation(
            self._partition(transactional_id), lambda shard: shard.describe(transactional_id)
        )

    def transactions(self) -> Iterator[TransactionMetadata]:
        for shard in self.runtime.active_shards():
            yield from list(shard.transactions.values())

    # --- internals ----------------------------------------------------------------------

    def _partition(self, transactional_id: str) -> int:
        return self.runtime.partition_for(transactional_id)

    def _write(
        self,
        name: str,
        transactional_id: str,
        operation: Callable[[TransactionCoordinatorShard], CoordinatorResult[T]],
    ) -> asyncio.Future[T]:
        """Run a write operation on the id's shard; a write that fails answers as Kafka's
        coordinator does (NOT_COORDINATOR when this broker no longer leads the partition,
        COORDINATOR_NOT_AVAILABLE when it cannot take or commit the write just now), so
        that the producer finds the coordinator again and retries."""
        written = self.runtime.schedule_write_operation(
            name, self._partition(transactional_id), operation
        )
        answer: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        def settle(done: asyncio.Future[T]) -> None:
            if answer.done():
                return
            if done.cancelled():
                answer.cancel()
                return
            error = done.exception()
            if error is None:
                answer.set_result(done.result())
            elif isinstance(error, KafkaError):
                answer.set_exception(as_coordinator_write_error(error))
            else:
                answer.set_exception(error)

        written.add_done_callback(settle)
        return answer

    def _complete(self, prepared: TransactionMetadata) -> None:
        """Every marker is written: write the Complete state (again after a pause if the
        write fails, as the markers are)."""
        future = self.runtime.schedule_write_operation(
            "complete transaction",
            self._partition(prepared.transactional_id),
            lambda shard: shard.complete_transaction(prepared),
        )
        future.add_done_callback(lambda done: self._retry_if_failed(prepared, done))

    def _retry_if_failed(self, prepared: TransactionMetadata, done: asyncio.Future[None]) -> None:
        if done.cancelled() or done.exception() is None:
            return
        log.warning(
            "Transactional id %s: could not write its Complete state: %s; retrying",
            prepared.transactional_id,
            done.exception(),
        )
        asyncio.get_running_loop().call_later(RETRY_BACKOFF_S, self._complete, prepared)
