"""Fixtures of the cluster tests: a chroot per test in the module's ZooKeeper server
(tests/conftest.py), a view of it, a cluster of `brook serve` processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from brook.broker.zookeeper.server import ZooKeeperServer

from .harness import Cluster, ZooKeeperView, new_chroot


@pytest.fixture
def chroot() -> str:
    return new_chroot()


@pytest.fixture
def zk(zookeeper: ZooKeeperServer, chroot: str) -> Iterator[ZooKeeperView]:
    """The test's chroot as ZooKeeper holds it, read by a client at the root (the
    brokers make the chroot)."""
    client = KazooClient(zookeeper.connect, timeout=10)
    client.start(timeout=30)
    try:
        yield ZooKeeperView(client, chroot)
    finally:
        client.stop()
        client.close()


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperServer, chroot: str) -> Iterator[Cluster]:
    brokers = Cluster(tmp_path, zookeeper.connect + chroot)
    try:
        yield brokers
    finally:
        brokers.stop_all()
