"""Where quota configs live: ZooKeeper's /config/users and /config/clients when the broker
has a ZooKeeper (broker/zookeeper/quota_znodes.py, read by every broker of the cluster),
else one file in the first log directory, replaced atomically. The file holds what the
znodes hold, each entity's config under its path:
{"version": 1, "entities": {"users/alice": {"producer_byte_rate": "1024"}, ...}}.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from brook.storage.checkpoints import read_json, write_json

from .entities import QUOTA_KEYS, QuotaEntity, entity_from_path, format_value, parse_configs
from .manager import ClientQuotas

CLIENT_QUOTAS_FILE = "brook-client-quotas.json"

# entity -> key -> the new value, or None to remove the key.
QuotaChanges = Mapping[QuotaEntity, Mapping[str, float | None]]


# Only for type checking: a Protocol class costs start-up time to create.
if TYPE_CHECKING:

    class ClientQuotaStore(Protocol):
        async def start(self) -> None:
            """Read the stored quotas into the managers (and, in ZooKeeper, watch them)."""
            ...

        async def alter(self, changes: QuotaChanges) -> None: ...

        def close(self) -> None: ...


def apply_changes(config: dict[str, str], changes: Mapping[str, float | None]) -> None:
    for key, value in changes.items():
        if value is None:
            # Only quota keys: a user's SCRAM credentials share its znode.
            if key in QUOTA_KEYS:
                config.pop(key, None)
        else:
            config[key] = format_value(key, value)


class LocalClientQuotaStore:
    def __init__(self, log_dir: Path, quotas: ClientQuotas) -> None:
        self.path = log_dir / CLIENT_QUOTAS_FILE
        self._quotas = quotas
        self._entities: dict[str, dict[str, str]] = {}

    async def start(self) -> None:
        stored = read_json(self.path) or {}
        self._entities = {
            path: {key: str(value) for key, value in config.items()}
            for path, config in stored.get("entities", {}).items()
        }
        self._publish()

    async def alter(self, changes: QuotaChanges) -> None:
        entities = {path: dict(config) for path, config in self._entities.items()}
        for entity, keys in changes.items():
            config = entities.setdefault(entity.path, {})
            apply_changes(config, keys)
            if not config:
                del entities[entity.path]
        # Written before it is in force: a crash leaves the old file or the new one whole.
        write_json(self.path, {"version": 1, "entities": dict(sorted(entities.items()))})
        self._entities = entities
        self._publish()

    def close(self) -> None:
        pass

    def _publish(self) -> None:
        configs = {}
        for path, config in self._entities.items():
            entity = entity_from_path(path)
            if entity is not None:
                configs[entity] = parse_configs(config)
        self._quotas.update(configs)
