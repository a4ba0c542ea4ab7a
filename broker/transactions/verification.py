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
from typing import TYPE_CHECKING, Union

from kio.schema.add_partitions_to_txn.v5 import request as add_request
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from brook.coordinator_state.transaction_metadata import TV_2, TopicPartitionKey
from brook.protocol.errors import ErrorCode, KafkaError

from .shard import ProducerIdAndEpoch

if TYPE_CHECKING:
    from ..server.inter_broker import InterBrokerClients
    from ..server.services import BrokerServices
    from .coordinator import TransactionCoordinator

log = logging.getLogger("brook.transactions")

# Kafka's add.partitions.to.txn.retry.backoff.ms and .backoff.max.ms: how often and how
# long a broker retries adding a partition while the last transaction completes.
ADD_RETRY_BACKOFF_S = 0.020
ADD_RETRY_MAX_S = 0.100

# What a coordinator answers a verification of a partition outside the transaction.
_NOT_IN_TRANSACTION = frozenset({ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state})

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


class RemoteTransactionCoordinator:
    """The coordinator of a transactional id on another broker, asked as Kafka's
    AddPartitionsToTxnManager asks it: AddPartitionsToTxn v5, `verify_only` to check that
    a partition is in the transaction, without it to add it (transaction version 2)."""

    def __init__(self, broker_id: int, clients: InterBrokerClients) -> None:
        self.broker_id = broker_id
        self._clients = clients

    async def add_or_verify(
        self,
        transactional_id: str,
        producer: ProducerIdAndEpoch,
        partition: TopicPartitionKey,
        verify_only: bool,
        timeout_s: float,
    ) -> ErrorCode:
        topic, index = partition
        response = await self._clients.request(
            self.broker_id,
            add_request.AddPartitionsToTxnRequest(
                transactions=(
                    add_request.AddPartitionsToTxnTransaction(
                        transactional_id=TransactionalId(transactional_id),
                        producer_id=ProducerId(producer.producer_id),
                        producer_epoch=i16(producer.producer_epoch),
                        verify_only=verify_only,
                        topics=(
                            add_request.AddPartitionsToTxnTopic(
                                name=TopicName(topic), partitions=(i32(index),)
                            ),
                        ),
                    ),
                ),
            ),
            timeout_s,
        )
        if response.error_code != ErrorCode.none:
            return ErrorCode(response.error_code)
        for transaction in response.results_by_transaction:
            for topic_result in transaction.topic_results:
                for result in topic_result.results_by_partition:
                    return ErrorCode(result.partition_error_code)
        return ErrorCode.unknown_server_error  # an answer without our partition


AnyCoordinator = Union["TransactionCoordinator", RemoteTransactionCoordinator]


def coordinator_of(services: BrokerServices, transactional_id: str) -> AnyCoordinator:
    """The coordinator of `transactional_id`: the leader of its `__transaction_state`
    partition, this broker's own when it leads it (or when nothing is known yet, so
    that the local coordinator answers with its errors)."""
    from brook.protocol.coordinator_records import TRANSACTION_STATE_TOPIC

    transactions = services.transactions  # made by now: a transactional write needs it
    topic = services.metadata.get(TRANSACTION_STATE_TOPIC)
    if topic is None or not topic.partitions:
        return transactions
    index = transactions.runtime.topic.partition_of(transactional_id, len(topic.partitions))
    leader = topic.partitions[index].leader
    if leader < 0 or leader == services.broker_id:
        return transactions
    return RemoteTransactionCoordinator(leader, services.inter_broker)


class VerificationFailed(KafkaError):
    """The write is refused: its partition is not (and could not be put) in the
    producer's transaction; `error_code` is what the request's version answers."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def verify(
    transactions: AnyCoordinator,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partition: TopicPartitionKey,
    operation: SupportedOperation,
) -> bool:
    """True when the partition is in the producer's open transaction; False when it is
    not and the request may add it (ADD_PARTITION), or when a remote coordinator must
    be asked (`add` does, with the operation). Raises VerificationFailed otherwise."""
    if isinstance(transactions, RemoteTransactionCoordinator):
        return False
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
    raise _not_in_transaction(transactional_id, producer, partition, operation)


def _not_in_transaction(
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partition: TopicPartitionKey,
    operation: SupportedOperation,
) -> VerificationFailed:
    topic, index = partition
    return VerificationFailed(
        ErrorCode.transaction_abortable
        if operation is SupportedOperation.GENERIC_ERROR_SUPPORTED
        else ErrorCode.invalid_txn_state,
        f"Partition {topic}-{index} was not added to the transaction of transactional id"
        f" {transactional_id} (producer {producer.producer_id})",
    )


async def add(
    transactions: AnyCoordinator,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partition: TopicPartitionKey,
    timeout_s: float,
    operation: SupportedOperation = SupportedOperation.ADD_PARTITION,
) -> None:
    """Transaction version 2: add the partition to the producer's transaction (starting
    one if none is open), retrying for a moment while its last one completes, as Kafka's
    brokers do; a remote coordinator is asked over the network (only to verify, for the
    versions that may not add). Raises VerificationFailed when it cannot be added."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + min(ADD_RETRY_MAX_S, max(timeout_s, 0))
    verify_only = operation is not SupportedOperation.ADD_PARTITION
    while True:
        try:
            if isinstance(transactions, RemoteTransactionCoordinator):
                code = await transactions.add_or_verify(
                    transactional_id, producer, partition, verify_only, max(timeout_s, 0.1)
                )
                if code is ErrorCode.none:
                    return
                if verify_only and code in _NOT_IN_TRANSACTION:
                    raise _not_in_transaction(transactional_id, producer, partition, operation)
                raise KafkaError.with_code(code, f"the coordinator answered {code.name.upper()}")
            await transactions.add_partitions(transactional_id, producer, [partition], TV_2)
            return
        except VerificationFailed:
            raise
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


class TransactionVerification:
    """KIP-890 for the transactional writes of one request: its transactional id and what
    its version lets the broker do. The coordinator is looked up at the first
    transactional batch (a request without one never needs it)."""

    def __init__(
        self, services: BrokerServices, transactional_id: str, operation: SupportedOperation
    ) -> None:
        self._services = services
        self.transactional_id = transactional_id
        self.operation = operation
        self._coordinator: AnyCoordinator | None = None

    @property
    def coordinator(self) -> AnyCoordinator:
        if self._coordinator is None:
            self._coordinator = coordinator_of(self._services, self.transactional_id)
        return self._coordinator

    def verified(self, producer: ProducerIdAndEpoch, partition: TopicPartitionKey) -> bool:
        """`verify` for this request (raises VerificationFailed when refused)."""
        return verify(self.coordinator, self.transactional_id, producer, partition, self.operation)

    async def add(
        self, producer: ProducerIdAndEpoch, partition: TopicPartitionKey, timeout_s: float
    ) -> None:
        """`add` for this request (raises VerificationFailed when it cannot be added)."""
        await add(
            self.coordinator, self.transactional_id, producer, partition, timeout_s, self.operation
        )
