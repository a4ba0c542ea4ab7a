"""Where group configs live: ZooKeeper's /config/groups/<group> when the broker has a
ZooKeeper (broker/zookeeper/group_config_znodes.py, read by every broker, so the configs
follow a group to whichever broker coordinates it), else one file in the first log
directory, replaced atomically: {"version": 1, "groups": {"<group>": {"<key>": "<value>"}}}.
Kafka keeps them in its KRaft metadata log, which Brook has not: ZooKeeper mode never
had group configs, and /config/groups/ is Brook's, laid out as Kafka's other config
entities are.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from brook.storage.checkpoints import read_json, write_json

from .group_configs import GroupConfigs

GROUP_CONFIGS_FILE = "brook-group-configs.json"

if TYPE_CHECKING:

    class GroupConfigStore(Protocol):
        async def start(self) -> None:
            """Read the stored configs into GroupConfigs (and, in ZooKeeper, watch them)."""
            ...

        async def replace(self, group_id: str, config: Mapping[str, str]) -> None:
            """Make `config` the whole of the group's overrides (empty: none)."""
            ...

        def close(self) -> None: ...


class LocalGroupConfigStore:
    def __init__(self, log_dir: Path, configs: GroupConfigs) -> None:
        self.path = log_dir / GROUP_CONFIGS_FILE
        self._configs = configs
        self._groups: dict[str, dict[str, str]] = {}

    async def start(self) -> None:
        stored = read_json(self.path) or {}
        self._groups = {
            group: {key: str(value) for key, value in config.items()}
            for group, config in stored.get("groups", {}).items()
        }
        self._configs.update(self._groups)

    async def replace(self, group_id: str, config: Mapping[str, str]) -> None:
        groups = {group: dict(values) for group, values in self._groups.items()}
        if config:
            groups[group_id] = dict(config)
        else:
            groups.pop(group_id, None)
        # Written before it is in force: a crash leaves the old file or the new one whole.
        write_json(self.path, {"version": 1, "groups": dict(sorted(groups.items()))})
        self._groups = groups
        self._configs.update(groups)

    def close(self) -> None:
        pass
