"""Config entities kept in ZooKeeper, read again when Kafka's change notifications name them.

Kafka's ZooKeeper mode announces each change of a config entity (/config/<type>/<name>) with
a sequential /config/changes/config_change_ znode naming "<type>/<name>". A reader watches
/config/changes and, when a notification newer than the last it saw names one of its
entity types, reads its entities again (all of them: they are few, and what is read
replaces what was held, so a missed or repeated notification changes nothing). A new
ZooKeeper session lost the watch: it reads everything again. Client quotas and group
configs are read so (quota_znodes.py, group_config_znodes.py), and written with the
conditional write and the notification below.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from . import znodes
from .client import SessionState, ZooKeeperClient
from .kazoo_api import BadVersionError, NodeExistsError, NoNodeError, WatchedEvent
from .serial_job import SerialJob

log = logging.getLogger("brook.zookeeper.configs")


class ConfigChangeWatch:
    def __init__(
        self,
        client: ZooKeeperClient,
        entity_types: tuple[str, ...],
        what: str,
        reload: Callable[[], Awaitable[None]],
    ) -> None:
        self._client = client
        self._entity_types = entity_types
        self._reload = reload
        self._last_change: str | None = None
        self._job = SerialJob(what, self._refresh)
        client.add_session_listener(self._session_changed)

    async def start(self) -> None:
        self._job.schedule()
        await self._job.idle()

    def close(self) -> None:
        self._job.close()

    async def idle(self) -> None:
        await self._job.idle()

    def _session_changed(self, state: SessionState, new_session: bool) -> None:
        if state is SessionState.CONNECTED and new_session:
            self._last_change = None  # the watches went with the old session
            self._job.schedule()

    def _changes(self, event: WatchedEvent) -> None:
        self._job.schedule()

    async def _refresh(self) -> None:
        children = sorted(
            child
            for child in await self._client.get_children(znodes.CONFIG_CHANGES, self._changes)
            if child.startswith(znodes.CONFIG_CHANGE_PREFIX)
        )
        if self._last_change is not None and not await self._names_an_entity(children):
            return
        self._last_change = children[-1] if children else ""
        await self._reload()

    async def _names_an_entity(self, children: list[str]) -> bool:
        """Whether a notification newer than the last one seen names an entity type read
        here (and remember the newest)."""
        assert self._last_change is not None
        found = False
        for child in children:
            if child <= self._last_change:
                continue
            self._last_change = child
            try:
                data, _ = await self._client.get(f"{znodes.CONFIG_CHANGES}/{child}")
                entity = znodes.decode_config_change(data)
            except (NoNodeError, ValueError):
                continue
            found = found or (entity is not None and entity[0] in self._entity_types)
        return found


async def read_entity_config(client: ZooKeeperClient, path: str) -> tuple[dict[str, str], int]:
    """A config znode's config and version (-1: no znode); an unreadable one reads as
    empty, logged."""
    try:
        data, stat = await client.get(path)
    except NoNodeError:
        return {}, -1
    try:
        return znodes.decode_entity_config(data), stat.version
    except ValueError:
        log.error("Unreadable config znode %s: %r", path, data[:200])
        return {}, stat.version


async def write_entity_config(
    client: ZooKeeperClient, path: str, change: Callable[[dict[str, str]], dict[str, str]]
) -> None:
    """`change` applied to the znode's config and written conditionally: again, from what
    is there then, if another writer came between."""
    while True:
        config, version = await read_entity_config(client, path)
        data = znodes.encode_entity_config(change(config))
        try:
            if version < 0:
                await client.create(path, data, makepath=True)
            else:
                await client.set(path, data, version=version)
            return
        except (BadVersionError, NodeExistsError):
            continue


async def announce_change(client: ZooKeeperClient, entity_type: str, name: str) -> None:
    """The change notification every broker's watch reads (Kafka's version 2)."""
    await client.create(
        f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
        znodes.encode_config_change(entity_type, name),
        sequence=True,
        makepath=True,
    )
