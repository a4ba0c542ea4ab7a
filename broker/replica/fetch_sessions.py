"""Incremental fetch sessions (KIP-227).

A client opens a session with a full fetch (epoch 0); later fetches (epoch 1, 2, ...)
name only the partitions whose position changed and the partitions to forget, and the
response leaves out partitions with nothing new. Epoch -1 is a fetch without a
session. The cache holds up to `max.incremental.fetch.session.cache.slots` (1000)
sessions and evicts the least recently used.
"""

from __future__ import annotations

import itertools
import os
from collections import OrderedDict

from brook.protocol.errors import (
    FetchSessionIdNotFoundError,
    InvalidFetchSessionEpochError,
)

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_SESSIONS = 1000


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


class FetchSession:
    __slots__ = ("epoch", "partitions", "session_id")

    def __init__(
        self, session_id: int, epoch: int, partitions: OrderedDict[PartitionKey, CachedPartition]
    ) -> None:
        self.session_id = session_id
        self.epoch = epoch
        self.partitions = partitions


class FetchSessionCache:
    def __init__(self, max_sessions: int = MAX_SESSIONS) -> None:
        self.sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self.max_sessions = max_sessions
        # A random first id (as Kafka's), from os.urandom: the random module costs start-up time.
        self._ids = itertools.count(1 + int.from_bytes(os.urandom(3), "big") % (1 << 20))

    def new_session(self) -> FetchSession:
        if len(self.sessions) >= self.max_sessions:
            self.sessions.popitem(last=False)
        session_id = next(self._ids) & 0x7FFFFFFF or next(self._ids)
        session = FetchSession(session_id, INITIAL_EPOCH + 1, OrderedDict())
        self.sessions[session_id] = session
        return session

    def close(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

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
