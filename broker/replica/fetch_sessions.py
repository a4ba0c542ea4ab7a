"""Incremental fetch sessions (KIP-227).

A client opens a session with a full fetch (epoch 0); later fetches (epoch 1, 2, ...)
name only the partitions whose position changed and the partitions to forget, and the
response leaves out partitions with nothing new. Epoch -1 is a fetch without a
session. The cache holds up to `max.incremental.fetch.session.cache.slots` (1000)
sessions and evicts the least recently used.

A follower's session also keeps its quiet partitions: those it found, twice in a row,
caught up with nothing to read and nothing moved. Its later fetches do not read them at
all (an idle cluster of thousands of partitions otherwise spent most of a core a broker
reading each of them twice a second to answer nothing) until the partition says that
something moved (an append, its high watermark, its leadership: Partition.wake_quiet),
the follower names it again, or QUIET_FULL_PASS_MS pass, after which every partition is
read once more (what no notice reaches, such as a log start moved by retention, is then
told within that time). The follower was caught up at each fetch of the session while a
partition stayed quiet: the partition counts it so (last_fetch_ms) when it leaves the
quiet set and before it checks its ISR for laggards.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import OrderedDict
from typing import Protocol

from brook.protocol.errors import (
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
)

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000
# How long a follower's session may leave a quiet partition unread (see above).
QUIET_FULL_PASS_MS = 10_000


# Plain slotted classes, not dataclasses: each dataclass costs start-up time to create.


class CachedPartition:
    __slots__ = ("fetch_offset", "fetcher_log_start_offset", "high_watermark", "idle_fetch",
                 "last_stable_offset", "leader_epoch", "log_start_offset",
                 "max_bytes")  # fmt: skip

    def __init__(
        self,
        fetch_offset: int,
        max_bytes: int,
        leader_epoch: int = -1,
        fetcher_log_start_offset: int = -1,
    ) -> None:
        # What the client last sent: an incremental fetch that leaves the partition out
        # fetches it as before (a follower's log start and the leader epoch it checks
        # included, as Kafka's CachedPartition keeps them).
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        self.leader_epoch = leader_epoch
        self.fetcher_log_start_offset = fetcher_log_start_offset
        # What the client was last told; a change makes the partition part of the next
        # incremental response even without new records.
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1
        # A follower's fetch that found nothing to read, with the partition's state then
        # (broker/apis/fetch.py): the same fetch of the same state needs no read again.
        self.idle_fetch: tuple[int, ...] | None = None


PartitionKey = tuple[str, int]


class QuietPartition(Protocol):
    """A partition a session keeps quiet (broker/replica/partition.py's Partition)."""

    def join_quiet(self, session: FetchSession, key: PartitionKey) -> None: ...
    def leave_quiet(self, session: FetchSession) -> None: ...


class FetchSession:
    __slots__ = ("epoch", "full_pass_due_ms", "last_fetch_ms", "left_quiet", "partitions",
                 "quiet", "replica_id", "session_id", "waiter")  # fmt: skip

    def __init__(
        self, session_id: int, epoch: int, partitions: OrderedDict[PartitionKey, CachedPartition]
    ) -> None:
        self.session_id = session_id
        self.epoch = epoch
        self.partitions = partitions
        # The follower whose session this is (-1: a consumer's), and when it last fetched.
        self.replica_id = -1
        self.last_fetch_ms = 0
        # The partitions its fetches skip (see above), and when all are read again.
        self.quiet: dict[PartitionKey, QuietPartition] = {}
        # How many have left the quiet set so far: a parked fetch that sees it move reads
        # again what it reads.
        self.left_quiet = 0
        self.full_pass_due_ms = 0
        # The parked fetch of this session, which a partition leaving the quiet set wakes.
        self.waiter: asyncio.Future[None] | None = None

    def fetched(self, replica_id: int, now_ms: int) -> None:
        """A fetch of this session arrived (after the partitions it names left the
        quiet set, which counts them caught up as of the fetch before)."""
        self.replica_id = replica_id
        self.last_fetch_ms = now_ms
        if now_ms >= self.full_pass_due_ms:
            self.clear_quiet()
            self.full_pass_due_ms = now_ms + QUIET_FULL_PASS_MS

    def make_quiet(self, key: PartitionKey, partition: QuietPartition) -> None:
        current = self.quiet.get(key)
        if current is partition:
            return
        if current is not None:
            self.unquiet(key)  # a partition object of the past under the same key
        self.quiet[key] = partition
        partition.join_quiet(self, key)

    def unquiet(self, key: PartitionKey) -> None:
        partition = self.quiet.pop(key, None)
        if partition is not None:
            self.left_quiet += 1
            partition.leave_quiet(self)

    def woken(self, key: PartitionKey, partition: QuietPartition) -> None:
        """`partition`, quiet under `key`, moved (it has forgotten this session already)."""
        if self.quiet.get(key) is not partition:
            return
        del self.quiet[key]
        self.left_quiet += 1
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear_quiet(self) -> None:
        quiet, self.quiet = self.quiet, {}
        self.left_quiet += len(quiet)
        for partition in quiet.values():
            partition.leave_quiet(self)


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.max_sessions = max_sessions
        # A random first id (as Kafka's), from os.urandom: the random module costs start-up time.
        self._ids = itertools.count(1 + int.from_bytes(os.urandom(3), "big") % (1 << 20))

    def new_session(self) -> FetchSession:
        if len(self.sessions) >= self.max_sessions:
            _, evicted = self.sessions.popitem(last=False)
            evicted.clear_quiet()
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, INITIAL_EPOCH + 1, OrderedDict())
        self.sessions[session_id] = session
        return session

    def close(self, session_id: int) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            session.clear_quiet()

    def resume(self, session_id: int, epoch: int) -> FetchSession:
        """The session of an incremental fetch, advancing its epoch."""
        session = self.sessions.get(session_id)
        if session is None:
            raise FetchSessionIdNotFoundError(f"Fetch session {session_id} not found")
        if epoch != session.epoch:
            raise InvalidFetchSessionEpochError(
                f"Fetch session {session_id} expected epoch {session.epoch}, got {epoch}"
            )
        session.epoch += 1
        self.sessions.move_to_end(session_id)
        return session
