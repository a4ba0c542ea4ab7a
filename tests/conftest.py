"""Shared fixtures: a broker per test (from the brook pytest plugin) and client helpers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from brook.broker.zookeeper.server import ZooKeeperServer

# BROOK_CPU_PROFILE=FILE: each test's CPU, its brokers' and JVMs' included (tests/cpu_profile.py).
pytest_plugins = ["tests.cpu_profile"]

# Every JVM the tests start (Spark's driver, executors, master and worker, spark-submit,
# ZooKeeper) lives for seconds and reads little data: the C1 compiler alone and the serial
# collector cut the CPU the suite spends on them by about 40% (a standalone-cluster audit:
# 172 -> 103 CPU seconds), on a 2-core machine where the suite is CPU-bound. A value the
# caller set is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper server (Debian's 3.8, test.sh installs it) shared by every test of a
    pytest process (an xdist worker) that asks for it: the cluster tests', the Java
    client's and Apache Kafka 3.9's. Each test works in a chroot of its own, so one
    server serves them all; one per module cost a JVM start per module (about 25)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()
