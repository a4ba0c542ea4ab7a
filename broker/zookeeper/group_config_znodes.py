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
from .config_change_watch import (
    ConfigChangeWatch,
    announce_change,
    read_entity_config,
    write_entity_config,
)
from .kazoo_api import NoNodeError

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

    async def _read_all(self) -> dict[str, dict[str, str]]:
        try:
            groups = await self._client.get_children(GROUPS_PATH)
        except NoNodeError:
            return {}
        found = {}
        for group in groups:
            config, _ = await read_entity_config(self._client, f"{GROUPS_PATH}/{group}")
            if config:
                found[group] = config
        return found

    async def replace(self, group_id: str, config: Mapping[str, str]) -> None:
        await write_entity_config(
            self._client, f"{GROUPS_PATH}/{group_id}", lambda _old: dict(config)
        )
        await announce_change(self._client, "groups", group_id)
        # Read back at once, so the answer to the request is in force here; the other
        # brokers follow the notification.
        self._configs.update(await self._read_all())
