"""Group configs in ZooKeeper: /config/groups/<group> ({"version": 1, "config": {...}}),
each change written conditionally and announced by a sequential /config/changes znode
naming "groups/<group>", as Kafka's ZooKeeper mode did for its other config entities.

Every broker reads all group configs at start and again whenever a notification naming
groups/ appears (what is read replaces what was held, so a missed or repeated
notification changes nothing), so the coordinator of a group, wherever it moves, has
the group's configs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..groups.group_configs import GroupConfigs
from . import znodes
from .client import SessionState, ZooKeeperClient
from .kazoo_api import BadVersionError, NodeExistsError, NoNodeError, WatchedEvent
from .serial_job import SerialJob

log = logging.getLogger("brook.zookeeper.group_configs")

GROUPS_PATH = f"{znodes.CONFIG}/groups"


class ZkGroupConfigStore:
    def __init__(self, client: ZooKeeperClient, configs: GroupConfigs) -> None:
        self._client = client
        self._configs = configs
        self._last_change: str | None = None
        self._job = SerialJob("reading group configs from ZooKeeper", self._refresh)
        client.add_session_listener(self._session_changed)

    async def start(self) -> None:
        self._job.schedule()
        await self._job.idle()

    def close(self) -> None:
        self._job.close()

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
        if self._last_change is not None and not await self._names_a_group(children):
            return
        self._last_change = children[-1] if children else ""
        self._configs.update(await self._read_all())

    async def _names_a_group(self, children: list[str]) -> bool:
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
            found = found or (entity is not None and entity[0] == "groups")
        return found

    async def _read(self, path: str) -> tuple[dict[str, str], int]:
        """The group's config and the znode version (-1: no znode)."""
        try:
            data, stat = await self._client.get(path)
        except NoNodeError:
            return {}, -1
        try:
            return znodes.decode_entity_config(data), stat.version
        except ValueError:
            log.error("Unreadable group config znode %s: %r", path, data[:200])
            return {}, stat.version

    async def _read_all(self) -> dict[str, dict[str, str]]:
        try:
            groups = await self._client.get_children(GROUPS_PATH)
        except NoNodeError:
            return {}
        found = {}
        for group in groups:
            config, _ = await self._read(f"{GROUPS_PATH}/{group}")
            if config:
                found[group] = config
        return found

    async def replace(self, group_id: str, config: Mapping[str, str]) -> None:
        znode = f"{GROUPS_PATH}/{group_id}"
        data = znodes.encode_entity_config(config)
        while True:  # a conditional write, again if another writer came between
            _, version = await self._read(znode)
            try:
                if version < 0:
                    await self._client.create(znode, data, makepath=True)
                else:
                    await self._client.set(znode, data, version=version)
                break
            except (BadVersionError, NodeExistsError):
                continue
        await self._client.create(
            f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}",
            znodes.encode_config_change("groups", group_id),
            sequence=True,
            makepath=True,
        )
        # Read back at once, so the answer to the request is in force here; the other
        # brokers follow the notification.
        self._configs.update(await self._read_all())
