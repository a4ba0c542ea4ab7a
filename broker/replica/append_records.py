"""Appends to the partitions this broker leads, as Kafka's ReplicaManager.appendRecords
makes them for Produce and for the coordinators' own writes.

Each partition appends on its own (its log validates the records first): a bad batch
fails its partition only, and nothing of it is written. What an append may have to wait
for is waited for here, so that callers only ask and read the answers:

- an acks=all append is answered once its records are committed (Kafka's
  DelayedProduce), or REQUEST_TIMED_OUT when the timeout passes first;
- a transactional batch is taken only into its producer's open transaction (KIP-890,
  transactions/verification.py): from Produce v12 the broker adds the partition first;
- a fault that pauses a partition's appends (a stalled disk, off unless fault injection
  is switched on) holds a client's append back; it is then made as if it had just arrived.
  The coordinators' writes are not held: their state machines count on an append being
  made when it is asked for.

Appends that need no wait are made before `append_records` returns, so that a request's
appends are made in the order they were sent; the others complete with `completion`.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import (
    ErrorCode,
    KafkaError,
    RecordError,
    RecordValidationError,
    UnknownTopicOrPartitionError,
)

from ..observability.partition_stats import NOT_FAILED_PRODUCE

# The log's modules load with the first append (`brook serve` loads them only once it has a
# log): the ReplicaManager that holds this is made at start.
if TYPE_CHECKING:
    from brook.storage.log_validator import AppendOrigin

    from ..faults.registry import FaultRegistry
    from ..transactions.shard import ProducerIdAndEpoch
    from ..transactions.verification import TransactionVerification
    from .partition import Partition

log = logging.getLogger("brook.apis.produce")

TopicPartition = tuple[str, int]
Records = bytes | bytearray | memoryview
# An error a fault injects into a partition's answer (None: none).
InjectedError = Callable[[str, int], ErrorCode | None]


@dataclass(slots=True)
class PartitionResponse:
    """Kafka's ProduceResponse.PartitionResponse, with the offset after the append (what a
    coordinator waits on) and the error as raised (what a coordinator raises again)."""

    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    log_append_time: int = -1
    # Kafka answers a message and per-record errors only for a RecordValidationException
    # (records refused by a per-record rule); every other error goes without a message.
    message: str | None = None
    record_errors: tuple[RecordError, ...] = ()
    next_offset: int = -1
    exception: KafkaError | None = None

    @property
    def log_append_datetime(self) -> datetime.datetime | None:
        if self.log_append_time < 0:
            return None
        return datetime.datetime.fromtimestamp(self.log_append_time / 1000, datetime.UTC)

    def raise_error(self) -> None:
        """Raise the append's error, if it failed (for the coordinators' writes)."""
        if self.exception is not None:
            raise self.exception
        if self.error is not ErrorCode.none:
            raise KafkaError.with_code(self.error)


@dataclass(slots=True)
class AppendResults:
    """One response per entry asked for, in order. `completion` is None when every one
    is final already; else the responses still waiting are final once it is done."""

    responses: list[PartitionResponse]
    completion: Awaitable[None] | None

    @property
    def failed(self) -> bool:
        return any(response.error is not ErrorCode.none for response in self.responses)


@dataclass(frozen=True, slots=True)
class _Append:
    """What every entry of one append_records call shares."""

    required_acks: int
    wait_for_commit: bool  # acks=all
    origin: AppendOrigin
    client: bool  # a producer's append (AppendOrigin.CLIENT)
    requester: str
    verification: TransactionVerification | None
    injected_error: InjectedError | None
    max_decompressed_bytes: int
    # The request's timeout (adding a partition to a transaction waits within it), and
    # the commit wait's: none for acks=0, which waits for its appends only.
    timeout_s: float
    completion_timeout_s: float | None
    now_ms: Callable[[], int]


class RecordAppender:
    """The append entry point of the ReplicaManager (which holds one)."""

    def __init__(
        self,
        hosted: Callable[[str, int], Partition | None],
        now_ms: Callable[[], int],
        faults: FaultRegistry | None = None,
    ) -> None:
        self._hosted = hosted
        self._now_ms = now_ms
        self.faults = faults

    def append_records(
        self,
        entries: Sequence[tuple[TopicPartition, Records | None]],
        *,
        required_acks: int,
        origin: AppendOrigin,
        timeout_s: float | None,
        requester: str = "",
        verification: TransactionVerification | None = None,
        injected_error: InjectedError | None = None,
        max_decompressed_bytes: int | None = None,
        now_ms: int | None = None,
    ) -> AppendResults:
        """Append each entry's records to its partition as the leader. Appends that wait
        (acks=all, a partition to add to a transaction, a paused disk) complete with the
        result's `completion`, bounded by `timeout_s` unless acks=0 (which waits for the
        appends only, never for a commit)."""
        from brook.storage.log_validator import DEFAULT_MAX_DECOMPRESSED_BYTES, AppendOrigin

        from .partition import ACKS_ALL

        append = _Append(
            required_acks,
            required_acks == ACKS_ALL,
            origin,
            origin is AppendOrigin.CLIENT,
            requester,
            verification,
            injected_error,
            max_decompressed_bytes or DEFAULT_MAX_DECOMPRESSED_BYTES,
            timeout_s if timeout_s is not None else 0.0,
            None if required_acks == 0 else timeout_s,
            (lambda: now_ms) if now_ms is not None else self._now_ms,
        )
        responses: list[PartitionResponse] = []
        waiting: list[tuple[PartitionResponse, asyncio.Future[None]]] = []
        for (topic, index), records in entries:
            response, waiter = self._append(append, topic, index, records)
            responses.append(response)
            if waiter is not None:
                waiting.append((response, waiter))
        completion = _Completion(waiting, append.completion_timeout_s) if waiting else None
        return AppendResults(responses, completion)

    def _append(
        self, append: _Append, topic: str, index: int, records: Records | None
    ) -> tuple[PartitionResponse, asyncio.Future[None] | None]:
        if append.injected_error is not None:
            injected = append.injected_error(topic, index)
            if injected is not None:
                return PartitionResponse(injected), None
        partition = self._hosted(topic, index)
        if partition is None:
            exc = UnknownTopicOrPartitionError(
                f"This server does not host this topic-partition: {topic}-{index}"
            )
            return PartitionResponse(exc.error_code, exception=exc), None
        if not records:
            return PartitionResponse(
                ErrorCode.none, log_start_offset=partition.log_start_offset
            ), None
        client = append.client
        stalled = self.faults.append_gate(topic, index) if client and self.faults else None
        if stalled is not None:
            response = PartitionResponse(ErrorCode.none)
            later = self._append_when_released(append, stalled, response, topic, index, records)
            return response, asyncio.ensure_future(later)
        if client:
            partition.stats.produce_requests += 1
        verification = append.verification
        producer = _transactional_producer(records) if verification is not None else None
        if verification is not None and producer is not None:
            try:
                if not verification.verified(producer, (topic, index)):
                    response = PartitionResponse(ErrorCode.none)
                    added = self._append_once_added(
                        append, verification, producer, partition, response, records
                    )
                    return response, asyncio.ensure_future(added)
            except KafkaError as exc:
                return _refused(append, partition, exc), None
        return self._append_now(append, partition, records)

    def _append_now(
        self, append: _Append, partition: Partition, records: Records
    ) -> tuple[PartitionResponse, asyncio.Future[None] | None]:
        try:
            info = partition.append_records_as_leader(
                records,
                append.origin,
                append.required_acks,
                append.now_ms(),
                max_decompressed_bytes=append.max_decompressed_bytes,
            )
        except KafkaError as exc:
            return _refused(append, partition, exc), None
        next_offset = info.last_offset + 1
        response = PartitionResponse(
            ErrorCode.none,
            info.first_offset,
            info.log_start_offset,
            info.log_append_time,
            next_offset=next_offset,
        )
        waiter = partition.wait_for_commit(next_offset) if append.wait_for_commit else None
        return response, waiter

    async def _append_when_released(
        self,
        append: _Append,
        stalled: asyncio.Future[None],
        response: PartitionResponse,
        topic: str,
        index: int,
        records: Records,
    ) -> None:
        await asyncio.shield(stalled)
        appended, waiter = self._append(append, topic, index, records)
        _fill(response, appended)
        if waiter is not None:
            await waiter

    async def _append_once_added(
        self,
        append: _Append,
        verification: TransactionVerification,
        producer: ProducerIdAndEpoch,
        partition: Partition,
        response: PartitionResponse,
        records: Records,
    ) -> None:
        """Transaction version 2: the coordinator adds the partition to the producer's
        transaction, then the batch is appended (and, with acks=all, committed); a remote
        coordinator is asked first (to add, or only to verify for the older versions)."""
        try:
            await verification.add(producer, (partition.topic, partition.index), append.timeout_s)
        except KafkaError as exc:
            _fill(response, _refused(append, partition, exc))
            return
        appended, waiter = self._append_now(append, partition, records)
        _fill(response, appended)
        if waiter is not None:
            await waiter


class _Completion:
    """Kafka's DelayedProduce: done once every waiting append is committed (or made),
    with REQUEST_TIMED_OUT for those still waiting when the timeout passes. Its wait
    starts when it is awaited (a coordinator may never wait for a commit)."""

    def __init__(
        self, waiting: list[tuple[PartitionResponse, asyncio.Future[None]]], timeout_s: float | None
    ) -> None:
        self._waiting = waiting
        self._timeout_s = timeout_s

    def __await__(self) -> Generator[Any, None, None]:
        return _complete(self._waiting, self._timeout_s).__await__()


async def _complete(
    waiting: list[tuple[PartitionResponse, asyncio.Future[None]]], timeout_s: float | None
) -> None:
    await asyncio.wait(
        [waiter for _, waiter in waiting],
        timeout=None if timeout_s is None else max(timeout_s, 0),
    )
    for response, waiter in waiting:
        if not waiter.done():
            waiter.cancel()
            response.error = ErrorCode.request_timed_out
        elif (exc := waiter.exception()) is not None:
            if isinstance(exc, KafkaError):
                response.error, response.exception = exc.error_code, exc
            else:
                response.error = ErrorCode.unknown_server_error


def _transactional_producer(records: Records) -> ProducerIdAndEpoch | None:
    """The producer of a transactional data batch (None for any other batch)."""
    from brook.protocol.record_batch import HEADER_SIZE as RECORD_BATCH_HEADER_SIZE
    from brook.protocol.record_batch import parse_header

    from ..transactions.shard import ProducerIdAndEpoch

    if len(records) < RECORD_BATCH_HEADER_SIZE:
        return None  # too short to be a batch: the log validator refuses it
    header = parse_header(records)
    if not header.is_transactional or header.is_control:
        return None
    return ProducerIdAndEpoch(header.producer_id, header.producer_epoch)


def _fill(response: PartitionResponse, appended: PartitionResponse) -> None:
    """Make a placeholder answered already the response of the append made later."""
    response.error, response.base_offset = appended.error, appended.base_offset
    response.log_start_offset = appended.log_start_offset
    response.log_append_time = appended.log_append_time
    response.message, response.record_errors = appended.message, appended.record_errors
    response.next_offset, response.exception = appended.next_offset, appended.exception


def _refused(append: _Append, partition: Partition, exc: KafkaError) -> PartitionResponse:
    """The response of an append its partition refused; a client's refusal is logged and
    counted in the partition's failed produce requests."""
    if append.client:
        if exc.error_code not in NOT_FAILED_PRODUCE:
            partition.stats.failed_produce_requests += 1
        detail = exc.message
        if isinstance(exc, RecordValidationError):
            detail += ": " + ", ".join(str(error) for error in exc.record_errors[:3])
        log.warning(
            "Rejected produce to %s from %s: %s: %s",
            partition.name,
            append.requester,
            exc.error_code.name.upper(),
            detail,
        )
    if isinstance(exc, RecordValidationError):
        return PartitionResponse(
            exc.error_code,
            log_start_offset=partition.log_start_offset,
            message=exc.message,
            record_errors=tuple(exc.record_errors),
            exception=exc,
        )
    return PartitionResponse(
        exc.error_code, log_start_offset=partition.log_start_offset, exception=exc
    )
