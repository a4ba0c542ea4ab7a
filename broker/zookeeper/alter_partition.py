"""A leader's ISR change in ZooKeeper mode: a conditional write of the partition's state
znode, as Kafka 2.x's leaders wrote it (Partition.updateIsr through
zkClient.conditionalUpdatePath): the same leader and leader epoch, the new ISR, against
the version the leader last saw (its partition epoch). A version that moved on (the
controller elected another leader, or changed the ISR) refuses the write: the future
fails, and the state znode's watch brings the leader the state that holds."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from ..metadata.cache import PartitionRegistration
from . import znodes
from .client import ZooKeeperClient
from .kazoo_api import BadVersionError, NoNodeError
from .topic_watcher import TopicWatcher

if TYPE_CHECKING:
    from ..replica.partition import Partition

log = logging.getLogger("brook.zookeeper.isr")


class ZkAlterPartition:
    def __init__(self, client: ZooKeeperClient, topics: TopicWatcher) -> None:
        self._client = client
        self._topics = topics

    def __call__(
        self, partition: Partition, new_isr: list[int]
    ) -> asyncio.Future[PartitionRegistration]:
        return asyncio.ensure_future(self._write(partition, list(new_isr)))

    async def _write(self, partition: Partition, new_isr: list[int]) -> PartitionRegistration:
        known = self._topics.states.get((partition.topic, partition.index))
        # The controller epoch of the state this leader was given (Kafka's leaders wrote
        # the one of their last LeaderAndIsr).
        controller_epoch = known.controller_epoch if known is not None else 0
        leader, leader_epoch, version = (
            partition.leader_id,
            partition.leader_epoch,
            partition.partition_epoch,
        )
        data = znodes.encode_partition_state(leader, leader_epoch, new_isr, controller_epoch)
        path = znodes.topic_partition_state_path(partition.topic, partition.index)
        try:
            stat = await self._client.set(path, data, version)
        except (BadVersionError, NoNodeError):
            log.info(
                "The ISR of %s was changed by another (state version %d is not current);"
                " the new state comes through its watch",
                partition.name,
                version,
            )
            raise
        return PartitionRegistration(
            tuple(partition.replicas), tuple(new_isr), leader, leader_epoch, stat.version
        )
