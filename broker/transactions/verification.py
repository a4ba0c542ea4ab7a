"""KIP-890 on the write path: is the partition a transactional write goes to in its
producer's ongoing transaction?

A transactional batch (Produce) or transactional offsets (TxnOffsetCommit) are taken only
when the transaction coordinator has the partition in the producer's open transaction,
so a late write of a transaction that ended, or one from a zombie, cannot open a
transaction the coordinator knows nothing of. What the broker does when the partition
is not in it depends on the request's version, as in Kafka 4:

- Produce v0-v10, TxnOffsetCommit v0-v3: INVALID_TXN_STATE (the client's error before
  KIP-890);
- Produce v11, TxnOffsetCommit v4: TRANSACTION_ABORTABLE (the producer aborts and goes on);
- Produce v12+, TxnOffsetCommit v5+ (transaction version 2): the broker adds the partition
  to the transaction itself, as the client no longer sends AddPartitionsToTxn or
  AddOffsetsToTxn.

Errors of a coordinator that cannot answer become NOT_ENOUGH_REPLICAS, which producers
retry; a fenced producer gets INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import TYPE_CHECKING

from brook.protocol.errors import ErrorCode, KafkaError

from .metadata import TV_2, TopicPartitionKey
from .shard import ProducerIdAndEpoch

if TYPE_CHECKING:
    from .coordinator import TransactionCoordinator

log = logging.getLogger("brook.transactions")

# Kafka's add.partitions.to.txn.retry.backoff.ms and .backoff.max.ms: how often and how
# long a broker retries adding a partition while the last transaction completes.
ADD_RETRY_BACKOFF_S = 0.020
ADD_RETRY_MAX_S = 0.100

_COORDINATOR_UNREACHABLE = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_not_available,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.network_exception,
    }
)


class SupportedOperation(enum.Enum):
    """Kafka's TransactionSupportedOperation: what a request's version lets it do."""

    DEFAULT_ERROR = "default-error"
    GENERIC_ERROR_SUPPORTED = "generic-error-supported"
    ADD_PARTITION = "add-partition"


def for_produce(api_version: int) -> SupportedOperation:
    if api_version >= 12:
        return SupportedOperation.ADD_PARTITION
    if api_version == 11:
        return SupportedOperation.GENERIC_ERROR_SUPPORTED
    return SupportedOperation.DEFAULT_ERROR


def for_txn_offset_commit(api_version: int) -> SupportedOperation:
    if api_version >= 5:
        return SupportedOperation.ADD_PARTITION
    if api_version == 4:
        return SupportedOperation.GENERIC_ERROR_SUPPORTED
    return SupportedOperation.DEFAULT_ERROR


class VerificationFailed(KafkaError):
    """The write is refused: its partition is not (and could not be put) in the
    producer's transaction; `error_code` is what the request's version answers."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def verify(
    transactions: TransactionCoordinator,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partition: TopicPartitionKey,
    operation: SupportedOperation,
) -> bool:
    """True when the partition is in the producer's open transaction; False when it is
    not and the request may add it (ADD_PARTITION). Raises VerificationFailed otherwise."""
    try:
        missing = transactions.verify_partitions(transactional_id, producer, [partition])
    except KafkaError as exc:
        if (
            exc.error_code is ErrorCode.concurrent_transactions
            and operation is SupportedOperation.ADD_PARTITION
        ):
            return False  # the add waits for the last transaction to complete
        raise _failure(exc) from None
    if not missing:
        return True
    if operation is SupportedOperation.ADD_PARTITION:
        return False
    topic, index = partition
    raise VerificationFailed(
        ErrorCode.transaction_abortable
        if operation is SupportedOperation.GENERIC_ERROR_SUPPORTED
        else ErrorCode.invalid_txn_state,
        f"Partition {topic}-{index} was not added to the transaction of transactional id"
        f" {transactional_id} (producer {producer.producer_id})",
    )


async def add(
    transactions: TransactionCoordinator,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partition: TopicPartitionKey,
    timeout_s: float,
) -> None:
    """Transaction version 2: add the partition to the producer's transaction (starting
    one if none is open), retrying for a moment while its last one completes, as Kafka's
    brokers do. Raises VerificationFailed when it cannot be added."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(ADD_RETRY_MAX_S, max(timeout_s, 0))
    while True:
        try:
            await transactions.add_partitions(transactional_id, producer, [partition], TV_2)
            return
        except KafkaError as exc:
            if (
                exc.error_code is not ErrorCode.concurrent_transactions
                or loop.time() + ADD_RETRY_BACKOFF_S > deadline
            ):
                raise _failure(exc, transaction_version_2=True) from None
        await asyncio.sleep(ADD_RETRY_BACKOFF_S)


def _failure(exc: KafkaError, transaction_version_2: bool = False) -> VerificationFailed:
    code = exc.error_code
    if code is ErrorCode.producer_fenced:
        return VerificationFailed(ErrorCode.invalid_producer_epoch, exc.message)
    if code in _COORDINATOR_UNREACHABLE or (
        code is ErrorCode.concurrent_transactions and not transaction_version_2
    ):
        return VerificationFailed(
            ErrorCode.not_enough_replicas,
            "Unable to verify the partition has been added to the transaction. Underlying"
            f" error: {code.name.upper()}",
        )
    return VerificationFailed(code, exc.message)
