"""The follower's side of an incremental fetch session (KIP-227; Kafka's
FetchSessionHandler).

A follower fetches every partition it follows from a leader, twice a second when idle
(replica.fetch.wait.max.ms). Listing them all each time costs both brokers in proportion
to the partitions, whether anything moved or not: at thousands of partitions, an idle
cluster kept its cores busy building, reading and answering fetches of nothing. In a
session the leader remembers what was last asked; each fetch names only the partitions
whose position (or epoch, or log start) changed, and those to forget, and the answer
names only the partitions with news.

The handler keeps what the leader's session holds as this side last knew it. A fetch
that failed on the wire leaves that unknown: the next one is a full fetch that closes
the session and opens another (Kafka's nextCloseExisting).
"""

from __future__ import annotations

from dataclasses import dataclass

from brook.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]

# Kafka's FetchMetadata: no session, a full fetch that opens one, and none to close.
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What a fetch asks of one partition; the leader's session keeps it."""

    fetch_offset: int
    log_start_offset: int
    current_leader_epoch: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class SessionFetch:
    """One fetch's session fields and partitions."""

    session_id: int
    epoch: int
    # The partitions the request names: all of them in a full fetch, only the new and
    # the changed in an incremental one.
    partitions: dict[TopicPartition, PartitionFetch]
    forgotten: list[TopicPartition]
    # Every partition the leader will read for this fetch (what the session holds after it).
    wanted: dict[TopicPartition, PartitionFetch]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FetchSessionHandler:
    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        # What the leader's session holds, as of the last answered fetch.
        self._session: dict[TopicPartition, PartitionFetch] = {}

    def build(self, wanted: dict[TopicPartition, PartitionFetch]) -> SessionFetch:
        if self.epoch == INITIAL_EPOCH:
            return SessionFetch(self.session_id, INITIAL_EPOCH, wanted, [], wanted)
        session = self._session
        # The fetcher hands the same PartitionFetch again while a partition's position
        # stays (fetcher.py): `is` spares comparing thousands of them field by field.
        changed = {
            key: fetch
            for key, fetch in wanted.items()
            if (last := session.get(key)) is not fetch and last != fetch
        }
        forgotten = [key for key in session if key not in wanted]
        return SessionFetch(self.session_id, self.epoch, changed, forgotten, wanted)

    def handle_response(self, sent: SessionFetch, error_code: int, session_id: int) -> bool:
        """Take the leader's answer to `sent`; False when the fetch was refused (the
        next one is full, and the answer holds no partitions)."""
        if error_code == ErrorCode.fetch_session_id_not_found:
            # Evicted from the leader's cache (or the leader restarted): open another.
            self._reset(INVALID_SESSION_ID)
            return False
        if error_code != ErrorCode.none:
            # An epoch out of step, or any other refusal: start over with a full
            # fetch, which closes this session on the leader.
            self._reset(self.session_id)
            return False
        if sent.full:
            # A leader that keeps no session for us answers 0: every fetch stays full.
            self.session_id = session_id
            self.epoch = INITIAL_EPOCH if session_id == INVALID_SESSION_ID else 1
        else:
            self.epoch = _next_epoch(self.epoch)
        self._session = sent.wanted  # the fetcher builds a new dict for every fetch
        return True

    def connection_lost(self) -> None:
        """What the leader's session holds is unknown: the next fetch is full, and closes
        the old session on the leader (which otherwise waits for eviction)."""
        self._reset(self.session_id)

    def _reset(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._session = {}


def _next_epoch(epoch: int) -> int:
    # Epochs run 1..2^31-1 and wrap to 1 (0 opens a session, -1 closes one).
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1
