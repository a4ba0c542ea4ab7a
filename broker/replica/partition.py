"""A replica of a partition on this broker, in the shape of Kafka's Partition.

Handlers talk to the partition, never past it to its log: it knows its role (leader,
or later follower), its leader epoch and ISR, and moves the high watermark. As leader
it validates and appends (the log validator assigns the offsets), tells an acks=all
produce when its records are committed (every in-sync replica has them), and bounds
every read by who reads: a consumer up to the high watermark, or the last stable
offset under read_committed; a follower up to the log end.

The fencing rule of KIP-320 lives here once: a request that names a leader epoch
older than the partition's gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from brook.protocol.errors import (
    FencedLeaderEpochError,
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownLeaderEpochError,
)
from brook.protocol.record_batch import split_batches
from brook.storage.clock import system_clock
from brook.storage.log import AppendInfo, FetchDataInfo, Log
from brook.storage.log_segment import TimestampAndOffset
from brook.storage.log_validator import DEFAULT_MAX_DECOMPRESSED_BYTES, AppendOrigin
from brook.storage.producer_state import ProducerStateEntry

from ..observability.partition_stats import PartitionStats

if TYPE_CHECKING:
    from ..metadata.cache import PartitionRegistration
    from .fetch_sessions import FetchSession, PartitionKey

logger = logging.getLogger("brook.partition")

# ListOffsets' special timestamps (ListOffsetsRequest.*_TIMESTAMP).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
# DeleteRecords' "up to the high watermark".
DELETE_TO_HIGH_WATERMARK = -1
ACKS_ALL = -1
CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1
NO_TIMESTAMP = -1


class FetchIsolation(enum.Enum):
    """How far a read may go (Kafka's FetchIsolation)."""

    LOG_END = "log_end"  # followers: everything written
    HIGH_WATERMARK = "high_watermark"  # consumers under read_uncommitted
    TXN_COMMITTED = "txn_committed"  # consumers under read_committed

    @classmethod
    def of(cls, replica_id: int, isolation_level: int) -> FetchIsolation:
        if replica_id >= 0:  # a broker id: a follower fetching
            return cls.LOG_END
        if isolation_level == READ_COMMITTED:
            return cls.TXN_COMMITTED
        return cls.HIGH_WATERMARK


class ReplicaRole(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of a follower (Kafka's Replica): how far its log reaches,
    and when it last had everything the leader had."""

    broker_id: int
    log_end_offset: int = -1  # unknown until it fetches
    log_start_offset: int = -1
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    # The leader's log end offset at the follower's previous fetch.
    last_fetch_leader_log_end_offset: int = -1

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> None:
        """A fetch from `fetch_offset` says the follower has everything below it. It was
        caught up at this fetch if it asked for the leader's end, or at the previous one
        if it asked for at least what the leader had then (Kafka's updateFetchState)."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms

    def caught_up_at(self, fetch_time_ms: int) -> None:
        """A fetch that was not read (its session kept the partition quiet) asked for
        the log end, which had not moved."""
        self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        self.last_fetch_time_ms = max(self.last_fetch_time_ms, fetch_time_ms)

    def reset(self, now_ms: int, in_sync: bool) -> None:
        """A new leadership: nothing is known of the follower until it fetches; an
        in-sync one counts as caught up now, so it has replica.lag.time.max.ms to fetch."""
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_fetch_leader_log_end_offset = -1
        self.last_fetch_time_ms = 0
        self.last_caught_up_time_ms = now_ms if in_sync else 0


class AlterPartition(Protocol):
    """How a leader changes its partition's ISR (Kafka's AlterPartitionManager): a
    conditional write against the partition epoch the leader knows. The future gives the
    registration written, or fails when the write was refused (another change came
    first, or this broker is no longer the leader); the leader then waits for the
    metadata to tell it the new state."""

    def __call__(
        self, partition: Partition, new_isr: list[int]
    ) -> asyncio.Future[PartitionRegistration]: ...


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: Log
    local_broker_id: int
    leader_id: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    # Bumped by every change of the registration; ISR changes are made against it.
    partition_epoch: int = 0
    # Consumers' fetches parked until the high watermark moves (long polling).
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # Followers' fetches parked until the log end moves.
    follower_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # acks=all produces waiting for the high watermark to pass their offset.
    commit_waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    # DeleteRecords waiting for every replica's log start to reach their offset.
    low_watermark_waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)
    # Where ISR changes go (None with a single broker: it is the whole ISR for ever).
    alter_partition: AlterPartition | None = None
    # The ISR asked for and not yet written (Kafka's pending ISR state): until it is,
    # the high watermark waits for the union of both (the "maximal" ISR).
    pending_isr: list[int] | None = None
    # Milliseconds; when a partition made as leader starts counting its followers' lag.
    clock: Callable[[], int] = system_clock
    # The broker lost (or presumes lost) its ZooKeeper session: another broker may be
    # elected any moment, so this one takes no more writes as leader.
    fenced: bool = False
    # Whether ZooKeeper answered lately enough that no other broker can have been elected
    # (zookeeper/leadership_lease.py): a paused leader resumes with writes queued before
    # the session listener can fence it. Always held by a single broker.
    leadership_lease: Callable[[], bool] = lambda: True
    # Whether a broker is alive (registered): a dead replica holds back no low watermark.
    broker_alive: Callable[[int], bool] = lambda broker_id: True
    # Whether a caught-up follower's broker may join the ISR (Kafka's
    # isReplicaIsrEligible, KIP-841): registered, and not in controlled shutdown.
    isr_eligible: Callable[[int], bool] = lambda broker_id: True
    # What /metrics reports of this partition (BrokerTopicMetrics, ISR changes).
    stats: PartitionStats = field(default_factory=PartitionStats)
    # Followers' fetch sessions that skip this partition while nothing moves
    # (broker/replica/fetch_sessions.py), with the key each knows it by.
    quiet_sessions: dict[FetchSession, PartitionKey] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._track_remote_replicas()
        if self.role is ReplicaRole.LEADER:
            self._become_leader(self.clock(), announce=False)
        self._maybe_increment_high_watermark()

    def _track_remote_replicas(self) -> None:
        self.remote_replicas = {
            broker_id: self.remote_replicas.get(broker_id, ReplicaState(broker_id))
            for broker_id in self.replicas
            if broker_id != self.local_broker_id
        }

    def update_registration(
        self,
        replicas: list[int],
        isr: list[int],
        leader_id: int,
        leader_epoch: int,
        partition_epoch: int = 0,
        now_ms: int = 0,
    ) -> bool:
        """Take a new assignment, leader or ISR from the metadata (Kafka's makeLeader /
        makeFollower): waiters that only the old leader could answer are answered now.
        True when the leadership changed (a new leader or leader epoch)."""
        if self.quiet_sessions:
            self._wake_quiet()  # before the followers' states start over
        was_leader = self.role is ReplicaRole.LEADER
        new_leadership = leader_epoch != self.leader_epoch or leader_id != self.leader_id
        self.replicas, self.isr = replicas, isr
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        self.partition_epoch = partition_epoch
        self.pending_isr = None  # a change in flight was decided one way or the other
        self._track_remote_replicas()
        if self.role is ReplicaRole.LEADER and (new_leadership or not was_leader):
            self._become_leader(now_ms, announce=True)
        if was_leader and self.role is not ReplicaRole.LEADER:
            self.fail_waiters(
                NotLeaderOrFollowerError(
                    f"Broker {self.local_broker_id} no longer leads {self.name}"
                )
            )
        else:
            self._maybe_increment_high_watermark()
            self._complete_commit_waiters()  # the ISR may have shrunk below min.insync
            self.wake_waiters()  # parked fetches answer with the new epoch
        return new_leadership

    def _become_leader(self, now_ms: int, announce: bool) -> None:
        """The epoch starts at the log end (OffsetForLeaderEpoch answers from it before
        the first write of the epoch); nothing is known of the followers yet."""
        if self.is_offline:
            return
        cache = self.log.leader_epoch_cache
        latest = cache.latest_epoch
        if latest is None or self.leader_epoch > latest:
            # Written with the epoch's first record (the log's append): a partition led and
            # never written to costs no file write.
            cache.assign(self.leader_epoch, self.log.log_end_offset, flush=False)
        for broker_id, replica in self.remote_replicas.items():
            replica.reset(now_ms, in_sync=broker_id in self.isr)
        if not announce:
            return
        logger.info(
            "Broker %d leads %s from offset %d with leader epoch %d, ISR %s",
            self.local_broker_id,
            self.name,
            self.log.log_end_offset,
            self.leader_epoch,
            ",".join(map(str, self.isr)),
        )

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def role(self) -> ReplicaRole:
        return (
            ReplicaRole.LEADER if self.leader_id == self.local_broker_id else ReplicaRole.FOLLOWER
        )

    @property
    def is_offline(self) -> bool:
        """Its log dir failed: every request for it answers KAFKA_STORAGE_ERROR."""
        return self.log.is_offline

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    # --- checks -----------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320's fencing: -1 asks for no check."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"The leader epoch {current_leader_epoch} of the request is older than"
                f" the current leader epoch {self.leader_epoch} of {self.name}"
            )
        raise UnknownLeaderEpochError(
            f"The leader epoch {current_leader_epoch} of the request is newer than"
            f" the current leader epoch {self.leader_epoch} of {self.name}"
        )

    def _local_log(self, current_leader_epoch: int = -1, require_leader: bool = True) -> Log:
        """The log, once the request's epoch and this replica's role allow serving it."""
        if self.is_offline:
            raise KafkaStorageError(f"Partition {self.name} is in an offline log dir")
        self.check_leader_epoch(current_leader_epoch)
        if require_leader and self.role is not ReplicaRole.LEADER:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.name} on broker {self.local_broker_id}"
            )
        return self.log

    # --- appending --------------------------------------------------------------------

    def append_records_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        origin: AppendOrigin,
        required_acks: int,
        now_ms: int,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> AppendInfo:
        """Validate and append as the leader; await `wait_for_commit` for acks=all."""
        log = self._local_log()
        if self.fenced or not self.leadership_lease():
            raise NotLeaderOrFollowerError(
                f"Broker {self.local_broker_id} is cut off from ZooKeeper and does not lead"
                f" {self.name} for now"
            )
        min_insync = log.config.min_insync_replicas
        if required_acks == ACKS_ALL and len(self.isr) < min_insync:
            # Kafka refuses before writing when the ISR is too small for acks=all.
            raise NotEnoughReplicasError(
                f"The size of the current ISR {set(self.isr)} is insufficient to satisfy"
                f" the min.isr requirement of {min_insync} for partition {self.name}"
            )
        info = log.append_as_leader(
            records,
            self.leader_epoch,
            now_ms,
            origin,
            max_decompressed_bytes=max_decompressed_bytes,
        )
        stats = self.stats
        stats.messages_in += info.record_count
        stats.bytes_in += len(records)
        self._wake_followers()
        self._maybe_increment_high_watermark()
        return info

    def wait_for_commit(self, required_offset: int) -> asyncio.Future[None] | None:
        """None when every in-sync replica has the log up to `required_offset`
        (exclusive) already; else a future that completes when they do, or fails
        when this replica stops being the leader."""
        if self.high_watermark >= required_offset:
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.commit_waiters.append((required_offset, waiter))
        return waiter

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int = -1, now_ms: int = 0
    ) -> None:
        """A follower fetched from `fetch_offset`: it has everything below it. It may
        join the ISR now, and the high watermark may move."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            raise NotLeaderOrFollowerError(
                f"Replica {replica_id} is not a replica of {self.name} on broker"
                f" {self.local_broker_id}"
            )
        replica.update_fetch_state(fetch_offset, log_start_offset, self.log.log_end_offset, now_ms)
        self._maybe_expand_isr(replica)
        self._maybe_increment_high_watermark()
        self._complete_low_watermark_waiters()

    def fetch_state(self) -> tuple[int, int, int, int, int] | None:
        """What a fetch from this leader tells besides records (its epoch and offsets:
        leader epoch, log end, high watermark, last stable offset, log start); None when
        it does not lead or its log is offline."""
        log = self.log
        if self.leader_id != self.local_broker_id or log.is_offline:
            return None
        return (
            self.leader_epoch,
            log.log_end_offset,
            log.high_watermark,
            log.last_stable_offset,
            log.log_start_offset,
        )

    def follower_fetched_again(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, now_ms: int
    ) -> bool:
        """An in-sync follower fetched from where it did before, and nothing it could
        change here moved since: only that it is caught up is new. False when it is not
        such a follower (update_follower_fetch_state has more to do)."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None or self.pending_isr is not None or replica_id not in self.isr:
            return False
        replica.update_fetch_state(fetch_offset, log_start_offset, self.log.log_end_offset, now_ms)
        return True

    # --- the ISR ------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> set[int]:
        """The ISR the high watermark waits for: while a change is being written, both
        the old and the new members (Kafka's maximalIsr)."""
        return set(self.isr) | set(self.pending_isr or ())

    def _maybe_expand_isr(self, replica: ReplicaState) -> None:
        """A follower outside the ISR joins once it has caught up to the high watermark
        and to the start of this leader's epoch (Kafka's isFollowerInSync)."""
        if (
            self.role is not ReplicaRole.LEADER
            or self.pending_isr is not None
            or replica.broker_id in self.isr
            or replica.broker_id not in self.replicas
        ):
            return
        epoch_entry = self.log.leader_epoch_cache.epoch_entry(self.leader_epoch)
        if replica.log_end_offset < self.high_watermark or (
            epoch_entry is not None and replica.log_end_offset < epoch_entry.start_offset
        ):
            return
        if not self.isr_eligible(replica.broker_id):
            # A stopping broker fetches until the controller has taken it out of every
            # ISR: taken back in, it would hold acks=all back once it stops.
            return
        logger.info(
            "Expanding the ISR of %s from %s to %s",
            self.name,
            ",".join(map(str, self.isr)),
            ",".join(map(str, [*self.isr, replica.broker_id])),
        )
        self._submit_isr([*self.isr, replica.broker_id])

    def maybe_shrink_isr(self, now_ms: int, lag_time_max_ms: int) -> None:
        """Followers that have not caught up within `lag_time_max_ms` leave the ISR
        (Kafka's maybeShrinkIsr, run every half of replica.lag.time.max.ms)."""
        if self.role is not ReplicaRole.LEADER or self.pending_isr is not None:
            return
        for session in self.quiet_sessions:
            self._caught_up_while_quiet(session)
        out_of_sync = [
            broker_id
            for broker_id in self.isr
            if (replica := self.remote_replicas.get(broker_id)) is not None
            and now_ms - replica.last_caught_up_time_ms > lag_time_max_ms
        ]
        if not out_of_sync:
            return
        new_isr = [broker_id for broker_id in self.isr if broker_id not in out_of_sync]
        logger.info(
            "Shrinking the ISR of %s from %s to %s (high watermark %d, log end %d); out of"
            " sync: %s",
            self.name,
            ",".join(map(str, self.isr)),
            ",".join(map(str, new_isr)),
            self.high_watermark,
            self.log.log_end_offset,
            ", ".join(
                f"broker {broker_id} (log end {self.remote_replicas[broker_id].log_end_offset},"
                f" last caught up {now_ms - self.remote_replicas[broker_id].last_caught_up_time_ms}"
                " ms ago)"
                for broker_id in out_of_sync
            ),
        )
        self._submit_isr(new_isr)

    def _submit_isr(self, new_isr: list[int]) -> None:
        if self.alter_partition is None:
            return
        self.pending_isr = new_isr
        epoch = self.leader_epoch
        shrinking = len(new_isr) < len(self.isr)
        written = self.alter_partition(self, new_isr)

        def done(future: asyncio.Future[PartitionRegistration]) -> None:
            if not future.cancelled() and future.exception() is None:
                # Written (IsrShrinksPerSec / IsrExpandsPerSec), whether or not the
                # metadata brought the change here first.
                if shrinking:
                    self.stats.isr_shrinks += 1
                else:
                    self.stats.isr_expands += 1
            if self.leader_epoch != epoch or self.pending_isr is not new_isr:
                return  # the metadata moved on meanwhile; it said what holds
            self.pending_isr = None
            if future.cancelled() or future.exception() is not None:
                logger.info(
                    "The ISR change of %s to %s was not written: %s",
                    self.name,
                    ",".join(map(str, new_isr)),
                    "cancelled" if future.cancelled() else future.exception(),
                )
                return
            registration = future.result()
            self.isr = list(registration.isr)
            self.partition_epoch = registration.partition_epoch
            self._maybe_increment_high_watermark()
            self._complete_commit_waiters()

        written.add_done_callback(done)

    def _maybe_increment_high_watermark(self) -> None:
        """The high watermark is the smallest log end offset among the in-sync
        replicas; it never moves back."""
        if self.role is not ReplicaRole.LEADER or self.is_offline:
            return
        new_high_watermark = self.log.log_end_offset
        # The maximal ISR's members, without building its set (every follower fetch of
        # every partition comes here).
        remote = self.remote_replicas
        for members in (self.isr, self.pending_isr or ()):
            for broker_id in members:
                replica = remote.get(broker_id)
                if replica is not None and replica.log_end_offset < new_high_watermark:
                    new_high_watermark = replica.log_end_offset
        if new_high_watermark <= self.log.high_watermark:
            return
        self.log.high_watermark = new_high_watermark
        self._complete_commit_waiters()
        self.wake_waiters()

    def _complete_commit_waiters(self) -> None:
        """acks=all writes the whole ISR has are answered: done, or, when the ISR has
        shrunk below min.insync.replicas meanwhile, NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        if not self.commit_waiters or self.role is not ReplicaRole.LEADER:
            return
        high_watermark = self.high_watermark
        min_insync = self.log.config.min_insync_replicas
        pending = []
        for required_offset, waiter in self.commit_waiters:
            if waiter.done():
                continue
            if required_offset > high_watermark:
                pending.append((required_offset, waiter))
            elif len(self.isr) < min_insync:
                waiter.set_exception(
                    NotEnoughReplicasAfterAppendError(
                        f"The size of the current ISR {set(self.isr)} is insufficient to"
                        f" satisfy the min.isr requirement of {min_insync} for partition"
                        f" {self.name}"
                    )
                )
            else:
                waiter.set_result(None)
        self.commit_waiters = pending

    def fail_waiters(self, error: KafkaError) -> None:
        """This replica no longer serves: answer everyone who waits on it."""
        waiters = self.commit_waiters + self.low_watermark_waiters
        self.commit_waiters, self.low_watermark_waiters = [], []
        for _, waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self.wake_waiters()
        self._wake_followers()

    # --- as a follower --------------------------------------------------------------------

    def append_records_as_follower(
        self, records: bytes | bytearray | memoryview, leader_high_watermark: int
    ) -> AppendInfo | None:
        """What the leader sent, with its offsets and epochs (None when it sent nothing);
        the high watermark follows the leader's, as far as this log reaches."""
        if self.role is not ReplicaRole.FOLLOWER:
            raise NotLeaderOrFollowerError(f"Broker {self.local_broker_id} leads {self.name}")
        # A response cut at its size limit may end in part of a batch: it comes again.
        batches = split_batches(records, allow_partial_tail=True)
        info = None
        if batches:
            whole = batches[-1].position + batches[-1].size
            info = self.log.append_as_follower(memoryview(records)[:whole], batches)
            self.stats.replication_bytes_in += whole
        self.update_follower_high_watermark(leader_high_watermark)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        if leader_high_watermark > self.log.high_watermark:
            self.log.high_watermark = leader_high_watermark  # bounded by the log end

    def truncate_to(self, offset: int) -> None:
        """Remove what diverged from the leader (a follower, before it fetches)."""
        self.log.truncate_to(offset)

    # --- reading ----------------------------------------------------------------------

    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
        current_leader_epoch: int = -1,
        replica_id: int = CONSUMER_REPLICA_ID,
        replica_log_start_offset: int = -1,
        now_ms: int = 0,
        lazy: bool = False,
        records_follower_state: bool = True,
    ) -> FetchDataInfo:
        """Fetch: whole batches from `fetch_offset`, as far as `isolation` allows, with
        the partition's offsets as they were at the read (`lazy`: the records as a
        FileRegion, streamed from the segment when the response is sent).

        A follower (`replica_id` >= 0) must be one of this partition's replicas; its
        fetch offset tells the leader how far its log reaches."""
        log = self._local_log(current_leader_epoch)
        if replica_id >= 0 and replica_id not in self.remote_replicas:
            raise NotLeaderOrFollowerError(
                f"Replica {replica_id} is not a follower of {self.name} on broker"
                f" {self.local_broker_id}"
            )
        if isolation is FetchIsolation.TXN_COMMITTED:
            max_offset = log.last_stable_offset
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            max_offset = log.high_watermark
        else:
            max_offset = log.log_end_offset
        data = log.read(
            fetch_offset,
            max_bytes,
            max_offset,
            min_one_message,
            include_aborted_txns=isolation is FetchIsolation.TXN_COMMITTED,
            lazy=lazy,
        )
        if replica_id >= 0 and records_follower_state:
            self.update_follower_fetch_state(
                replica_id, fetch_offset, replica_log_start_offset, now_ms
            )
        return data

    def fetch_offset_for_timestamp(
        self, timestamp: int, isolation: FetchIsolation, current_leader_epoch: int = -1
    ) -> TimestampAndOffset | None:
        """ListOffsets: the offset for a timestamp (or a special one), never past
        what the reader may fetch; None when no record qualifies."""
        log = self._local_log(current_leader_epoch)
        if isolation is FetchIsolation.TXN_COMMITTED:
            last_fetchable = log.last_stable_offset
        elif isolation is FetchIsolation.HIGH_WATERMARK:
            last_fetchable = log.high_watermark
        else:  # a follower asking
            last_fetchable = log.log_end_offset
        if timestamp == LATEST_TIMESTAMP:
            return TimestampAndOffset(NO_TIMESTAMP, last_fetchable, self.leader_epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            # Without tiered storage the earliest local offset is the log start.
            found = log.earliest_timestamp_and_offset()
            return _with_epoch(found, self.leader_epoch)
        if timestamp == MAX_TIMESTAMP:
            found_or_none = log.max_timestamp_and_offset()
        elif timestamp < 0:
            raise InvalidRequestError(f"There is no special timestamp {timestamp}")
        else:
            found_or_none = log.fetch_offset_by_timestamp(timestamp)
        if found_or_none is None or found_or_none.offset >= last_fetchable:
            return None
        return _with_epoch(found_or_none, self.leader_epoch)

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= `leader_epoch`, where it ends)."""
        log = self._local_log(current_leader_epoch)
        return log.leader_epoch_cache.end_offset_for(leader_epoch, log.log_end_offset)

    def active_producers(self) -> list[ProducerStateEntry]:
        """DescribeProducers: the producers this replica knows (a follower answers too)."""
        return self._local_log(require_leader=False).active_producers()

    @property
    def low_watermark(self) -> int:
        """The smallest log start offset among the replicas known to have one (Kafka's
        lowWatermarkIfLeader): what DeleteRecords waits for."""
        starts = [self.log_start_offset]
        starts += [
            replica.log_start_offset
            for replica in self.remote_replicas.values()
            if replica.log_start_offset >= 0 and self.broker_alive(replica.broker_id)
        ]
        return min(starts)

    def wait_for_low_watermark(self, offset: int) -> asyncio.Future[None] | None:
        """None once every replica's log start has reached `offset`; else a future that
        completes when it has (followers learn the new start from their fetches), or
        fails when this replica stops leading."""
        if self.low_watermark >= offset:
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.low_watermark_waiters.append((offset, waiter))
        return waiter

    def _complete_low_watermark_waiters(self) -> None:
        if not self.low_watermark_waiters:
            return
        low_watermark = self.low_watermark
        pending = []
        for offset, waiter in self.low_watermark_waiters:
            if waiter.done():
                continue
            if offset <= low_watermark:
                waiter.set_result(None)
            else:
                pending.append((offset, waiter))
        self.low_watermark_waiters = pending

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset`; the new one."""
        log = self._local_log()
        if not log.config.delete_enabled:
            raise PolicyViolationError(
                f"Records of partition {self.name} can not be deleted due to the configured policy"
            )
        if offset == DELETE_TO_HIGH_WATERMARK:
            offset = log.high_watermark
        if offset < 0:
            raise OffsetOutOfRangeError(
                f"The offset {offset} for partition {self.name} is not valid"
            )
        log.maybe_increment_log_start_offset(offset)
        if self.quiet_sessions:
            self._wake_quiet()  # the followers are told the new log start
        return log.log_start_offset

    # --- long polls -------------------------------------------------------------------

    def add_waiter(self, waiter: asyncio.Future[None], follower: bool = False) -> None:
        """Park a fetch: a consumer's until the high watermark moves, a follower's until
        the log end does."""
        (self.follower_waiters if follower else self.waiters).append(waiter)

    def wake_waiters(self) -> None:
        if self.waiters:
            waiters, self.waiters = self.waiters, []
            _wake(waiters)
        if self.quiet_sessions:
            self._wake_quiet()

    def _wake_followers(self) -> None:
        if self.follower_waiters:
            waiters, self.follower_waiters = self.follower_waiters, []
            _wake(waiters)
        if self.quiet_sessions:
            self._wake_quiet()

    # --- followers' sessions that skip this partition while nothing moves --------------

    def join_quiet(self, session: FetchSession, key: PartitionKey) -> None:
        self.quiet_sessions[session] = key

    def leave_quiet(self, session: FetchSession) -> None:
        if self.quiet_sessions.pop(session, None) is not None:
            self._caught_up_while_quiet(session)

    def _wake_quiet(self) -> None:
        """Something a fetch reads moved (records, the high watermark, the leadership):
        every session that skipped this partition reads it again, at once."""
        sessions, self.quiet_sessions = self.quiet_sessions, {}
        for session, key in sessions.items():
            self._caught_up_while_quiet(session)
            session.woken(key, self)

    def _caught_up_while_quiet(self, session: FetchSession) -> None:
        """While quiet, the follower had the whole log at each fetch of its session."""
        replica = self.remote_replicas.get(session.replica_id)
        if replica is not None:
            replica.caught_up_at(session.last_fetch_ms)


def _wake(waiters: list[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)


def _with_epoch(found: TimestampAndOffset, leader_epoch: int) -> TimestampAndOffset:
    if found.leader_epoch is not None:
        return found
    return TimestampAndOffset(found.timestamp, found.offset, leader_epoch)
