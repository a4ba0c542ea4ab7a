"""The controller's writes asked for together go out as one ZooKeeper transaction
(broker/zookeeper/fenced_writes.py), and each caller still gets what a transaction of its
own would give: a write whose version check fails gets BadVersionError and changes
nothing, the others in its transaction are made all the same; with the controller epoch
moved on, none is made. Against the real ZooKeeper server of the cluster tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from brook.broker.zookeeper.client import ZooKeeperClient
from brook.broker.zookeeper.connect_string import parse_connect_string
from brook.broker.zookeeper.controller_election import ControllerState
from brook.broker.zookeeper.fenced_writes import (
    WRITES_PER_TRANSACTION,
    ControllerFencedError,
    FencedWrites,
)
from brook.broker.zookeeper.kazoo_api import BadVersionError, TransactionRequest
from brook.broker.zookeeper.server import ZooKeeperServer

NODES = WRITES_PER_TRANSACTION + 20  # more than one transaction's worth


async def _client(zookeeper: ZooKeeperServer, chroot: str) -> ZooKeeperClient:
    root = ZooKeeperClient(
        parse_connect_string(zookeeper.connect + chroot), 10000, asyncio.get_running_loop(), False
    )
    await root.start(10000)
    await root.create(chroot, makepath=True)
    await root.close()
    client = ZooKeeperClient(
        parse_connect_string(zookeeper.connect + chroot), 10000, asyncio.get_running_loop()
    )
    await client.start(10000)
    return client


def _set(path: str, value: bytes, version: int) -> Callable[[TransactionRequest], None]:
    def build(transaction: TransactionRequest) -> None:
        transaction.set_data(path, value, version)

    return build


async def _scenario(zookeeper: ZooKeeperServer, chroot: str) -> None:
    client = await _client(zookeeper, chroot)
    try:
        await client.create("/controller_epoch", b"1")
        for node in range(NODES):
            await client.create(f"/n{node}", b"old")
        state = ControllerState(controller_id=1, epoch=1, epoch_zk_version=0)
        writes = FencedWrites(client)
        # Every write in the same turn of the loop; node 7's version check fails.
        outcomes = await asyncio.gather(
            *(
                writes.write(state, _set(f"/n{node}", b"new", 5 if node == 7 else 0))
                for node in range(NODES)
            ),
            return_exceptions=True,
        )
        assert isinstance(outcomes[7], BadVersionError)
        assert all(not isinstance(o, BaseException) for i, o in enumerate(outcomes) if i != 7)
        for node in range(NODES):
            data, _ = await client.get(f"/n{node}")
            assert data == (b"old" if node == 7 else b"new")
        # The epoch moved on (another controller): nothing is written.
        await client.set("/controller_epoch", b"2")
        fenced = await asyncio.gather(
            *(writes.write(state, _set(f"/n{node}", b"newer", 1)) for node in range(3)),
            return_exceptions=True,
        )
        assert all(isinstance(o, ControllerFencedError) for o in fenced)
        for node in range(3):
            data, _ = await client.get(f"/n{node}")
            assert data == b"new"
    finally:
        await client.close()


def test_writes_sent_together_succeed_or_fail_each_as_alone(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    asyncio.run(_scenario(zookeeper, chroot))


def test_the_writes_of_one_turn_share_a_transaction(
    zookeeper: ZooKeeperServer, chroot: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The point of it: ZooKeeper is asked fewer times than there are writes."""

    async def scenario() -> int:
        client = await _client(zookeeper, chroot)
        try:
            await client.create("/controller_epoch", b"1")
            for node in range(NODES):
                await client.create(f"/n{node}", b"old")
            transactions = 0
            multi = client.multi

            async def counted(build: Callable[[TransactionRequest], None]) -> list[Any]:
                nonlocal transactions
                transactions += 1
                return await multi(build)

            monkeypatch.setattr(client, "multi", counted)
            writes = FencedWrites(client)
            state = ControllerState(controller_id=1, epoch=1, epoch_zk_version=0)
            await asyncio.gather(
                *(writes.write(state, _set(f"/n{n}", b"new", 0)) for n in range(NODES))
            )
            return transactions
        finally:
            await client.close()

    assert asyncio.run(scenario()) == -(-NODES // WRITES_PER_TRANSACTION)
