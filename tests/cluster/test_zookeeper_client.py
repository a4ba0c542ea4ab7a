"""The broker's ZooKeeper client (broker/zookeeper/client.py), against the real ZooKeeper
server of the cluster tests: it waits on its socket with poll(2) (kazoo_api.PollingHandler),
since a broker of thousands of partitions holds more than 1,024 descriptors and a socket
numbered above that must still be read (select(2) cannot watch it); and it knows the session
timeout ZooKeeper granted without kazoo's packet-by-packet log lines."""

from __future__ import annotations

import asyncio
import os
import resource
from collections.abc import Iterator

import pytest

from brook.broker.zookeeper.client import ZooKeeperClient
from brook.broker.zookeeper.connect_string import parse_connect_string
from brook.broker.zookeeper.server import ZooKeeperServer

ABOVE_SELECT = 1100  # descriptors held before the client connects (select's limit: 1,024)


@pytest.fixture
def many_descriptors() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = ABOVE_SELECT + 100
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the descriptor limit ({hard}) is below {wanted}")
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(ABOVE_SELECT)]
    try:
        yield
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_socket_above_select_limit_is_served(
    zookeeper: ZooKeeperServer, chroot: str, many_descriptors: None
) -> None:
    async def scenario() -> bytes:
        client = ZooKeeperClient(
            parse_connect_string(zookeeper.connect), 10000, asyncio.get_running_loop(), False
        )
        await client.start(10000)
        try:
            probe = os.open(os.devnull, os.O_RDONLY)
            os.close(probe)
            assert probe > 1024  # the client's socket, opened before it, is numbered high too
            await client.create(f"{chroot}/node", b"written", makepath=True)
            data, _ = await client.get(f"{chroot}/node")
            return data
        finally:
            await client.close()

    assert asyncio.run(scenario()) == b"written"


@pytest.mark.parametrize("asked_ticks", [1, 30])
def test_the_granted_session_timeout_is_known(zookeeper: ZooKeeperServer, asked_ticks: int) -> None:
    """kazoo's lines below WARNING are never made into records (kazoo_api's logger), yet
    the session timeout ZooKeeper granted, which kazoo tells only in such a line, is
    known: ZooKeeper bounds the one asked for to 2-20 of its ticks."""

    async def scenario() -> int:
        client = ZooKeeperClient(
            parse_connect_string(zookeeper.connect),
            asked_ticks * zookeeper.tick_ms,
            asyncio.get_running_loop(),
            False,
        )
        await client.start(10000)
        try:
            return client.negotiated_session_timeout_ms
        finally:
            await client.close()

    granted_ticks = min(max(asked_ticks, 2), 20)
    assert asyncio.run(scenario()) == granted_ticks * zookeeper.tick_ms
