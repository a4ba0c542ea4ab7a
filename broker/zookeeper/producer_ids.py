"""Producer ids from blocks reserved in ZooKeeper (Kafka's ZkProducerIdManager), so that
no two brokers of a cluster ever hand out the same id: a second producer with the same
id, epoch and sequence would be taken for a retry of the first and not written.

/latest_producer_id_block holds the last block reserved (Kafka's ProducerIdBlockZNode
JSON); a broker reserves the next one with a write conditional on the version it read,
and reads again when another broker got there first. A block is reserved at start, and
the next one in the background once half of the current one is used, so next_id (called
on the loop by InitProducerId) never waits for ZooKeeper; a broker that hands out a
whole block before the next arrives answers COORDINATOR_LOAD_IN_PROGRESS meanwhile (as
Kafka's RPCProducerIdManager), which producers retry.
"""

from __future__ import annotations

import asyncio
import logging

from brook.protocol.errors import CoordinatorLoadInProgressError

from ..transactions.producer_ids import BLOCK_SIZE
from . import znodes
from .client import ZooKeeperClient
from .kazoo_api import BadVersionError, NodeExistsError, NoNodeError

log = logging.getLogger("brook.zookeeper.producer_ids")


class ZkProducerIdManager:
    def __init__(self, client: ZooKeeperClient, broker_id: int) -> None:
        self._client = client
        self._broker_id = broker_id
        self._next = 0
        self._end = 0  # exclusive
        self._prefetched: tuple[int, int] | None = None
        self._fetching: asyncio.Task[None] | None = None

    async def start(self) -> None:
        first, last = await self._reserve()
        self._next, self._end = first, last + 1

    def next_id(self) -> int:
        if self._next >= self._end:
            if self._prefetched is None:
                self._prefetch()
                raise CoordinatorLoadInProgressError(
                    "Producer ID block is full. Waiting for next block"
                )
            self._next, self._end = self._prefetched[0], self._prefetched[1] + 1
            self._prefetched = None
        producer_id = self._next
        self._next += 1
        if self._end - self._next <= BLOCK_SIZE // 2:
            self._prefetch()
        return producer_id

    def _prefetch(self) -> None:
        if self._prefetched is not None or (self._fetching and not self._fetching.done()):
            return
        self._fetching = asyncio.ensure_future(self._fetch())

    async def _fetch(self) -> None:
        try:
            self._prefetched = await self._reserve()
        except Exception:
            log.exception("Could not reserve a block of producer ids; trying again later")

    async def _reserve(self) -> tuple[int, int]:
        """The next block after the latest one reserved; (first, last) ids."""
        while True:
            try:
                data, stat = await self._client.get(znodes.PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = b"", None
            if data:
                _, _, last = znodes.decode_producer_id_block(data)
                first = last + 1
            else:
                first = 0
            block_last = first + BLOCK_SIZE - 1
            value = znodes.encode_producer_id_block(self._broker_id, first, block_last)
            try:
                if stat is None:
                    await self._client.create(znodes.PRODUCER_ID_BLOCK, value, makepath=True)
                else:
                    await self._client.set(znodes.PRODUCER_ID_BLOCK, value, stat.version)
            except (BadVersionError, NodeExistsError):
                continue  # another broker reserved one meanwhile: the next after it
            log.info("Reserved producer ids %d to %d", first, block_last)
            return first, block_last
