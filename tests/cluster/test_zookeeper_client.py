"""The broker's ZooKeeper client (broker/zookeeper/client.py), against the real ZooKeeper
server of the cluster tests: it waits on its socket with poll(2) (kazoo_transport), since a
broker of thousands of partitions holds more than 1,024 descriptors and a socket numbered
above that must still be read (select(2) cannot watch it); it sends a burst of requests in
a few writes and takes their replies from what one read brought, each to its own caller,
across a cut connection too; and it knows the session timeout ZooKeeper granted without
kazoo's packet-by-packet log lines."""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from brook.broker.zookeeper.client import ZooKeeperClient
from brook.broker.zookeeper.connect_string import parse_connect_string
from brook.broker.zookeeper.kazoo_transport import READ_SIZE, BrookKazooClient
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
    # Earlier tests' sockets that are garbage now close first, not while the test holds
    # the low descriptors (one freed then would be where the client's socket opens).
    gc.collect()
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


BURST = 2000
# A znode larger than one read of the socket (kazoo_transport.READ_SIZE), within
# ZooKeeper's default request limit (jute.maxbuffer, 1 MiB).
LARGE = bytes(range(256)) * (3 * READ_SIZE // 256)


def _client(zookeeper: ZooKeeperServer) -> ZooKeeperClient:
    return ZooKeeperClient(
        parse_connect_string(zookeeper.connect), 10000, asyncio.get_running_loop(), False
    )


async def _make_znodes(client: ZooKeeperClient, root: str) -> None:
    await client.create(f"{root}/large", LARGE, makepath=True)
    for start in range(0, BURST, 500):

        def build(transaction: Any, start: int = start) -> None:
            for index in range(start, start + 500):
                transaction.create(f"{root}/{index}", f"value {index}".encode())

        await client.multi(build)


def test_a_burst_goes_out_in_few_writes_and_each_reply_reaches_its_caller(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    """Thousands of reads asked at once, with a znode larger than one read of the socket
    among them: every caller gets its own znode's data, and the requests woke kazoo's
    connection thread and went out in far fewer writes than there are requests (kazoo
    alone wakes the thread and writes for each)."""

    async def scenario() -> tuple[list[bytes], int, int]:
        client = _client(zookeeper)
        await client.start(10000)
        try:
            await _make_znodes(client, chroot)
            connection = client._kazoo._connection
            writes = 0
            write = connection._write

            def counted(message: bytes, timeout: float) -> None:
                nonlocal writes
                writes += 1
                write(message, timeout)

            wakes = 0
            wake = connection.wake

            def counted_wake() -> None:
                nonlocal wakes
                wakes += 1
                wake()

            connection._write = counted
            connection.wake = counted_wake
            paths = [f"{chroot}/{index}" for index in range(BURST)]
            paths[BURST // 2 : BURST // 2] = [f"{chroot}/large"] * 3
            replies = await asyncio.gather(*(client.get(path) for path in paths))
            return [data for data, _ in replies], writes, wakes
        finally:
            await client.close()

    data, writes, wakes = asyncio.run(scenario())
    expected = [f"value {index}".encode() for index in range(BURST)]
    expected[BURST // 2 : BURST // 2] = [LARGE] * 3
    assert data == expected
    assert writes <= BURST // 10
    assert wakes <= BURST // 10


@pytest.mark.parametrize("cut", ["before the burst", "mid-burst"])
def test_a_cut_connection_loses_no_request(
    zookeeper: ZooKeeperServer, chroot: str, cut: str
) -> None:
    """The link cut before a burst is sent or while replies are buffered and requests are
    on their way: the client reconnects in the same session, asks again on the new
    connection what the old one lost (kazoo fails it with ConnectionLoss), takes nothing
    the old one had read for the new one's replies, and every caller gets its own znode's
    data."""

    async def scenario() -> tuple[list[bytes], int | None, int | None]:
        client = _client(zookeeper)
        await client.start(10000)
        try:
            await _make_znodes(client, chroot)
            session = client.session_id
            connection = client._kazoo._connection
            if cut == "before the burst":
                connection._socket.shutdown(socket.SHUT_RDWR)
            paths = [f"{chroot}/{index}" for index in range(BURST)] + [f"{chroot}/large"]
            reads = [asyncio.ensure_future(client.get(path)) for path in paths]
            if cut == "mid-burst":
                # Once the first replies are in: the rest are in flight or still queued.
                await asyncio.wait(reads, return_when=asyncio.FIRST_COMPLETED)
                connection._socket.shutdown(socket.SHUT_RDWR)
            replies = await asyncio.wait_for(asyncio.gather(*reads), 60)
            return [data for data, _ in replies], session, client.session_id
        finally:
            await client.close()

    data, before, after = asyncio.run(scenario())
    assert data == [f"value {index}".encode() for index in range(BURST)] + [LARGE]
    assert after == before


def test_the_transport_serves_a_client_started_again(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    """kazoo's own synchronous calls over the transport, before and after the client is
    stopped, closed and started again (a new wake-up socket, no wake-up pending)."""
    client = BrookKazooClient(hosts=zookeeper.connect, timeout=10)
    client.start(10)
    try:
        client.create(f"{chroot}/again", b"first", makepath=True)
        client.stop()
        client.close()
        client.start(10)
        client.set(f"{chroot}/again", b"second")
        data, _ = client.get(f"{chroot}/again")
        assert data == b"second"
    finally:
        client.stop()
        client.close()


def test_a_lost_connection_runs_a_watch_callback_once_not_once_a_path(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    """One callback watching thousands of znodes (as a broker watches its partitions'
    states): the connection cut, kazoo tells every watched path that its watch is gone;
    the callback runs for that once (or a few times), not once per path (each run marks
    everything to be read again). A watch set again after the reconnection still fires
    with its path."""

    async def scenario() -> tuple[list[str | None], list[str | None]]:
        client = _client(zookeeper)
        await client.start(10000)
        try:
            await _make_znodes(client, chroot)
            lost: list[str | None] = []
            changed: list[str | None] = []
            got_lost = asyncio.Event()

            def watch(event: Any) -> None:
                if event.path is None:
                    lost.append(event.type)
                    got_lost.set()
                else:
                    changed.append(event.path)

            await asyncio.gather(*(client.get(f"{chroot}/{i}", watch) for i in range(BURST)))
            client._kazoo._connection._socket.shutdown(socket.SHUT_RDWR)
            await got_lost.wait()
            # A round trip on the new connection: whatever kazoo handed on before it,
            # the loop has run.
            await client.get(f"{chroot}/0", watch)
            await client.set(f"{chroot}/0", b"changed")
            await client.get(f"{chroot}/0")
            return lost, changed
        finally:
            await client.close()

    lost, changed = asyncio.run(scenario())
    # Once, or a few times when the loop ran one while kazoo was still telling the rest.
    assert set(lost) == {"NONE"} and len(lost) <= BURST // 100
    assert changed == [f"{chroot}/0"]
