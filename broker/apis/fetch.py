"""Fetch (key 1), v4-v16: reads, long polling, fetch sessions (v7+), topic ids (v13+).

A read_committed fetch (isolation_level 1) reads up to the last stable offset and gets
the aborted transactions overlapping what it reads, (producer id, first offset) each,
so the consumer drops their records; a read_uncommitted one reads up to the high
watermark and gets null there.

A fetch that finds fewer than min_bytes parks until an append to one of its
partitions wakes it or max_wait passes; there is no polling loop. Every response
carries at least one whole batch when there is one to give, however small max_bytes
and partition_max_bytes are, as Kafka does since v3.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, cast

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError
from brook.storage.file_records import FileRegion
from brook.storage.transaction_index import AbortedTxn

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize_cluster, authorized
from ..authorizer.operations import AclOperation
from ..observability.partition_stats import NOT_FAILED_FETCH
from ..quotas.manager import INT32_MAX
from ..replica.fetch_sessions import FINAL_EPOCH, INITIAL_EPOCH, CachedPartition, FetchSession
from ..replica.partition import FetchIsolation, Partition
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

log = logging.getLogger("brook.apis.fetch")

FIRST_REPLICA_STATE_VERSION = 15
FIRST_TOPIC_ID_VERSION = 13
FIRST_SESSION_VERSION = 7


class FetchPartitionView(Protocol):
    """A partition of a FetchRequest; the follower's log start offset (v5+) and the
    current leader epoch (v9+) are read where the version has them."""

    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def partition_max_bytes(self) -> int: ...


class FetchTopicView(Protocol):
    """A topic of a FetchRequest, in every served version."""

    @property
    def partitions(self) -> Sequence[FetchPartitionView]: ...


class FetchTopicBeforeV13View(FetchTopicView, Protocol):
    """v4-v12: the topic by name."""

    @property
    def topic(self) -> str: ...


class FetchTopicFromV13View(FetchTopicView, Protocol):
    """v13+: the topic by id."""

    @property
    def topic_id(self) -> uuid.UUID | None: ...


class FetchRequestView(Protocol):
    """What the handler reads of a FetchRequest in every served version; the replica id
    (v4-v14), the replica state (v15+), the isolation level and the forgotten topics
    (v7+) are read where the version has them."""

    @property
    def max_wait(self) -> datetime.timedelta: ...
    @property
    def min_bytes(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def topics(self) -> Sequence[FetchTopicView]: ...


class FetchRequestFromV7View(FetchRequestView, Protocol):
    """v7+: the fetch session (KIP-227)."""

    @property
    def session_id(self) -> int: ...
    @property
    def session_epoch(self) -> int: ...


if TYPE_CHECKING:
    from kio.schema.fetch import v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, v16

    def _served_requests_are_views(
        r4: v4.FetchRequest,
        r5: v5.FetchRequest,
        r6: v6.FetchRequest,
        r7: v7.FetchRequest,
        r8: v8.FetchRequest,
        r9: v9.FetchRequest,
        r10: v10.FetchRequest,
        r11: v11.FetchRequest,
        r12: v12.FetchRequest,
        r13: v13.FetchRequest,
        r14: v14.FetchRequest,
        r15: v15.FetchRequest,
        r16: v16.FetchRequest,
        t4: v4.request.FetchTopic,
        t5: v5.request.FetchTopic,
        t6: v6.request.FetchTopic,
        t7: v7.request.FetchTopic,
        t8: v8.request.FetchTopic,
        t9: v9.request.FetchTopic,
        t10: v10.request.FetchTopic,
        t11: v11.request.FetchTopic,
        t12: v12.request.FetchTopic,
        t13: v13.request.FetchTopic,
        t14: v14.request.FetchTopic,
        t15: v15.request.FetchTopic,
        t16: v16.request.FetchTopic,
    ) -> tuple[
        list[FetchRequestView],
        list[FetchRequestFromV7View],
        list[FetchTopicBeforeV13View],
        list[FetchTopicFromV13View],
    ]:
        return (
            [r4, r5, r6],
            [r7, r8, r9, r10, r11, r12, r13, r14, r15, r16],
            [t4, t5, t6, t7, t8, t9, t10, t11, t12],
            [t13, t14, t15, t16],
        )


@dataclass(slots=True)
class PartitionRead:
    topic: Any  # the name, or the topic id from v13
    index: int
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | FileRegion = b""
    aborted_transactions: list[AbortedTxn] | None = None
    # The partition read, whose bytes-out counters the response adds to, and whether
    # a follower read it.
    partition: Partition | None = None
    by_follower: bool = False
    leader_epoch: int = -1  # the partition's when it was read


@dataclass(slots=True)
class FetchTarget:
    topic: Any
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    # A follower's own log start (from v5; -1 from consumers).
    log_start_offset: int = -1
    # The partition's entry in the fetch session, when there is one.
    session_entry: CachedPartition | None = None


@dataclass(frozen=True, slots=True)
class _Reader:
    """Who fetches: a consumer (replica id -1) or a follower (its broker id)."""

    replica_id: int
    isolation: FetchIsolation
    # The topics (names or ids, as the request gives them) the fetcher may not read.
    denied: frozenset[Any] = frozenset()
    # A follower's fetch tells the leader how far its log reaches once, at the first
    # read; reading again after a wait answers it and is no new fetch (as Kafka's
    # DelayedFetch reads without updating the follower's state).
    records_follower_state: bool = True
    # A follower's fetch session, which keeps the partitions found idle twice quiet.
    session: FetchSession | None = None


def _replica_id(request: FetchRequestView) -> int:
    replica_state = getattr(request, "replica_state", None)  # v15+
    if replica_state is not None:
        return int(replica_state.replica_id)
    return int(getattr(request, "replica_id", -1))


@handles(ApiKey.FETCH)
def handle_fetch(ctx: RequestContext, request: FetchRequestView) -> Any:
    version = ctx.api_version
    session: FetchSession | None = None
    incremental = False
    try:
        if version >= FIRST_SESSION_VERSION:
            session, incremental = _resolve_session(ctx, cast(FetchRequestFromV7View, request))
    except KafkaError as exc:
        log.info("Fetch from %s refused: %s", ctx.who, exc.message)
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=exc.error_code,
            session_id=0,
            responses=(),
        )
    replica_id = _replica_id(request)
    targets = _targets(ctx, request, session, replica_id)
    reader = _Reader(
        replica_id,
        FetchIsolation.of(replica_id, getattr(request, "isolation_level", 0)),
        _denied(ctx, targets, replica_id) if ctx.services.authorizer is not None else frozenset(),
        session=session if replica_id >= 0 else None,
    )
    # As Kafka, the broker's fetch.max.bytes caps what a client may ask for: it bounds
    # what one response (and so one connection) can hold; so does a consumer's quota
    # (what it may fetch over the quota's windows), lest one response overrun it.
    max_bytes = min(request.max_bytes, ctx.services.config["fetch.max.bytes"])
    if ctx.quota is not None and not ctx.quota.from_replica:
        window_bytes = ctx.services.quotas.fetch.max_value_in_quota_window(
            ctx.quota.user, ctx.quota.client_id
        )
        max_bytes = min(max_bytes, int(min(window_bytes, INT32_MAX)))
    limits = _Limits(max_bytes, min(request.min_bytes, max_bytes))
    reads = _read_all(ctx, targets, limits.max_bytes, reader)
    max_wait_ms = request.max_wait.total_seconds() * 1000
    if max_wait_ms <= 0 or _satisfied(reads, limits.min_bytes):
        return _respond(ctx, reads, session, incremental)
    return _wait_then_respond(
        ctx, limits, targets, reads, session, incremental, reader, max_wait_ms / 1000
    )


@dataclass(frozen=True, slots=True)
class _Limits:
    max_bytes: int
    min_bytes: int


async def _wait_then_respond(
    ctx: RequestContext,
    limits: _Limits,
    targets: list[FetchTarget],
    reads: list[PartitionRead],
    session: FetchSession | None,
    incremental: bool,
    reader: _Reader,
    max_wait_s: float,
) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max_wait_s
    partitions = [_partition_of(ctx, target) for target in targets]
    reader = dataclasses.replace(reader, records_follower_state=False)
    quiet_session = reader.session if reader.session is not None and reader.session.quiet else None
    left_quiet = quiet_session.left_quiet if quiet_session is not None else 0
    while True:
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        waiter: asyncio.Future[None] = loop.create_future()
        for partition in partitions:
            if partition is not None:
                partition.add_waiter(waiter, follower=reader.replica_id >= 0)
        ctx.services.fetch_purgatory.park(waiter)
        if quiet_session is not None:
            quiet_session.waiter = waiter  # a quiet partition that moves wakes it too
        try:
            await asyncio.wait_for(waiter, remaining)
        except TimeoutError:
            # Nothing was appended meanwhile: only the partitions whose offsets or
            # leadership moved are read again (an idle follower's fetch of thousands
            # of partitions would otherwise read each of them twice).
            return _respond(
                ctx, _read_again(ctx, targets, reads, limits, reader), session, incremental
            )
        finally:
            ctx.services.fetch_purgatory.unpark(waiter)
            if quiet_session is not None:
                quiet_session.waiter = None
        if ctx.services.fetch_purgatory.closing:
            break  # answer with what there is, so the shutdown does not wait out max_wait
        if quiet_session is not None and quiet_session.left_quiet != left_quiet:
            # Partitions that moved left the quiet set: they are read from now on.
            left_quiet = quiet_session.left_quiet
            targets = _session_targets(quiet_session)
            partitions = [_partition_of(ctx, target) for target in targets]
        reads = _read_all(ctx, targets, limits.max_bytes, reader)
        if _satisfied(reads, limits.min_bytes):
            return _respond(ctx, reads, session, incremental)
    return _respond(ctx, _read_all(ctx, targets, limits.max_bytes, reader), session, incremental)


def _read_again(
    ctx: RequestContext,
    targets: list[FetchTarget],
    reads: list[PartitionRead],
    limits: _Limits,
    reader: _Reader,
) -> list[PartitionRead]:
    """The reads of a fetch whose wait ran out: `reads` where reading again would answer
    the same, the rest read again (within the same byte limits as _read_all)."""
    again = []
    remaining = limits.max_bytes
    got_data = False
    for target, read in zip(targets, reads, strict=True):
        if not _still_current(read):
            read = _read_one(ctx, target, remaining, reader, min_one=not got_data)
            remaining = max(remaining - len(read.records), 0)
            got_data = got_data or bool(read.records)
        again.append(read)
    return again


def _still_current(read: PartitionRead) -> bool:
    """Nothing was read, and nothing the answer tells (the offsets, the leadership) has
    moved since. New records wake a waiting fetch, so they need no check here."""
    partition = read.partition
    if partition is None or read.records or read.error is not ErrorCode.none:
        return False
    state = partition.fetch_state()  # None once it no longer leads, or is offline
    return state is not None and (state[0], *state[2:]) == (
        read.leader_epoch,
        read.high_watermark,
        read.last_stable_offset,
        read.log_start_offset,
    )


def _denied(ctx: RequestContext, targets: list[FetchTarget], replica_id: int) -> frozenset[Any]:
    """Kafka's checks: a follower needs ClusterAction on the cluster (without it, every
    partition is TOPIC_AUTHORIZATION_FAILED); a consumer needs Read on each topic."""
    refs = {target.topic for target in targets}
    if replica_id >= 0:
        allowed = authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
        return frozenset() if allowed else frozenset(refs)
    names: dict[Any, str] = {}
    for ref in refs:
        if isinstance(ref, uuid.UUID):
            topic = ctx.services.metadata.get_by_id(ref)
            if topic is not None:  # an unknown id is UNKNOWN_TOPIC_ID as before
                names[ref] = topic.name
        else:
            names[ref] = ref
    readable = authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names.values())
    return frozenset(ref for ref, name in names.items() if name not in readable)


def _satisfied(reads: list[PartitionRead], min_bytes: int) -> bool:
    total = 0
    for read in reads:
        if read.error is not ErrorCode.none:
            return True
        total += len(read.records)
    return total >= min_bytes


# --- sessions -----------------------------------------------------------------------------


def _resolve_session(
    ctx: RequestContext, request: FetchRequestFromV7View
) -> tuple[FetchSession | None, bool]:
    cache = ctx.services.fetch_sessions
    session_id, epoch = request.session_id, request.session_epoch
    if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
        if session_id:
            cache.close(session_id)
        if epoch == FINAL_EPOCH:
            return None, False
        return cache.new_session(), False
    session = cache.resume(session_id, epoch)
    return session, True


def _topic_ref(ctx: RequestContext, topic: FetchTopicView) -> str | uuid.UUID | None:
    if ctx.api_version >= FIRST_TOPIC_ID_VERSION:
        return cast(FetchTopicFromV13View, topic).topic_id
    return cast(FetchTopicBeforeV13View, topic).topic


def _targets(
    ctx: RequestContext, request: FetchRequestView, session: FetchSession | None, replica_id: int
) -> list[FetchTarget]:
    requested = [
        FetchTarget(
            _topic_ref(ctx, topic),
            partition.partition,
            partition.fetch_offset,
            partition.partition_max_bytes,
            getattr(partition, "current_leader_epoch", -1),  # from v9
            getattr(partition, "log_start_offset", -1),  # from v5
        )
        for topic in request.topics
        for partition in topic.partitions
    ]
    if session is None:
        return requested
    cached = session.partitions
    for forgotten in getattr(request, "forgotten_topics_data", ()):
        ref = forgotten.topic_id if ctx.api_version >= FIRST_TOPIC_ID_VERSION else forgotten.topic
        for index in forgotten.partitions:
            session.unquiet((ref, index))
            cached.pop((ref, index), None)
    for target in requested:
        key = (target.topic, target.index)
        session.unquiet(key)  # the follower moved: it is read, and its position taken
        entry = cached.get(key)
        if entry is None:
            cached[key] = CachedPartition(
                target.fetch_offset,
                target.max_bytes,
                target.current_leader_epoch,
                target.log_start_offset,
            )
        else:
            entry.fetch_offset = target.fetch_offset
            entry.max_bytes = target.max_bytes
            entry.leader_epoch = target.current_leader_epoch
            entry.fetcher_log_start_offset = target.log_start_offset
    session.fetched(replica_id, ctx.services.clock())
    return _session_targets(session)


def _session_targets(session: FetchSession) -> list[FetchTarget]:
    """What a fetch in `session` reads: every partition it holds but the quiet ones."""
    quiet = session.quiet
    return [
        FetchTarget(
            key[0],
            key[1],
            entry.fetch_offset,
            entry.max_bytes,
            entry.leader_epoch,
            entry.fetcher_log_start_offset,
            entry,
        )
        for key, entry in session.partitions.items()
        if key not in quiet
    ]


# --- reading ------------------------------------------------------------------------------


def _partition_of(ctx: RequestContext, target: FetchTarget) -> Partition | None:
    services = ctx.services
    if isinstance(target.topic, uuid.UUID):
        topic = services.metadata.get_by_id(target.topic)
        name = topic.name if topic is not None else None
    else:
        name = target.topic
    return services.replicas.hosted(name, target.index) if name is not None else None


def _read_all(
    ctx: RequestContext, targets: list[FetchTarget], max_bytes: int, reader: _Reader
) -> list[PartitionRead]:
    reads = []
    remaining = max_bytes
    got_data = False
    for target in targets:
        # Only the first batch of the response may break the size limits.
        read = _read_one(ctx, target, remaining, reader, min_one=not got_data)
        remaining = max(remaining - len(read.records), 0)
        got_data = got_data or bool(read.records)
        reads.append(read)
    return reads


def _read_one(
    ctx: RequestContext, target: FetchTarget, remaining: int, reader: _Reader, min_one: bool
) -> PartitionRead:
    if target.topic in reader.denied:
        return PartitionRead(target.topic, target.index, ErrorCode.topic_authorization_failed)
    partition = _partition_of(ctx, target)
    if partition is not None and (injected := ctx.injected_error(partition.topic, target.index)):
        return PartitionRead(target.topic, target.index, injected)
    if partition is None:
        error = (
            ErrorCode.unknown_topic_id
            if isinstance(target.topic, uuid.UUID)
            else ErrorCode.unknown_topic_or_partition
        )
        return PartitionRead(target.topic, target.index, error)
    max_bytes = min(target.max_bytes, remaining)
    partition.stats.fetch_requests += 1
    entry = target.session_entry if reader.replica_id >= 0 else None
    if entry is not None and entry.idle_fetch is not None:
        again = _idle_fetch_again(ctx, target, entry.idle_fetch, partition, reader)
        if again is not None:
            if reader.session is not None and reader.records_follower_state:
                # Idle twice: the session skips it until it moves (fetch_sessions.py).
                reader.session.make_quiet((target.topic, target.index), partition)
            return again
    try:
        info = partition.read_records(
            target.fetch_offset,
            max_bytes,
            reader.isolation,
            min_one,
            target.current_leader_epoch,
            reader.replica_id,
            target.log_start_offset,
            ctx.services.clock(),
            records_follower_state=reader.records_follower_state,
            # Streamed from the segment as the connection sends the response: a consumer
            # that reads slowly holds a piece of it in memory, not all of it.
            lazy=True,
        )
    except KafkaError as exc:
        if exc.error_code not in NOT_FAILED_FETCH:
            partition.stats.failed_fetch_requests += 1
        # As Kafka, a failed read tells no offsets.
        return PartitionRead(target.topic, target.index, exc.error_code)
    except ValueError as exc:
        if max_bytes >= 0:
            raise
        # A negative max_bytes or partition_max_bytes: Kafka's log read refuses the size
        # and the partition is answered UNKNOWN_SERVER_ERROR with unknown offsets.
        log.warning(
            "Fetch from %s (client %r) of %s-%d: %s",
            ctx.peer,
            ctx.client_id,
            partition.topic,
            partition.index,
            exc,
        )
        return PartitionRead(target.topic, target.index, ErrorCode.unknown_server_error)
    if entry is not None:
        entry.idle_fetch = _idle_fetch(target, partition) if not info.records else None
    return PartitionRead(
        target.topic,
        target.index,
        ErrorCode.none,
        info.high_watermark,
        info.last_stable_offset,
        info.log_start_offset,
        info.records,  # a view of what the log read, not copied
        info.aborted_transactions,
        partition,
        reader.replica_id >= 0,
        partition.leader_epoch,
    )


# A follower's fetch of a partition in its session where there was nothing to read (it
# asked for the leader's log end), and the partition's state then. Idle followers of
# thousands of partitions fetch each of them twice a second; one that asks the same of a
# partition whose state has not moved would get the same nothing, and is only told so.


def _idle_fetch(target: FetchTarget, partition: Partition) -> tuple[int, ...] | None:
    state = partition.fetch_state()
    if state is None or target.fetch_offset != state[1]:
        return None
    return (target.fetch_offset, target.log_start_offset, target.current_leader_epoch, *state)


def _idle_fetch_again(
    ctx: RequestContext,
    target: FetchTarget,
    idle: tuple[int, ...],
    partition: Partition,
    reader: _Reader,
) -> PartitionRead | None:
    """The answer to a follower's fetch that is the idle one again, None when it is not
    (or when the follower's state needs more than noting that it is caught up)."""
    if _idle_fetch(target, partition) != idle:
        return None
    if reader.records_follower_state and not partition.follower_fetched_again(
        reader.replica_id, target.fetch_offset, target.log_start_offset, ctx.services.clock()
    ):
        return None
    leader_epoch, _, high_watermark, last_stable_offset, log_start_offset = idle[3:]
    return PartitionRead(
        target.topic,
        target.index,
        ErrorCode.none,
        high_watermark,
        last_stable_offset,
        log_start_offset,
        partition=partition,
        by_follower=True,
        leader_epoch=leader_epoch,
    )


def _respond(
    ctx: RequestContext,
    reads: list[PartitionRead],
    session: FetchSession | None,
    incremental: bool,
) -> Any:
    types = schema_module(ctx.response_type)
    if session is not None:
        reads = _update_session(session, reads, incremental)
    by_topic: dict[Any, list[Any]] = {}
    for read in reads:
        if read.records and read.partition is not None:
            # BytesOutPerSec counts what consumers are sent; what followers are sent
            # is ReplicationBytesOutPerSec.
            if read.by_follower:
                read.partition.stats.replication_bytes_out += len(read.records)
            else:
                read.partition.stats.bytes_out += len(read.records)
        by_topic.setdefault(read.topic, []).append(
            build(
                types.PartitionData,
                partition_index=read.index,
                error_code=read.error,
                high_watermark=read.high_watermark,
                last_stable_offset=read.last_stable_offset,
                log_start_offset=read.log_start_offset,
                aborted_transactions=_aborted_transactions(types, read.aborted_transactions),
                preferred_read_replica=-1,
                records=read.records,
            )
        )
    topic_key = "topic_id" if ctx.api_version >= FIRST_TOPIC_ID_VERSION else "topic"
    responses = tuple(
        build(types.FetchableTopicResponse, **{topic_key: topic}, partitions=tuple(parts))
        for topic, parts in by_topic.items()
    )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=session.session_id if session is not None else 0,
        responses=responses,
    )


def _aborted_transactions(types: ModuleType, aborted: list[AbortedTxn] | None) -> Any:
    if aborted is None:
        return None
    return tuple(
        build(types.AbortedTransaction, producer_id=txn.producer_id, first_offset=txn.first_offset)
        for txn in aborted
    )


def _update_session(
    session: FetchSession, reads: list[PartitionRead], incremental: bool
) -> list[PartitionRead]:
    """Record what the client is told; an incremental response keeps only news."""
    kept = []
    for read in reads:
        cached = session.partitions.get((read.topic, read.index))
        changed = (
            read.error is not ErrorCode.none
            or bool(read.records)
            or cached is None
            or cached.high_watermark != read.high_watermark
            or cached.last_stable_offset != read.last_stable_offset
            or cached.log_start_offset != read.log_start_offset
        )
        if cached is not None:
            cached.high_watermark = read.high_watermark
            cached.last_stable_offset = read.last_stable_offset
            cached.log_start_offset = read.log_start_offset
        if changed or not incremental:
            kept.append(read)
    return kept
