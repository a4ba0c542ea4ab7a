"""SCRAM credentials in ZooKeeper, where Kafka's ZooKeeper mode keeps them: the user's
config znode /config/users/<user> ({"version": 1, "config": {"SCRAM-SHA-256":
"salt=...,stored_key=...,server_key=...,iterations=..."}}, beside any quota of the
user), changed by a conditional write and announced by a sequential
/config/changes/config_change_ znode naming "users/<user>", as kafka-configs.sh did.

Read at each authentication, so every broker sees a change at once.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..security.scram import SCRAM_MECHANISMS, ScramCredential
from .client import ZooKeeperClient
from .kazoo_api import BadVersionError, NodeExistsError, NoNodeError

if TYPE_CHECKING:
    from ..security.scram_credentials import CredentialChanges

USERS_PATH = "/config/users"
CHANGES_PATH = "/config/changes/config_change_"


def _user_path(user: str) -> str:
    # Kafka sanitizes the entity name for the znode (URL encoding).
    return f"{USERS_PATH}/{urllib.parse.quote(user, safe='')}"


class ZkScramCredentialStore:
    def __init__(self, client: ZooKeeperClient) -> None:
        self._client = client

    async def _read(self, path: str) -> tuple[dict[str, str], int]:
        """The user's config and the znode version (-1: no znode)."""
        try:
            data, stat = await self._client.get(path)
        except NoNodeError:
            return {}, -1
        config = json.loads(data or b"{}").get("config", {}) if data else {}
        return dict(config), stat.version

    async def get(self, user: str, mechanism: str) -> ScramCredential | None:
        config, _ = await self._read(_user_path(user))
        text = config.get(mechanism)
        return ScramCredential.from_kafka_string(text) if text else None

    async def users(self) -> dict[str, dict[str, ScramCredential]]:
        try:
            names = await self._client.get_children(USERS_PATH)
        except NoNodeError:
            return {}
        found: dict[str, dict[str, ScramCredential]] = {}
        for name in names:
            config, _ = await self._read(f"{USERS_PATH}/{name}")
            mechanisms = {
                mechanism: ScramCredential.from_kafka_string(config[mechanism])
                for mechanism in SCRAM_MECHANISMS
                if config.get(mechanism)
            }
            if mechanisms:
                found[urllib.parse.unquote(name)] = mechanisms
        return found

    async def alter(self, changes: CredentialChanges) -> None:
        for user, mechanisms in changes.items():
            await self._alter_user(user, mechanisms)
            await self._client.create(
                CHANGES_PATH,
                json.dumps({"version": 2, "entity_path": f"users/{user}"}).encode(),
                sequence=True,
                makepath=True,
            )

    async def _alter_user(
        self, user: str, mechanisms: Mapping[str, ScramCredential | None]
    ) -> None:
        path = _user_path(user)
        while True:  # a conditional write, again if another writer came between
            config, version = await self._read(path)
            for mechanism, credential in mechanisms.items():
                if credential is None:
                    config.pop(mechanism, None)
                else:
                    config[mechanism] = credential.to_kafka_string()
            data = json.dumps({"version": 1, "config": config}).encode()
            try:
                if version < 0:
                    await self._client.create(path, data, makepath=True)
                else:
                    await self._client.set(path, data, version=version)
                return
            except (BadVersionError, NodeExistsError):
                continue
