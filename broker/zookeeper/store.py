"""The metadata store of a ZooKeeper cluster: ZooKeeper itself.

Topics, partition states and topic configs are znodes, written by the admin requests
(admin.py), the controller (controller_duties.py) and the leaders' ISR changes
(alter_partition.py); every broker's TopicWatcher turns them into records. So the
records the publisher applies are what ZooKeeper holds already: there is nothing to keep
here, and nothing to load from the log dirs (the local topic-configs file is not used).
The topic configs are read once before the log manager opens the logs, so that each log
opens with its topic's config.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..config.broker_config import ConfigError
from ..config.topic_config import validate_topic_configs
from ..metadata.records import MetadataRecord
from . import znodes
from .client import ZooKeeperClient
from .kazoo_api import NoNodeError

if TYPE_CHECKING:
    from brook.storage.log import Log

log = logging.getLogger("brook.zookeeper.topics")


class ZkMetadataStore:
    def __init__(self, configs: dict[str, dict[str, Any]]) -> None:
        self._configs = configs

    @classmethod
    async def read(cls, client: ZooKeeperClient) -> ZkMetadataStore:
        names = await client.get_children(znodes.config_entity_type_path("topics"))
        read = await asyncio.gather(*(_read_config(client, name) for name in names))
        return cls({name: configs for name, configs in zip(names, read, strict=True) if configs})

    def topic_configs(self) -> dict[str, dict[str, Any]]:
        return self._configs

    def load(self, local_logs: Iterable[Log]) -> list[MetadataRecord]:
        return []  # the TopicWatcher reads ZooKeeper

    def append(self, records: Sequence[MetadataRecord]) -> None:
        pass  # written to ZooKeeper before they became records


async def _read_config(client: ZooKeeperClient, name: str) -> dict[str, Any]:
    try:
        data, _ = await client.get(znodes.config_entity_path("topics", name))
        return validate_topic_configs(znodes.decode_entity_config(data))
    except NoNodeError:
        return {}
    except (ValueError, ConfigError) as exc:
        log.error("The configs of topic %s in ZooKeeper are not valid: %s", name, exc)
        return {}
