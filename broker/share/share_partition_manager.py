"""The share partitions this broker leads, and the share fetches and acknowledgements of
share-group members (Kafka's SharePartitionManager).

A share partition is made the first time a member fetches a partition this broker
leads: its state is read from the share coordinator (the persister), and a group that
has none yet starts where share.auto.offset.reset says. Every change to what is
delivered (records acquired, acknowledged, released, their locks run out) is written
back through the persister; an acknowledgement is answered once it is written, so an
acknowledged record is never delivered again, whatever happens to this broker next.

Fetches that acquire nothing wait (up to their max wait) for new records or for
records to come back (released, their lock run out), as Kafka's DelayedShareFetch
does.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.record_batch import split_batches

from ..groups.group_configs import GroupConfigs, duration_ms
from ..replica.partition import FetchIsolation, Partition, ReplicaRole
from .share_partition import (
    RENEW,
    AbortedTransaction,
    AcknowledgementBatch,
    AcquiredRange,
    InvalidAcknowledgementError,
    InvalidRecordStateError,
    SharePartition,
    StateBatch,
)
from .share_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    SessionPartition,
    ShareSession,
    ShareSessionCache,
    ShareSessionError,
)

if TYPE_CHECKING:
    from ..metadata.cache import MetadataCache
    from ..replica.replica_manager import ReplicaManager

log = logging.getLogger("brook.share")

# A start offset not yet set: the share partition sets it from share.auto.offset.reset
# the first time it loads (Kafka's PartitionFactory.UNINITIALIZED_START_OFFSET).
UNINITIALIZED_START_OFFSET = -1


@dataclass(frozen=True, slots=True)
class PersistedState:
    """A share partition's state as the share coordinator keeps it."""

    state_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...] = ()
    # Offsets in flight that are done (-1: not known).
    delivery_complete_count: int = -1


class Persister(Protocol):
    """Where share partitions keep their state: the share coordinator, on whichever
    broker leads the key's `__share_group_state` partition."""

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> PersistedState | None: ...

    async def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        state: PersistedState,
    ) -> None: ...


@dataclass
class ShareStats:
    """What /metrics shows of share groups on this broker (Kafka's ShareGroupMetrics and
    SharePartitionMetrics, totals since start)."""

    # RecordAcknowledgementsPerSec by ackType (Accept, Release, Reject, Renew).
    acknowledgements: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("Accept", "Release", "Reject", "Renew"), 0)
    )
    acquired: int = 0
    # AcquisitionLockTimeoutPerSec: records whose lock ran out.
    lock_timeouts: int = 0


@dataclass(frozen=True, slots=True)
class ShareFetchPartition:
    topic_id: uuid.UUID
    partition: int
    acknowledgements: tuple[AcknowledgementBatch, ...] = ()


@dataclass(slots=True)
class PartitionAnswer:
    topic_id: uuid.UUID
    partition: int
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    acknowledge_error: ErrorCode = ErrorCode.none
    acknowledge_error_message: str | None = None
    records: bytes | memoryview = b""
    acquired: list[AcquiredRange] = field(default_factory=list)
    leader_id: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ShareFetchRequest:
    group_id: str
    member_id: str
    session_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    max_records: int
    partitions: tuple[ShareFetchPartition, ...]
    forgotten: tuple[SessionPartition, ...] = ()
    connection: str = ""
    # v2 (KIP-1222): acquire exactly max_records (record-limit mode), and a request that
    # only renews locks (no fetch).
    record_limit: bool = False
    renew_only: bool = False
    # v1 has no RENEW acknowledgement type.
    allow_renew: bool = True


@dataclass(slots=True)
class ShareFetchAnswer:
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    partitions: list[PartitionAnswer] = field(default_factory=list)
    lock_duration_ms: int = 0


class SharePartitionManager:
    def __init__(
        self,
        config: Callable[[], Any],
        metadata: MetadataCache,
        replicas: ReplicaManager,
        group_configs: GroupConfigs,
        persister: Persister,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self._config = config
        self._metadata = metadata
        self._replicas = replicas
        self._group_configs = group_configs
        self._persister = persister
        self._clock = clock or (lambda: int(time.time() * 1000))
        self.sessions = ShareSessionCache(config()["group.share.max.share.sessions"])
        self._partitions: dict[tuple[str, uuid.UUID, int], SharePartition] = {}
        self._loading: dict[tuple[str, uuid.UUID, int], asyncio.Future[SharePartition]] = {}
        self._lock_timers: dict[tuple[str, uuid.UUID, int], asyncio.TimerHandle] = {}
        # Fetches waiting for records to acquire; woken when records come back.
        self._waiters: set[asyncio.Future[None]] = set()
        self.stats = ShareStats()

    # --- fetching -----------------------------------------------------------------------

    async def share_fetch(self, request: ShareFetchRequest) -> ShareFetchAnswer:
        try:
            session = self._session_for(request)
        except ShareSessionError as exc:
            log.info(
                "ShareFetch of member %s of share group %s refused: %s",
                request.member_id,
                request.group_id,
                exc.message,
            )
            return ShareFetchAnswer(exc.error, exc.message)
        answer = ShareFetchAnswer(lock_duration_ms=self._lock_duration(request.group_id))
        answers: dict[SessionPartition, PartitionAnswer] = {}
        for wanted in request.partitions:
            key = (wanted.topic_id, wanted.partition)
            answers[key] = PartitionAnswer(wanted.topic_id, wanted.partition)
            if wanted.acknowledgements:
                await self._acknowledge_into(
                    request.group_id, request.member_id, wanted, answers[key], request.allow_renew
                )
        if session is None or request.renew_only:  # acknowledgements only
            if session is None:  # the final request
                self._close(request.group_id, request.member_id)
            answer.partitions = list(answers.values())
            return answer
        for key in request.forgotten:
            session.partitions.pop(key, None)
        for wanted in request.partitions:
            session.partitions[(wanted.topic_id, wanted.partition)] = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.max_wait_ms / 1000
        while True:
            fetched = await self._acquire_all(request, session, answers)
            remaining = deadline - loop.time()
            if fetched >= max(request.min_bytes, 1) or remaining <= 0:
                break
            if any(a.error is not ErrorCode.none for a in answers.values()):
                break
            await self._wait(session, remaining)
        full = request.session_epoch == INITIAL_EPOCH
        named = {(p.topic_id, p.partition) for p in request.partitions if p.acknowledgements}
        answer.partitions = [
            a
            for key, a in answers.items()
            if full or a.acquired or a.error is not ErrorCode.none or key in named
        ]
        return answer

    def _session_for(self, request: ShareFetchRequest) -> ShareSession | None:
        if request.session_epoch == INITIAL_EPOCH:
            if any(p.acknowledgements for p in request.partitions):
                raise ShareSessionError(
                    ErrorCode.invalid_request,
                    "Acknowledge data present in the initial ShareFetch of a share session",
                )
            if self.sessions.get(request.group_id, request.member_id) is not None:
                self._close(request.group_id, request.member_id)
            return self.sessions.open(request.group_id, request.member_id, request.connection)
        if request.session_epoch == FINAL_EPOCH:
            if request.partitions and not all(p.acknowledgements for p in request.partitions):
                raise ShareSessionError(
                    ErrorCode.invalid_request,
                    "The final ShareFetch of a share session can only acknowledge",
                )
            self.sessions.resume(
                request.group_id,
                request.member_id,
                self._expected_epoch(request.group_id, request.member_id),
            )
            return None
        session = self.sessions.resume(request.group_id, request.member_id, request.session_epoch)
        session.next_epoch()
        # The member may have reconnected: the session ends with the connection it uses now.
        session.connection = request.connection
        return session

    def _expected_epoch(self, group_id: str, member_id: str) -> int:
        session = self.sessions.get(group_id, member_id)
        return session.epoch if session is not None else -1

    async def _acquire_all(
        self,
        request: ShareFetchRequest,
        session: ShareSession,
        answers: dict[SessionPartition, PartitionAnswer],
    ) -> int:
        """Acquire from every partition of the session; returns the bytes got."""
        fetched = 0
        remaining_bytes = min(request.max_bytes, self._config()["fetch.max.bytes"])
        remaining_records = request.max_records
        for key in list(session.partitions):
            answer = answers.get(key)
            if answer is None:
                answer = answers[key] = PartitionAnswer(key[0], key[1])
            if answer.acquired or answer.error is not ErrorCode.none:
                fetched += len(answer.records)
                continue
            if remaining_records <= 0:
                continue
            await self._acquire_one(
                request.group_id,
                request.member_id,
                answer,
                remaining_bytes,
                remaining_records,
                request.record_limit,
            )
            got = len(answer.records)
            fetched += got
            remaining_bytes = max(remaining_bytes - got, 0)
            remaining_records -= sum(r.last_offset - r.first_offset + 1 for r in answer.acquired)
        return fetched

    async def _acquire_one(
        self,
        group_id: str,
        member_id: str,
        answer: PartitionAnswer,
        max_bytes: int,
        max_records: int,
        record_limit: bool,
    ) -> None:
        try:
            partition = self._leader_partition(answer.topic_id, answer.partition)
            answer.leader_id, answer.leader_epoch = partition.leader_id, partition.leader_epoch
            share = await self._share_partition(group_id, answer.topic_id, partition)
        except KafkaError as exc:
            if exc.error_code is ErrorCode.coordinator_not_available:
                # The state's coordinator is being made, moving or loading: as Kafka's
                # share partition while it initializes, the fetch gets nothing this time
                # and the member fetches again.
                log.debug("Share group %s cannot load %s yet: %s", group_id, answer, exc)
                return
            answer.error, answer.error_message = exc.error_code, exc.message
            return
        isolation = FetchIsolation.HIGH_WATERMARK
        if self._group_configs.text(group_id, "share.isolation.level") == "read_committed":
            isolation = FetchIsolation.TXN_COMMITTED
        share.move_start_to(partition.log_start_offset)
        if not share.can_acquire():
            return
        offset = share.next_fetch_offset()
        try:
            data = partition.read_records(
                offset, max(max_bytes, 1), isolation, min_one_message=True
            )
        except KafkaError as exc:
            answer.error, answer.error_message = exc.error_code, exc.message
            return
        records = data.data
        if not records:
            return
        batches = split_batches(records, allow_partial_tail=True)
        aborted = (
            [AbortedTransaction(t.producer_id, t.first_offset) for t in data.aborted_transactions]
            if data.aborted_transactions is not None
            else None
        )
        acquired = share.acquire(
            member_id,
            batches,
            max_records,
            self._clock(),
            self._lock_duration(group_id),
            aborted,
            record_limit,
        )
        if acquired:
            self.stats.acquired += sum(r.last_offset - r.first_offset + 1 for r in acquired)
            last = acquired[-1].last_offset
            end = next(
                (b.position + b.size for b in batches if b.last_offset >= last),
                len(records),
            )
            answer.records = records[:end]
            answer.acquired = acquired
            self._schedule_lock_expiry(share, answer.topic_id)
        # As Kafka's, an acquisition is not written: a lock does not outlive this broker,
        # and the delivery it counts is written with the record's next change. Records
        # archived on the way (aborted, control) are written with that change too.

    def _leader_partition(self, topic_id: uuid.UUID, index: int) -> Partition:
        topic = self._metadata.get_by_id(topic_id)
        if topic is None:
            raise KafkaError.with_code(ErrorCode.unknown_topic_id, f"Unknown topic id {topic_id}")
        partition = self._replicas.hosted(topic.name, index)
        if partition is None or partition.role is not ReplicaRole.LEADER:
            raise KafkaError.with_code(
                ErrorCode.not_leader_or_follower,
                f"This broker does not lead {topic.name}-{index}",
            )
        return partition

    async def _share_partition(
        self, group_id: str, topic_id: uuid.UUID, partition: Partition
    ) -> SharePartition:
        key = (group_id, topic_id, partition.index)
        share = self._partitions.get(key)
        if share is not None:
            return share
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(self._load(group_id, topic_id, partition))
            self._loading[key] = loading
            loading.add_done_callback(lambda _: self._loading.pop(key, None))
        return await asyncio.shield(loading)

    async def _load(
        self, group_id: str, topic_id: uuid.UUID, partition: Partition
    ) -> SharePartition:
        state = await self._persister.read_state(
            group_id, topic_id, partition.index, partition.leader_epoch
        )
        if state is None or state.start_offset == UNINITIALIZED_START_OFFSET:
            start = self._reset_offset(group_id, partition)
            batches: tuple[StateBatch, ...] = ()
            state_epoch = state.state_epoch if state is not None else 0
        else:
            start, batches, state_epoch = state.start_offset, state.batches, state.state_epoch
        share = SharePartition(
            group_id,
            partition.topic,
            partition.index,
            start,
            max_in_flight=self._group_configs.value(group_id, "share.partition.max.record.locks"),
            delivery_count_limit=self._group_configs.value(group_id, "share.delivery.count.limit"),
            state_batches=batches,
            state_epoch=state_epoch,
        )
        self._partitions[(group_id, topic_id, partition.index)] = share
        log.info(
            "Share group %s reads %s-%d from offset %d (%d records in flight)",
            group_id,
            partition.topic,
            partition.index,
            share.start_offset,
            share.in_flight(),
        )
        if state is None or state.start_offset == UNINITIALIZED_START_OFFSET:
            await self._persist(share, topic_id, partition.leader_epoch)
        return share

    def _reset_offset(self, group_id: str, partition: Partition) -> int:
        """Where a share group with no state starts (share.auto.offset.reset)."""
        reset = self._group_configs.text(group_id, "share.auto.offset.reset")
        if reset == "earliest":
            return partition.log_start_offset
        if reset.startswith("by_duration:"):
            since = self._clock() - duration_ms(reset[len("by_duration:") :])
            found = partition.fetch_offset_for_timestamp(since, FetchIsolation.HIGH_WATERMARK)
            return found.offset if found is not None else partition.high_watermark
        return partition.high_watermark

    def _lock_duration(self, group_id: str) -> int:
        return self._group_configs.value(group_id, "share.record.lock.duration.ms")

    async def _wait(self, session: ShareSession, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        for topic_id, index in session.partitions:
            topic = self._metadata.get_by_id(topic_id)
            partition = self._replicas.hosted(topic.name, index) if topic is not None else None
            if partition is not None:
                partition.add_waiter(waiter)
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters.discard(waiter)

    def _wake(self) -> None:
        for waiter in list(self._waiters):
            if not waiter.done():
                waiter.set_result(None)

    # --- acknowledging ------------------------------------------------------------------

    async def share_acknowledge(
        self,
        group_id: str,
        member_id: str,
        session_epoch: int,
        partitions: Sequence[ShareFetchPartition],
        allow_renew: bool = True,
    ) -> ShareFetchAnswer:
        """ShareAcknowledge: acknowledgements alone, in the member's session."""
        try:
            if session_epoch == INITIAL_EPOCH:
                raise ShareSessionError(
                    ErrorCode.invalid_share_session_epoch,
                    "A ShareAcknowledge cannot open a share session (epoch 0)",
                )
            expected = (
                self._expected_epoch(group_id, member_id)
                if session_epoch == FINAL_EPOCH
                else session_epoch
            )
            session = self.sessions.resume(group_id, member_id, expected)
        except ShareSessionError as exc:
            log.info(
                "ShareAcknowledge of member %s of share group %s refused: %s",
                member_id,
                group_id,
                exc.message,
            )
            return ShareFetchAnswer(exc.error, exc.message)
        answer = ShareFetchAnswer(lock_duration_ms=self._lock_duration(group_id))
        for wanted in partitions:
            result = PartitionAnswer(wanted.topic_id, wanted.partition)
            await self._acknowledge_into(group_id, member_id, wanted, result, allow_renew)
            result.error, result.error_message = (
                result.acknowledge_error,
                result.acknowledge_error_message,
            )
            answer.partitions.append(result)
        if session_epoch == FINAL_EPOCH:
            self._close(group_id, member_id)
        else:
            session.next_epoch()
        return answer

    async def _acknowledge_into(
        self,
        group_id: str,
        member_id: str,
        wanted: ShareFetchPartition,
        answer: PartitionAnswer,
        allow_renew: bool,
    ) -> None:
        if not allow_renew and any(
            RENEW in batch.acknowledge_types for batch in wanted.acknowledgements
        ):
            answer.acknowledge_error = ErrorCode.invalid_request
            answer.acknowledge_error_message = "Renew acknowledgements need version 2 or later"
            return
        try:
            partition = self._leader_partition(wanted.topic_id, wanted.partition)
            answer.leader_id, answer.leader_epoch = partition.leader_id, partition.leader_epoch
            share = self._partitions.get((group_id, wanted.topic_id, wanted.partition))
            if share is None:
                raise KafkaError.with_code(
                    ErrorCode.unknown_topic_or_partition,
                    f"Share group {group_id} has no records of {partition.name} in flight here",
                )
            share.acknowledge(
                member_id,
                wanted.acknowledgements,
                self._clock(),
                self._lock_duration(group_id),
            )
            self._count_acknowledgements(wanted.acknowledgements)
        except KafkaError as exc:
            answer.acknowledge_error, answer.acknowledge_error_message = (
                exc.error_code,
                exc.message,
            )
            return
        except InvalidRecordStateError as exc:
            answer.acknowledge_error = ErrorCode.invalid_record_state
            answer.acknowledge_error_message = str(exc)
            log.info("Acknowledgement refused: %s", exc)
            return
        except InvalidAcknowledgementError as exc:
            answer.acknowledge_error = ErrorCode.invalid_request
            answer.acknowledge_error_message = str(exc)
            log.info("Acknowledgement of member %s refused: %s", member_id, exc)
            return
        self._wake()
        try:
            await self._persist(share, wanted.topic_id, partition.leader_epoch)
        except KafkaError as exc:
            answer.acknowledge_error, answer.acknowledge_error_message = (
                exc.error_code,
                exc.message,
            )

    def _count_acknowledgements(self, batches: Sequence[AcknowledgementBatch]) -> None:
        counts = self.stats.acknowledgements
        for batch in batches:
            size = batch.last_offset - batch.first_offset + 1
            if len(batch.acknowledge_types) == 1:
                kinds = {batch.acknowledge_types[0]: size}
            else:
                kinds = {}
                for kind in batch.acknowledge_types:
                    kinds[kind] = kinds.get(kind, 0) + 1
            for kind, count in kinds.items():
                name = _ACK_NAMES.get(kind)
                if name is not None:  # gaps are not counted, as in Kafka
                    counts[name] += count

    # --- sessions and members -----------------------------------------------------------

    def _close(self, group_id: str, member_id: str) -> None:
        """End the member's session: what it holds goes back to the group. The group's
        last session here ending, its share partitions are dropped (Kafka's
        onGroupEmpty): read again at the next fetch, they see offsets altered meanwhile."""
        self.sessions.remove(group_id, member_id)
        self.release_member(group_id, member_id)
        if not any(s.group_id == group_id for s in self.sessions.sessions()):
            for key in [k for k in self._partitions if k[0] == group_id]:
                self._drop(key)

    def release_member(self, group_id: str, member_id: str) -> None:
        for (group, topic_id, _), share in list(self._partitions.items()):
            if group == group_id and share.release_member(member_id):
                self._wake()
                self._persist_soon(share, topic_id)

    def connection_closed(self, connection: str) -> None:
        for session in self.sessions.of_connection(connection):
            self._close(session.group_id, session.member_id)

    # --- locks --------------------------------------------------------------------------

    def _schedule_lock_expiry(self, share: SharePartition, topic_id: uuid.UUID) -> None:
        key = (share.group_id, topic_id, share.partition)
        deadline = share.next_lock_deadline()
        previous = self._lock_timers.pop(key, None)
        if previous is not None:
            previous.cancel()
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(deadline - self._clock(), 0) / 1000
        self._lock_timers[key] = loop.call_later(delay, self._expire_locks, share, topic_id)

    def _expire_locks(self, share: SharePartition, topic_id: uuid.UUID) -> None:
        self._lock_timers.pop((share.group_id, topic_id, share.partition), None)
        expired = share.expire_locks(self._clock())
        self.stats.lock_timeouts += expired
        if expired:
            log.info(
                "%d record(s) of %s-%d acquired by share group %s: lock expired, released",
                expired,
                share.topic,
                share.partition,
                share.group_id,
            )
            self._wake()
            self._persist_soon(share, topic_id)
        self._schedule_lock_expiry(share, topic_id)

    # --- persisting ---------------------------------------------------------------------

    async def _persist(self, share: SharePartition, topic_id: uuid.UUID, leader_epoch: int) -> None:
        try:
            await self._persister.write_state(
                share.group_id,
                topic_id,
                share.partition,
                leader_epoch,
                PersistedState(
                    share.state_epoch,
                    share.start_offset,
                    tuple(share.state_batches()),
                    share.delivery_complete_count(),
                ),
            )
        except KafkaError as exc:
            if exc.error_code is ErrorCode.not_leader_or_follower:
                # Fenced: a newer leader, or a new state (offsets altered). As Kafka's, the
                # share partition is dropped and read again at the next fetch.
                log.info(
                    "Share group %s's state of %s-%d was fenced (%s): reading it again",
                    share.group_id,
                    share.topic,
                    share.partition,
                    exc.message,
                )
                self._drop((share.group_id, topic_id, share.partition))
            raise

    def _drop(self, key: tuple[str, uuid.UUID, int]) -> None:
        self._partitions.pop(key, None)
        timer = self._lock_timers.pop(key, None)
        if timer is not None:
            timer.cancel()

    def _persist_soon(self, share: SharePartition, topic_id: uuid.UUID) -> None:
        partition = self._replicas.hosted(share.topic, share.partition)
        epoch = partition.leader_epoch if partition is not None else -1
        task = asyncio.ensure_future(self._persist(share, topic_id, epoch))
        task.add_done_callback(_log_failed_write)

    # --- what others read ---------------------------------------------------------------

    def share_partitions(self) -> dict[tuple[str, uuid.UUID, int], SharePartition]:
        return dict(self._partitions)

    def on_leadership_lost(self, topic: str, index: int) -> None:
        """Another broker leads the partition now: its share partitions load there."""
        for key, share in list(self._partitions.items()):
            if share.topic == topic and share.partition == index:
                self._drop(key)


_ACK_NAMES = {1: "Accept", 2: "Release", 3: "Reject", 4: "Renew"}


def _log_failed_write(task: asyncio.Future[None]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("Could not write a share partition's state: %s", exc)
