"""The one path by which metadata changes: MetadataPublisher.apply, on the event loop.

A change (a list of records) is made real in an order that lets it fail whole: the
replica manager first makes the logs it needs (and removes them again if any cannot be
made), then the store keeps the change, and only then does the cache show it and do the
logs of removed topics go, so no request ever sees a topic whose logs or records are
missing, and a change that cannot be kept removes nothing. The publisher belongs to
the thread that made it (the broker's loop): a change found elsewhere (a ZooKeeper watch,
later) is handed to the loop first, so changes never interleave.

A CreateTopics (of up to thousands of new partitions) is applied in slices
(apply_in_slices): its logs are made a few at a time, the loop serving other requests in
between, and it becomes visible whole at the end as any other. What runs in between
cannot see or touch its topics: they are in no cache yet, and creating one of the same
name is refused (topics_in_progress).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .cache import MetadataCache
from .records import MetadataRecord, TopicRecord
from .store import MetadataStore

if TYPE_CHECKING:
    from ..replica.replica_manager import ReplicaChange, ReplicaManager


class MetadataPublisher:
    def __init__(
        self, cache: MetadataCache, store: MetadataStore, replicas: ReplicaManager
    ) -> None:
        self._cache = cache
        self._store = store
        self._replicas = replicas
        self._thread = threading.get_ident()
        # Changes applied in slices take turns; the topics they are creating meanwhile.
        self._sliced = asyncio.Lock()
        self._creating: set[str] = set()
        # Told of every change once it is real (the broker starts its log cleaner with
        # the first compacted log this way).
        self.listeners: list[Callable[[Sequence[MetadataRecord]], None]] = []

    @property
    def topics_in_progress(self) -> set[str]:
        """Names of the topics that changes being applied in slices are creating."""
        return set(self._creating)

    def apply(self, records: Sequence[MetadataRecord]) -> None:
        """Apply one change whole, or raise and leave everything as it was."""
        if threading.get_ident() != self._thread:
            raise RuntimeError("metadata changes are applied on the broker's loop only")
        self._publish(records, self._replicas.prepare(records, self._cache))

    async def apply_in_slices(self, records: Sequence[MetadataRecord]) -> None:
        """apply, with the logs made a slice at a time while the loop serves others: for a
        change of many partitions (a CreateTopics of thousands). Such changes take turns;
        a change applied meanwhile by `apply` touches other topics (the callers refuse a
        topic in topics_in_progress), and what it changes stays true for this one, which
        makes new partitions only."""
        if threading.get_ident() != self._thread:
            raise RuntimeError("metadata changes are applied on the broker's loop only")
        names = [record.name for record in records if isinstance(record, TopicRecord)]
        async with self._sliced:
            self._creating.update(names)
            try:
                change = await self._replicas.prepare_in_slices(records, self._cache)
                self._publish(records, change)
            finally:
                self._creating.difference_update(names)

    def _publish(self, records: Sequence[MetadataRecord], change: ReplicaChange) -> None:
        try:
            self._store.append(records)
        except BaseException:
            change.undo()
            raise
        self._cache.apply(records)
        change.complete()
        for listener in self.listeners:
            listener(records)
