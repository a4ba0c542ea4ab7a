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
import uuid
from dataclasses import dataclass, field

from brook.protocol.errors import (
    ErrorCode,
    InvalidRequestError,
    KafkaError,
    NotEnoughReplicasError,
    OffsetOutOfRangeError,
    PolicyViolationError,
)
from brook.storage.errors import KafkaStorageError
from brook.storage.log import AppendInfo, FetchDataInfo, Log
from brook.storage.log_segment import TimestampAndOffset
from brook.storage.log_validator import DEFAULT_MAX_DECOMPRESSED_BYTES, AppendOrigin
from brook.storage.producer_state import ProducerStateEntry

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


class FencedLeaderEpochError(KafkaError):
    error_code = ErrorCode.fenced_leader_epoch


class UnknownLeaderEpochError(KafkaError):
    error_code = ErrorCode.unknown_leader_epoch


class NotLeaderOrFollowerError(KafkaError):
    error_code = ErrorCode.not_leader_or_follower


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
    """What the leader knows of a follower: how far its log reaches."""

    broker_id: int
    log_end_offset: int = -1


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
    # Fetches parked until the high watermark moves (long polling).
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # acks=all produces waiting for the high watermark to pass their offset.
    commit_waiters: list[tuple[int, asyncio.Future[None]]] = field(default_factory=list)
    remote_replicas: dict[int, ReplicaState] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._track_remote_replicas()
        self._maybe_increment_high_watermark()

    def _track_remote_replicas(self) -> None:
        self.remote_replicas = {
            broker_id: self.remote_replicas.get(broker_id, ReplicaState(broker_id))
            for broker_id in self.replicas
            if broker_id != self.local_broker_id
        }

    def update_registration(
        self, replicas: list[int], isr: list[int], leader_id: int, leader_epoch: int
    ) -> None:
        """Take a new assignment, leader or ISR from the metadata (Kafka's makeLeader /
        makeFollower): waiters that only the old leader could answer are answered now."""
        was_leader = self.role is ReplicaRole.LEADER
        self.replicas, self.isr = replicas, isr
        self.leader_id, self.leader_epoch = leader_id, leader_epoch
        self._track_remote_replicas()
        if was_leader and self.role is not ReplicaRole.LEADER:
            self.fail_waiters(
                NotLeaderOrFollowerError(
                    f"Broker {self.local_broker_id} no longer leads {self.name}"
                )
            )
        else:
            self._maybe_increment_high_watermark()
            self.wake_waiters()  # parked fetches answer with the new epoch

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

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int) -> None:
        """A follower fetched from `fetch_offset`: it has everything below it."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None:
            raise NotLeaderOrFollowerError(
                f"Replica {replica_id} is not a replica of {self.name} on broker"
                f" {self.local_broker_id}"
            )
        replica.log_end_offset = fetch_offset
        self._maybe_increment_high_watermark()

    def _maybe_increment_high_watermark(self) -> None:
        """The high watermark is the smallest log end offset among the in-sync
        replicas; it never moves back."""
        if self.role is not ReplicaRole.LEADER or self.is_offline:
            return
        new_high_watermark = self.log.log_end_offset
        for broker_id in self.isr:
            replica = self.remote_replicas.get(broker_id)
            if replica is not None:
                new_high_watermark = min(new_high_watermark, replica.log_end_offset)
        if new_high_watermark <= self.log.high_watermark:
            return
        self.log.high_watermark = new_high_watermark
        self._complete_commit_waiters()
        self.wake_waiters()

    def _complete_commit_waiters(self) -> None:
        if not self.commit_waiters:
            return
        high_watermark = self.high_watermark
        pending = []
        for required_offset, waiter in self.commit_waiters:
            if waiter.done():
                continue
            if required_offset <= high_watermark:
                waiter.set_result(None)
            else:
                pending.append((required_offset, waiter))
        self.commit_waiters = pending

    def fail_waiters(self, error: KafkaError) -> None:
        """This replica no longer serves: answer everyone who waits on it."""
        waiters, self.commit_waiters = self.commit_waiters, []
        for _, waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)
        self.wake_waiters()

    # --- reading ----------------------------------------------------------------------

    def read_records(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
        current_leader_epoch: int = -1,
        replica_id: int = CONSUMER_REPLICA_ID,
    ) -> FetchDataInfo:
        """Fetch: whole batches from `fetch_offset`, as far as `isolation` allows, with
        the partition's offsets as they were at the read.

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
        )
        if replica_id >= 0:
            self.update_follower_fetch_state(replica_id, fetch_offset)
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
        return log.log_start_offset

    # --- long polls -------------------------------------------------------------------

    def add_waiter(self, waiter: asyncio.Future[None]) -> None:
        self.waiters.append(waiter)

    def wake_waiters(self) -> None:
        if not self.waiters:
            return
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _with_epoch(found: TimestampAndOffset, leader_epoch: int) -> TimestampAndOffset:
    if found.leader_epoch is not None:
        return found
    return TimestampAndOffset(found.timestamp, found.offset, leader_epoch)
