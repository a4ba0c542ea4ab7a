"""One transactional id's state, and Kafka's transaction state machine.

The states and their numbers are Kafka's (they are what `__transaction_state` stores).
A state is entered only from the states Kafka allows before it; every change is a new
TransactionMetadata written as a record first, and taken as the id's state when the
runtime replays that record.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from brook.protocol.coordinator_records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionStatus

# The broker's name for the state, Kafka's TransactionState (imported from here).
TransactionState = TransactionStatus

# An epoch must stay below Short.MAX_VALUE: the next one after this gets a new producer id.
MAX_PRODUCER_EPOCH = 32766

VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    TransactionState.EMPTY: frozenset(
        {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
    ),
    TransactionState.ONGOING: frozenset(
        {
            TransactionState.ONGOING,
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        }
    ),
    TransactionState.PREPARE_COMMIT: frozenset({TransactionState.ONGOING}),
    # From Empty and Complete* too: with transaction version 2 a producer may abort
    # when no transaction is open, which bumps its epoch (KIP-890).
    TransactionState.PREPARE_ABORT: frozenset(
        {
            TransactionState.ONGOING,
            TransactionState.PREPARE_EPOCH_FENCE,
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        }
    ),
    TransactionState.COMPLETE_COMMIT: frozenset({TransactionState.PREPARE_COMMIT}),
    TransactionState.COMPLETE_ABORT: frozenset({TransactionState.PREPARE_ABORT}),
    TransactionState.DEAD: frozenset(
        {TransactionState.EMPTY, TransactionState.COMPLETE_ABORT, TransactionState.COMPLETE_COMMIT}
    ),
    TransactionState.PREPARE_EPOCH_FENCE: frozenset({TransactionState.ONGOING}),
}

# Kafka's TransactionState.stateName, what DescribeTransactions and ListTransactions show.
STATE_NAMES: dict[TransactionState, str] = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}

# Kafka's transaction versions (the `transaction.version` feature): 0 and 1 end a
# transaction under the producer's own epoch; 2 (KIP-890 part 2) bumps it every time and
# lets a produce add its partition to the transaction.
TV_0 = 0
TV_2 = 2

COMPLETING = frozenset({TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT})
COMPLETE = frozenset({TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT})

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartitionKey] = field(default_factory=frozenset)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    # The id before an epoch overflow gave a new one, so a retry of the old one is known.
    previous_producer_id: int = NO_PRODUCER_ID
    # The epoch before the last bump (KIP-360: a producer retrying its InitProducerId).
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # The id a transaction ending at an exhausted epoch hands over to once complete
    # (transaction version 2: every EndTxn bumps the epoch).
    next_producer_id: int = NO_PRODUCER_ID
    # The transaction version of the client's last transaction: 2 when it ends each one
    # with an epoch bump (EndTxn v5) and adds partitions by producing (Produce v12).
    client_transaction_version: int = 0

    def transition(
        self, state: TransactionState, now_ms: int, **changes: object
    ) -> TransactionMetadata:
        """The state after a valid transition; raises IllegalStateError otherwise."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalStateError(
                f"Transactional id {self.transactional_id}: {self.state.name} cannot become"
                f" {state.name}"
            )
        return dataclasses.replace(
            self,
            state=state,
            txn_last_update_timestamp=now_ms,
            **changes,  # type: ignore[arg-type]
        )

    def with_bumped_epoch(self, next_producer_id: int) -> TransactionMetadata:
        """The producer id and epoch a new session (or a fence) gets: epoch + 1, or a new
        producer id at epoch 0 when the epoch is exhausted."""
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            return dataclasses.replace(
                self,
                previous_producer_id=self.producer_id,
                producer_id=next_producer_id,
                producer_epoch=0,
                last_producer_epoch=NO_PRODUCER_EPOCH,
            )
        return dataclasses.replace(
            self, producer_epoch=self.producer_epoch + 1, last_producer_epoch=self.producer_epoch
        )

    @property
    def needs_new_producer_id(self) -> bool:
        return self.producer_epoch >= MAX_PRODUCER_EPOCH


class IllegalStateError(Exception):
    """A transition Kafka's state machine does not allow: a bug, not a client's error."""
