"""The fetchers of a broker (Kafka's ReplicaFetcherManager): `num.replica.fetchers` per
source broker, each partition followed by exactly one of its leader's, chosen by a
stable hash of the partition so that it stays with the same fetcher."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig
    from ..metadata.cache import MetadataCache
    from ..replica.partition import Partition
    from .fetcher import ReplicaFetcher

FetcherKey = tuple[int, int]  # (source broker id, fetcher id)


class ReplicaFetcherManager:
    def __init__(
        self,
        local_broker_id: int,
        metadata: MetadataCache,
        config: Callable[[], BrokerConfig],
    ) -> None:
        self.local_broker_id = local_broker_id
        self._metadata = metadata
        self._config = config
        self.fetchers: dict[FetcherKey, ReplicaFetcher] = {}
        self._assigned: dict[tuple[str, int], FetcherKey] = {}
        self._stopping: set[asyncio.Task[None]] = set()
        # Shut down (the broker is stopping): nothing is followed again.
        self._closed = False

    def fetcher_of(self, partition: Partition) -> ReplicaFetcher | None:
        key = self._assigned.get((partition.topic, partition.index))
        return self.fetchers.get(key) if key is not None else None

    def add_partition(self, partition: Partition) -> None:
        """Follow `partition` from its leader (moving it off another leader's fetcher)."""
        if self._closed:
            return
        count = self._config()["num.replica.fetchers"]
        # Kafka's abs(31 * topic.hashCode + partition) % num.replica.fetchers, with a
        # hash that is the same in every process.
        fetcher_id = (31 * zlib.crc32(partition.topic.encode()) + partition.index) % count
        key = (partition.leader_id, fetcher_id)
        tp = (partition.topic, partition.index)
        previous = self._assigned.get(tp)
        if previous is not None and previous != key:
            self._remove_from(previous, partition)
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self._start_fetcher(partition.leader_id, fetcher_id)
            self.fetchers[key] = fetcher
        self._assigned[tp] = key
        fetcher.add(partition)

    def remove_partition(self, partition: Partition) -> None:
        key = self._assigned.pop((partition.topic, partition.index), None)
        if key is not None:
            self._remove_from(key, partition)

    def _remove_from(self, key: FetcherKey, partition: Partition) -> None:
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            return
        fetcher.remove(partition)
        if not fetcher.states:
            # A fetcher with nothing to follow goes, as Kafka's shutdownIdleFetcherThreads.
            del self.fetchers[key]
            task = asyncio.get_running_loop().create_task(fetcher.stop())
            self._stopping.add(task)
            task.add_done_callback(self._stopping.discard)

    def _start_fetcher(self, source_broker_id: int, fetcher_id: int) -> ReplicaFetcher:
        from .fetcher import ReplicaFetcher  # with the first partition followed

        def endpoint() -> tuple[str, int] | None:
            found = self._metadata.endpoint(
                source_broker_id, self._config().inter_broker_listener_name
            )
            return (found.host, found.port) if found is not None else None

        return ReplicaFetcher(
            source_broker_id, fetcher_id, self.local_broker_id, endpoint, self._config
        )

    async def shutdown(self) -> None:
        self._closed = True
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        self._assigned.clear()
        for fetcher in fetchers:
            await fetcher.stop()
        if self._stopping:
            await asyncio.wait(self._stopping)
