"""Shared fixtures: a broker per test (from the brook pytest plugin) and client helpers."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from brook.broker.zookeeper.server import ZooKeeperServer

# BROOK_CPU_PROFILE=FILE: each test's CPU, its brokers' and JVMs' included (tests/cpu_profile.py).
pytest_plugins = ["tests.cpu_profile"]

# Every JVM the tests start (Spark's driver, executors, master and worker, spark-submit,
# ZooKeeper) lives for seconds and reads little data: the C1 compiler alone and the serial
# collector cut the CPU the suite spends on them by about 40% (a standalone-cluster audit:
# 172 -> 103 CPU seconds), on a 2-core machine where the suite is CPU-bound. A value the
# caller set is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

# Hypothesis times each example (deadline) and the drawing of inputs (the too_slow health
# check): timed assertions, which fail on this 2-core machine when the suite's six workers
# keep both cores busy (a merge test's inputs took 1.2 s to draw in a CI run). A test's own
# @settings still sets what it names; these two stay off everywhere.
settings.register_profile("brook", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("brook")


def run_shared_dir(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """A directory every pytest process of this run sees: under xdist (a worker's config has
    `workerinput`) the parent of each worker's own base temp, else this process's."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(config, "workerinput") else base


@pytest.fixture(scope="session")
def kafka_written(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Any:
    """A log dir Apache Kafka 4 wrote and what a consumer read from it
    (tests/apache_kafka/kafka_written.py), made once a run, by the first process that
    asks: Brook's broker (tests/apache_kafka/) and its Spark jobs (tests/spark/) read it."""
    from tests.apache_kafka.kafka_written import shared_kafka_written

    return shared_kafka_written(run_shared_dir(tmp_path_factory, request.config) / "kafka-written")


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
