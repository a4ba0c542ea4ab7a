"""Group configs in ZooKeeper: /config/groups/<group> ({"version": 1, "config": {...}}),
each change written conditionally and announced by a sequential /config/changes znode
naming "groups/<group>", as Kafka's ZooKeeper mode did for its other config entities.

Every broker reads all group configs at start and again whenever a notification naming
groups/ appears (config_change_watch.py), so the coordinator of a group, wherever it
moves, has the group's configs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..groups.group_configs import GroupConfigs
from . import znodes
from .client import ZooKeeperClient
from .config_change_watch import ConfigChangeWatch
from .kazoo_api import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger("brook.zookeeper.group_configs")

GROUPS_PATH = f"{znodes.CONFIG}/groups"


class ZkGroupConfigStore:
    def __init__(self, client: ZooKeeperClient, configs: GroupConfigs) -> None:
        self._client = client
        self._configs = configs
        self._watch = ConfigChangeWatch(
            client, ("groups",), "reading group configs from ZooKeeper", self._reload
        )

    async def start(self) -> None:
        await self._watch.start()

    def close(self) -> None:
        self._watch.close()

    async def _reload(self) -> None:
        self._configs.update(await self._read_all())

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
