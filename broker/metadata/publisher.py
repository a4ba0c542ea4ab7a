"""The one path by which metadata changes: MetadataPublisher.apply, on the event loop.

A change (a list of records) is made real in an order that lets it fail whole: the
replica manager first makes the logs it needs (and removes them again if any cannot be
made), then the store keeps the change, and only then does the cache show it and do the
logs of removed topics go, so no request ever sees a topic whose logs or records are
missing, and a change that cannot be kept removes nothing. The publisher belongs to
the thread that made it (the broker's loop): a change found elsewhere (a ZooKeeper watch,
later) is handed to the loop first, so changes never interleave.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .cache import MetadataCache
from .records import MetadataRecord
from .store import MetadataStore

if TYPE_CHECKING:
    from ..replica.replica_manager import ReplicaManager


class MetadataPublisher:
    def __init__(
        self, cache: MetadataCache, store: MetadataStore, replicas: ReplicaManager
    ) -> None:
        self._cache = cache
        self._store = store
        self._replicas = replicas
        self._thread = threading.get_ident()
        # Told of every change once it is real (the broker starts its log cleaner with
        # the first compacted log this way).
        self.listeners: list[Callable[[Sequence[MetadataRecord]], None]] = []

    def apply(self, records: Sequence[MetadataRecord]) -> None:
        """Apply one change whole, or raise and leave everything as it was."""
        if threading.get_ident() != self._thread:
            raise RuntimeError("metadata changes are applied on the broker's loop only")
        change = self._replicas.prepare(records, self._cache)
        try:
            self._store.append(records)
        except BaseException:
            change.undo()
            raise
        self._cache.apply(records)
        change.complete()
        for listener in self.listeners:
            listener(records)
