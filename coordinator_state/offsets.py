"""Committed offsets, and the replay of the offset commits in `__consumer_offsets`.

Kafka's OffsetMetadataManager.replay: a commit written by a producer (TxnOffsetCommit,
inside a transaction) is pending until that producer's end-transaction marker; a COMMIT
applies every commit the producer left pending, in the order they were written, and an
ABORT drops them. Any other commit (or tombstone, which deletes) applies at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from brook.protocol.coordinator_records import (
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    OffsetCommitKey,
    OffsetCommitValue,
)


@dataclass
class CommittedOffset:
    """One partition's committed offset, as a group's OffsetFetch answers it."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = NO_TIMESTAMP

    @classmethod
    def of(cls, value: OffsetCommitValue) -> CommittedOffset:
        return cls(
            value.offset,
            value.leader_epoch,
            value.metadata,
            value.commit_timestamp,
            value.expire_timestamp,
        )


# Told of every change replay makes: the (group, topic, partition), its committed offset
# (None: deleted) and the log offset of the record that made the change.
OffsetChange = Callable[[OffsetCommitKey, CommittedOffset | None, int], None]


class OffsetCommitReplay:
    """The offset commits of one `__consumer_offsets` partition, replayed in log order;
    every change is handed to `apply`, which keeps the committed offsets as its owner
    needs them (the broker in its groups, the audit in rows)."""

    def __init__(self, apply: OffsetChange) -> None:
        self._apply = apply
        # Commits waiting for their producer's marker, by producer id, in log order.
        self._pending: dict[int, dict[OffsetCommitKey, tuple[CommittedOffset | None, int]]] = {}

    def replay(
        self, key: OffsetCommitKey, value: OffsetCommitValue | None, producer_id: int, offset: int
    ) -> None:
        """The record at log `offset`, written by `producer_id` (NO_PRODUCER_ID: not in a
        transaction); a None value is a tombstone."""
        committed = None if value is None else CommittedOffset.of(value)
        if producer_id != NO_PRODUCER_ID:
            self._pending.setdefault(producer_id, {})[key] = (committed, offset)
        else:
            self._apply(key, committed, offset)

    def replay_end_transaction_marker(self, producer_id: int, committed: bool) -> None:
        waiting = self._pending.pop(producer_id, {})
        if committed:
            for key, (value, offset) in waiting.items():
                self._apply(key, value, offset)

    def has_pending(self, key: OffsetCommitKey) -> bool:
        """Whether a transaction not yet ended has written a commit of this key (Kafka
        answers its OffsetFetch with UNSTABLE_OFFSET_COMMIT meanwhile)."""
        return any(key in waiting for waiting in self._pending.values())

    def pending(self) -> Iterator[tuple[int, OffsetCommitKey, CommittedOffset | None, int]]:
        """(producer id, key, commit, log offset) of every commit still waiting."""
        for producer_id, waiting in self._pending.items():
            for key, (value, offset) in waiting.items():
                yield producer_id, key, value, offset

    def clear(self) -> None:
        self._pending.clear()
