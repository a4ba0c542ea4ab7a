"""The live brokers, from /brokers/ids into the metadata cache (Kafka's controller watches
the same with its BrokerChangeHandler and BrokerModificationsHandler; here every broker
watches, since every broker answers Metadata from its own cache).

A broker's znode appearing becomes a RegisterBrokerRecord, its data changing (new
listeners) a new one, and its going (a clean stop, or its session expiring) an
UnregisterBrokerRecord, each applied through the MetadataPublisher on the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from ..metadata.publisher import MetadataPublisher
from ..metadata.records import RegisterBrokerRecord, UnregisterBrokerRecord
from . import znodes
from .client import ZooKeeperClient
from .kazoo_api import EventType, NoNodeError, WatchedEvent
from .serial_job import SerialJob

log = logging.getLogger("brook.zookeeper.brokers")


class BrokerWatcher:
    def __init__(self, client: ZooKeeperClient, publisher: MetadataPublisher) -> None:
        self._client = client
        self._publisher = publisher
        self._known: dict[int, RegisterBrokerRecord] = {}
        # Brokers whose znode data may have changed since it was read.
        self._stale: set[int] = set()
        self._job = SerialJob("reading /brokers/ids", self._refresh)

    @property
    def live(self) -> list[int]:
        return sorted(self._known)

    async def start(self) -> None:
        self._job.schedule()
        await self._job.idle()

    def schedule(self) -> None:
        self._job.schedule()

    def close(self) -> None:
        self._job.close()

    def _children_changed(self, event: WatchedEvent) -> None:
        # Also a lost connection (EventType.NONE): kazoo drops its watches then, and a
        # read once reconnected sets them again.
        self._job.schedule()

    def _data_changed(self, event: WatchedEvent) -> None:
        if event.type == EventType.NONE or event.path is None:
            self._stale.update(self._known)
        else:
            broker_id = _broker_id(event.path.rsplit("/", 1)[-1])
            if broker_id is not None:
                self._stale.add(broker_id)
        self._job.schedule()

    async def _refresh(self) -> None:
        children = await self._client.get_children(znodes.BROKER_IDS, self._children_changed)
        ids = {i for i in map(_broker_id, children) if i is not None}
        to_read = sorted((ids - self._known.keys()) | (self._stale & ids))
        self._stale.difference_update(to_read)
        read = await asyncio.gather(*(self._read(broker_id) for broker_id in to_read))
        records: list[RegisterBrokerRecord | UnregisterBrokerRecord] = [
            record
            for broker_id, record in zip(to_read, read, strict=True)
            if record is not None and record != self._known.get(broker_id)
        ]
        gone = sorted(self._known.keys() - ids)
        records += [UnregisterBrokerRecord(broker_id) for broker_id in gone]
        if not records:
            return
        self._publisher.apply(records)
        joined = [r.broker_id for r in records if isinstance(r, RegisterBrokerRecord)]
        for record in records:
            if isinstance(record, RegisterBrokerRecord):
                self._known[record.broker_id] = record
            else:
                self._known.pop(record.broker_id, None)
        log.info(
            "Live brokers %s (registered or changed: %s; gone: %s)",
            _ids(self._known),
            _ids(joined),
            _ids(gone),
        )

    async def _read(self, broker_id: int) -> RegisterBrokerRecord | None:
        try:
            data, _ = await self._client.get(znodes.broker_id_path(broker_id), self._data_changed)
        except NoNodeError:
            return None  # gone meanwhile: the children watch says so next
        try:
            return znodes.decode_broker(broker_id, data)
        except ValueError as exc:
            # Someone wrote what no broker writes: leave that broker out, say why.
            log.error("%s; broker %d is left out of the metadata", exc, broker_id)
            return None


def _broker_id(name: str) -> int | None:
    return int(name) if name.isdigit() else None


def _ids(ids: Iterable[int]) -> str:
    listed = ", ".join(str(i) for i in sorted(ids))
    return listed or "none"
