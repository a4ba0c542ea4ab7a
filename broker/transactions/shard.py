"""The transactional ids of one `__transaction_state` partition: Kafka's
TransactionCoordinator logic for them, as a shard of the coordinator runtime.

Each operation checks a request against the id's state and returns the record of the
next state; the id takes that state when the runtime replays the record, so a write the
partition refuses changes nothing. Once a PrepareCommit or PrepareAbort is committed the
shard hands the transaction to the marker writer (`on_prepared`), which writes the
markers and then asks for the Complete state.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from brook.coordinator_state.transaction_log import TransactionLogReplay
from brook.coordinator_state.transaction_metadata import (
    COMPLETE,
    COMPLETING,
    MAX_PRODUCER_EPOCH,
    TV_0,
    TV_2,
    TopicPartitionKey,
    TransactionMetadata,
    TransactionState,
)
from brook.protocol import coordinator_records as cr
from brook.protocol.coordinator_records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from brook.protocol.errors import (
    ConcurrentTransactionsError,
    ErrorCode,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    ProducerFencedError,
)
from brook.storage.clock import Clock

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.partition_writer import TopicPartition
from ..coordinator.shard import CoordinatorResult
from .records import record_of, tombstone_of

log = logging.getLogger("brook.transactions")

ABORT_TIMED_OUT = "abort-timed-out-transactions"
EXPIRE_IDS = "expire-transactional-ids"


@dataclass(frozen=True, slots=True)
class TransactionTimeouts:
    """The broker's transaction.* settings the shard acts on."""

    max_timeout_ms: int
    abort_check_interval_ms: int
    id_expiration_ms: int
    id_expiration_check_interval_ms: int


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


# Called once a PrepareCommit/PrepareAbort is committed: write the markers.
OnPrepared = Callable[[TransactionMetadata], None]


class TransactionCoordinatorShard:
    def __init__(
        self,
        tp: TopicPartition,
        timer: CoordinatorTimer,
        timeouts: TransactionTimeouts,
        clock: Clock,
        next_producer_id: Callable[[], int],
        on_prepared: OnPrepared,
    ) -> None:
        self.tp = tp
        self.timer = timer
        self.timeouts = timeouts
        self.clock = clock
        self.next_producer_id = next_producer_id
        self.on_prepared = on_prepared
        self._replay = TransactionLogReplay(self._skipped)
        # Each id's state, as the replay of the partition's records left it.
        self.transactions = self._replay.transactions

    # --- replay (CoordinatorShard) ----------------------------------------------------

    def replay(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        self._replay.replay(offset, key, value)

    def _skipped(self, offset: int, key: cr.Key, value_version: int | None) -> None:
        if value_version is None:
            return  # not a record of this topic's schema: nothing to apply
        assert isinstance(key, cr.TransactionLogKey)
        log.warning(
            "Skipping the state of transactional id %s in a value version %d this"
            " broker does not know",
            key.transactional_id,
            value_version,
        )

    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, result: cr.ControlRecordType
    ) -> None:
        """`__transaction_state` is never written inside a transaction."""

    def on_loaded(self) -> None:
        self.timer.schedule(
            ABORT_TIMED_OUT, self.timeouts.abort_check_interval_ms, self._abort_timed_out
        )
        self.timer.schedule(
            EXPIRE_IDS, self.timeouts.id_expiration_check_interval_ms, self._expire_ids
        )

    def on_unloaded(self) -> None:
        self._replay.clear()

    def completing(self) -> list[TransactionMetadata]:
        """Transactions whose markers are still to be written (after a restart)."""
        return [md for md in self.transactions.values() if md.state in COMPLETING]

    # --- InitProducerId -----------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        txn_timeout_ms: int,
        expected: ProducerIdAndEpoch | None,
    ) -> CoordinatorResult[InitProducerIdResult]:
        """A producer starts a session: the id's producer id with the next epoch.

        An open transaction is aborted first, fencing its producer by the epoch bump;
        the caller answers CONCURRENT_TRANSACTIONS meanwhile, and the client retries.
        """
        now = self.clock()
        current = self.transactions.get(transactional_id)
        if current is None:
            current = TransactionMetadata(
                transactional_id,
                self.next_producer_id(),
                NO_PRODUCER_EPOCH,
                txn_timeout_ms,
                TransactionState.EMPTY,
                txn_last_update_timestamp=now,
            )
        elif expected is not None:
            _check_retry(current, expected)
        if current.state in COMPLETING or current.state is TransactionState.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(
                f"Transactional id {transactional_id} is completing a transaction"
            )
        if current.state is TransactionState.ONGOING:
            fenced = current.with_bumped_epoch(self.next_producer_id())
            aborting = fenced.transition(TransactionState.PREPARE_ABORT, now)
            log.info(
                "Transactional id %s: a new producer fences epoch %d; aborting its open"
                " transaction",
                transactional_id,
                current.producer_epoch,
            )
            return CoordinatorResult(
                [record_of(aborting)],
                InitProducerIdResult(ErrorCode.concurrent_transactions),
                on_written=self._markers_after([aborting]),
            )
        if current.state is TransactionState.DEAD:
            raise ConcurrentTransactionsError(f"Transactional id {transactional_id} is expiring")
        if (
            expected is not None
            and expected.producer_epoch == current.last_producer_epoch
            and current.producer_epoch >= 0
        ):
            # A retry of an InitProducerId already done: the same answer again.
            return CoordinatorResult(
                [],
                InitProducerIdResult(ErrorCode.none, current.producer_id, current.producer_epoch),
            )
        bumped = current.with_bumped_epoch(
            self.next_producer_id() if current.needs_new_producer_id else current.producer_id
        )
        ready = bumped.transition(
            TransactionState.EMPTY,
            now,
            txn_timeout_ms=txn_timeout_ms,
            partitions=frozenset(),
            txn_start_timestamp=-1,
        )
        return CoordinatorResult(
            [record_of(ready)],
            InitProducerIdResult(ErrorCode.none, ready.producer_id, ready.producer_epoch),
        )

    # --- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------

    def add_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Iterable[TopicPartitionKey],
        client_transaction_version: int = TV_0,
    ) -> CoordinatorResult[None]:
        """AddPartitionsToTxn, AddOffsetsToTxn, and (transaction version 2) a broker adding
        the partition a producer writes to: starts the transaction if none is open."""
        current = self._checked(transactional_id, producer)
        if current.state in COMPLETING:
            raise ConcurrentTransactionsError(
                f"Transactional id {transactional_id} is completing its last transaction"
            )
        if current.state is TransactionState.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(f"Transactional id {transactional_id} is fencing")
        wanted = frozenset(partitions)
        if current.state is TransactionState.ONGOING and wanted <= current.partitions:
            return CoordinatorResult([], None)
        now = self.clock()
        start = current.txn_start_timestamp
        if current.state is not TransactionState.ONGOING:
            start = now
        ongoing = current.transition(
            TransactionState.ONGOING,
            now,
            partitions=current.partitions | wanted,
            txn_start_timestamp=start,
            client_transaction_version=client_transaction_version,
        )
        return CoordinatorResult([record_of(ongoing)], None)

    def verify_partitions(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partitions: Iterable[TopicPartitionKey],
    ) -> dict[TopicPartitionKey, ErrorCode]:
        current = self._checked(transactional_id, producer)
        if current.state in COMPLETING:
            raise ConcurrentTransactionsError(
                f"Transactional id {transactional_id} is completing its last transaction"
            )
        in_transaction = (
            current.partitions if current.state is TransactionState.ONGOING else frozenset()
        )
        return {tp: ErrorCode.invalid_txn_state for tp in partitions if tp not in in_transaction}

    # --- EndTxn -------------------------------------------------------------------------

    def end_transaction(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        commit: bool,
        client_transaction_version: int = TV_0,
    ) -> CoordinatorResult[ProducerIdAndEpoch]:
        """EndTxn: the transaction's PrepareCommit or PrepareAbort, whose markers are then
        written. Answers the producer id and epoch of the producer's next transaction:
        the same with EndTxn v0-v4, the next epoch with transaction version 2 (v5)."""
        if client_transaction_version >= TV_2:
            return self._end_transaction_with_epoch_bump(transactional_id, producer, commit)
        current = self._checked(transactional_id, producer)
        target = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        done = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
        same = ProducerIdAndEpoch(current.producer_id, current.producer_epoch)
        if current.state is TransactionState.ONGOING:
            prepared = current.transition(target, self.clock())
            return CoordinatorResult(
                [record_of(prepared)], same, on_written=self._markers_after([prepared])
            )
        if current.state is done:
            return CoordinatorResult([], same)  # a retry of an EndTxn that completed
        if current.state is target:
            raise ConcurrentTransactionsError(
                f"Transactional id {transactional_id} is completing this transaction"
            )
        if current.state is TransactionState.PREPARE_EPOCH_FENCE:
            raise InvalidProducerEpochError(f"Transactional id {transactional_id} is fenced")
        raise InvalidTxnStateError(
            f"TransactionalId {transactional_id}: cannot {'commit' if commit else 'abort'}"
            f" in state {current.state.name}"
        )

    def _end_transaction_with_epoch_bump(
        self, transactional_id: str, producer: ProducerIdAndEpoch, commit: bool
    ) -> CoordinatorResult[ProducerIdAndEpoch]:
        """Transaction version 2 (KIP-890): every transaction ends with an epoch bump,
        written in the Prepare state and carried by its markers, so that a late write of
        the ended transaction is fenced; an abort is allowed with no transaction open
        (it bumps the epoch too), and a retry (the previous epoch) of the EndTxn that
        ended the last transaction answers it again."""
        current = self.transactions.get(transactional_id)
        retry_on_overflow = (
            current is not None
            and current.previous_producer_id == producer.producer_id
            and producer.producer_epoch == MAX_PRODUCER_EPOCH
            and current.producer_epoch == 0
        )
        if current is None or (
            current.producer_id != producer.producer_id and not retry_on_overflow
        ):
            raise InvalidProducerIdMappingError(
                f"The producer id {producer.producer_id} does not belong to transactional id"
                f" {transactional_id}"
            )
        if current.state in COMPLETING:
            raise ConcurrentTransactionsError(
                f"Transactional id {transactional_id} is completing its transaction"
            )
        action = "commit" if commit else "abort"
        retry = retry_on_overflow or producer.producer_epoch == current.producer_epoch - 1
        if retry and current.state in COMPLETE:
            done = TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT
            if current.state is not done:
                raise InvalidTxnStateError(
                    f"TransactionalId {transactional_id}: cannot {action} in state"
                    f" {current.state.name}: the last transaction ended otherwise"
                )
            current_ids = ProducerIdAndEpoch(current.producer_id, current.producer_epoch)
            return CoordinatorResult([], current_ids)  # a retry of the EndTxn that ended it
        if producer.producer_epoch != current.producer_epoch:
            raise _fenced(transactional_id, producer.producer_epoch, current.producer_epoch)
        open_transaction = current.state is TransactionState.ONGOING
        if not open_transaction and (commit or current.state is TransactionState.DEAD):
            raise InvalidTxnStateError(
                f"TransactionalId {transactional_id}: cannot {action} in state {current.state.name}"
            )
        if current.state is TransactionState.PREPARE_EPOCH_FENCE:
            raise ConcurrentTransactionsError(f"Transactional id {transactional_id} is fencing")
        now = self.clock()
        target = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
        exhausted = current.producer_epoch >= MAX_PRODUCER_EPOCH
        bumped = dataclasses.replace(
            current,
            producer_epoch=current.producer_epoch + 1,
            last_producer_epoch=current.producer_epoch,
            next_producer_id=self.next_producer_id() if exhausted else NO_PRODUCER_ID,
            client_transaction_version=TV_2,
        )
        # An abort without a transaction open starts an empty one for its markers.
        empty = {} if open_transaction else {"txn_start_timestamp": now, "partitions": frozenset()}
        prepared = bumped.transition(target, now, **empty)
        next_session = (
            ProducerIdAndEpoch(prepared.next_producer_id, 0)
            if exhausted
            else ProducerIdAndEpoch(prepared.producer_id, prepared.producer_epoch)
        )
        return CoordinatorResult(
            [record_of(prepared)], next_session, on_written=self._markers_after([prepared])
        )

    def complete_transaction(self, prepared: TransactionMetadata) -> CoordinatorResult[None]:
        """Every marker of the transaction is written: it is complete."""
        current = self.transactions.get(prepared.transactional_id)
        if current is None or (
            current.producer_id,
            current.producer_epoch,
            current.state,
        ) != (prepared.producer_id, prepared.producer_epoch, prepared.state):
            return CoordinatorResult([], None)  # completed already, or moved on
        target = (
            TransactionState.COMPLETE_COMMIT
            if current.state is TransactionState.PREPARE_COMMIT
            else TransactionState.COMPLETE_ABORT
        )
        completed = current.transition(target, self.clock(), partitions=frozenset())
        if current.next_producer_id != NO_PRODUCER_ID:
            # The epoch ran out with this transaction: the next one has a new producer id.
            completed = dataclasses.replace(
                completed,
                previous_producer_id=current.producer_id,
                producer_id=current.next_producer_id,
                producer_epoch=0,
                next_producer_id=NO_PRODUCER_ID,
            )
        log.info(
            "Transactional id %s: %s (producer %d, epoch %d)",
            current.transactional_id,
            target.name,
            current.producer_id,
            current.producer_epoch,
        )
        return CoordinatorResult([record_of(completed)], None)

    # --- reads --------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    # --- timers -------------------------------------------------------------------------

    def _abort_timed_out(self) -> CoordinatorResult[None]:
        """Abort, with an epoch bump, every transaction open longer than its timeout."""
        self.timer.schedule(
            ABORT_TIMED_OUT, self.timeouts.abort_check_interval_ms, self._abort_timed_out
        )
        now = self.clock()
        records = []
        aborting = []
        for current in list(self.transactions.values()):
            if current.state is not TransactionState.ONGOING:
                continue
            if current.txn_start_timestamp + current.txn_timeout_ms > now:
                continue
            log.info(
                "Transactional id %s: aborting its transaction, open for longer than its"
                " timeout of %d ms",
                current.transactional_id,
                current.txn_timeout_ms,
            )
            fenced = current.with_bumped_epoch(self.next_producer_id())
            prepared = fenced.transition(TransactionState.PREPARE_ABORT, now)
            records.append(record_of(prepared))
            aborting.append(prepared)
        return CoordinatorResult(records, None, on_written=self._markers_after(aborting))

    def _expire_ids(self) -> CoordinatorResult[None]:
        """Remove ids idle for transactional.id.expiration.ms (tombstones)."""
        self.timer.schedule(
            EXPIRE_IDS, self.timeouts.id_expiration_check_interval_ms, self._expire_ids
        )
        now = self.clock()
        expired = [
            current.transactional_id
            for current in self.transactions.values()
            if (current.state is TransactionState.EMPTY or current.state in COMPLETE)
            and current.txn_last_update_timestamp + self.timeouts.id_expiration_ms <= now
        ]
        for transactional_id in expired:
            log.info("Transactional id %s expired", transactional_id)
        return CoordinatorResult([tombstone_of(tid) for tid in expired], None)

    # --- helpers ------------------------------------------------------------------------

    def _markers_after(
        self, prepared: list[TransactionMetadata]
    ) -> Callable[[KafkaError | None], None]:
        def on_written(error: KafkaError | None) -> None:
            if error is None:
                for transaction in prepared:
                    self.on_prepared(transaction)

        return on_written

    def _checked(self, transactional_id: str, producer: ProducerIdAndEpoch) -> TransactionMetadata:
        current = self.transactions.get(transactional_id)
        if current is None or current.producer_id != producer.producer_id:
            raise InvalidProducerIdMappingError(
                f"The producer id {producer.producer_id} does not belong to transactional id"
                f" {transactional_id}"
            )
        if current.producer_epoch != producer.producer_epoch:
            raise _fenced(transactional_id, producer.producer_epoch, current.producer_epoch)
        return current


def _fenced(transactional_id: str, epoch: int, current_epoch: int) -> ProducerFencedError:
    """PRODUCER_FENCED for a request of an epoch that is not the id's, in Kafka's words."""
    if epoch < current_epoch:
        return ProducerFencedError(
            f"There is a newer producer with the same transactionalId {transactional_id}"
            f" which fences the current one (epoch {epoch} < {current_epoch})"
        )
    return ProducerFencedError(
        f"Producer epoch {epoch} of {transactional_id} is not the current epoch {current_epoch}"
    )


def _check_retry(current: TransactionMetadata, expected: ProducerIdAndEpoch) -> None:
    """KIP-360: a producer that names its id and epoch must be the current one (or be
    retrying the last bump)."""
    if expected.producer_id != current.producer_id and (
        expected.producer_id != current.previous_producer_id
    ):
        raise InvalidProducerIdMappingError(
            f"The producer id {expected.producer_id} does not belong to transactional id"
            f" {current.transactional_id}"
        )
    if expected.producer_epoch not in (current.producer_epoch, current.last_producer_epoch):
        raise ProducerFencedError(
            f"Producer epoch {expected.producer_epoch} of {current.transactional_id} is fenced"
            f" by epoch {current.producer_epoch}"
        )
