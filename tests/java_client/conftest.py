"""The Java client's tests: each module is one xdist group, so that its JVM and its
brokers (module fixtures) start once, on one worker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brook.broker.zookeeper.server import ZooKeeperServer

from .cluster import JavaTestCluster
from .harness import JavaClients

HERE = Path(__file__).parent


# First among the hooks, as tests/spark/conftest.py explains: xdist reads the marker in
# its own pytest_collection_modifyitems.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path)
        if path.parent == HERE:
            item.add_marker(pytest.mark.xdist_group(f"java-client-{path.stem}"))


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaClients]:
    """One JVM running the Java client for the module's tests."""
    clients = JavaClients(tmp_path_factory.mktemp("java-client") / "client.log")
    try:
        yield clients
    finally:
        clients.stop()


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperServer
) -> Iterator[JavaTestCluster]:
    """Three brokers for the module's tests (tests/java_client/cluster.py)."""
    brokers = JavaTestCluster(tmp_path_factory.mktemp("java-cluster"), zookeeper.connect)
    try:
        yield brokers.start_all()
    finally:
        brokers.stop()
