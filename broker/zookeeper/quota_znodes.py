"""Client quotas in ZooKeeper, where Kafka's ZooKeeper mode keeps them: the config znodes
/config/users/<user>, /config/users/<user>/clients/<client>, /config/clients/<client> and
/config/ips/<ip>
({"version": 1, "config": {"producer_byte_rate": "1024", ...}}; a user's znode also holds
its SCRAM credentials, left as they are), each change written conditionally and
announced by a sequential /config/changes/config_change_ znode naming the entity
({"version": 2, "entity_path": "users/alice/clients/c1"}), as kafka-configs.sh did.

Every broker reads all quota entities at start and again whenever a notification naming
users/, clients/ or ips/ appears (the quota configs are few; what is read replaces what the
managers held, so a missed or repeated notification changes nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..quotas.entities import QuotaEntity, entity_from_path, parse_configs
from ..quotas.manager import ClientQuotas
from ..quotas.store import QuotaChanges, apply_changes
from . import znodes
from .client import ZooKeeperClient
from .config_change_watch import (
    ConfigChangeWatch,
    announce_change,
    read_entity_config,
    write_entity_config,
)
from .kazoo_api import NoNodeError

log = logging.getLogger("brook.zookeeper.quotas")

QUOTA_ENTITY_TYPES = ("users", "clients", "ips")


class ZkClientQuotaStore:
    def __init__(self, client: ZooKeeperClient, quotas: ClientQuotas) -> None:
        self._client = client
        self._quotas = quotas
        self._watch = ConfigChangeWatch(
            client, QUOTA_ENTITY_TYPES, "reading client quotas from ZooKeeper", self._reload
        )

    async def start(self) -> None:
        await self._watch.start()

    def close(self) -> None:
        self._watch.close()

    async def idle(self) -> None:
        await self._watch.idle()

    async def _reload(self) -> None:
        self._quotas.update(await self._read_all())

    async def _children(self, path: str) -> list[str]:
        try:
            return await self._client.get_children(path)
        except NoNodeError:
            return []

    async def _read_all(self) -> dict[QuotaEntity, dict[str, float]]:
        paths = [f"clients/{c}" for c in await self._children("/config/clients")]
        paths += [f"ips/{ip}" for ip in await self._children("/config/ips")]
        for user in await self._children("/config/users"):
            paths.append(f"users/{user}")
            clients = await self._children(f"/config/users/{user}/clients")
            paths.extend(f"users/{user}/clients/{c}" for c in clients)
        found: dict[QuotaEntity, dict[str, float]] = {}
        for path in paths:
            entity = entity_from_path(path)
            if entity is None:
                continue
            config, _ = await read_entity_config(self._client, f"{znodes.CONFIG}/{path}")
            quotas = parse_configs(config)
            if quotas:
                found[entity] = quotas
        return found

    async def alter(self, changes: QuotaChanges) -> None:
        for entity, keys in changes.items():
            await self._alter_entity(entity.path, keys)
            await announce_change(self._client, *entity.path.split("/", 1))
        # Read back at once, so the answer to the request is in force here; the other
        # brokers follow the notification.
        self._quotas.update(await self._read_all())

    async def _alter_entity(self, path: str, keys: Mapping[str, float | None]) -> None:
        def changed(config: dict[str, str]) -> dict[str, str]:
            apply_changes(config, keys)
            return config

        await write_entity_config(self._client, f"{znodes.CONFIG}/{path}", changed)
