"""Replication as /metrics and /v1/ready show it: real brokers replicating to each other
over real sockets (the test as their controller, tests/replication/harness.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.clients import produce
from tests.replication.harness import ScriptedController

from .conftest import ADMIN, Admin


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ScriptedController]:
    controller = ScriptedController(tmp_path, overrides=dict(ADMIN))
    yield controller
    controller.close()


def _replica_manager(admin: Admin, name: str) -> float:
    return admin.metrics().value(f"kafka_server_replicamanager_{name}")


def test_a_follower_away_shrinks_the_isr_and_its_return_expands_it(cluster: ScriptedController):
    leader = Admin(cluster.start(0))
    cluster.start(1)
    cluster.create_topic("replicated", [0, 1], configs={"min.insync.replicas": "2"})
    produce(leader.broker.bootstrap, "replicated", [(None, b"v")] * 10, acks="all")
    follower = Admin(cluster.brokers[1])
    wait = cluster.wait_for
    wait(
        lambda: (
            follower.metrics().value(
                "kafka_server_brokertopicmetrics_replicationbytesin_total", topic="replicated"
            )
            > 0
        ),
        "the follower to copy the records",
    )
    metrics = leader.metrics()
    assert metrics.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert metrics.value("kafka_server_replicamanager_leadercount") == 1
    assert metrics.value(
        "kafka_server_brokertopicmetrics_replicationbytesout_total", topic="replicated"
    ) >= follower.metrics().value(
        "kafka_server_brokertopicmetrics_replicationbytesin_total", topic="replicated"
    )
    assert follower.metrics().value("kafka_server_replicamanager_leadercount") == 0

    cluster.stop(1)
    # replica.lag.time.max.ms (1.5 s here) passes: the leader drops broker 1.
    wait(lambda: _replica_manager(leader, "isrshrinks_total") == 1, "the ISR to shrink")
    metrics = leader.metrics()
    assert metrics.value("kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert metrics.value("kafka_server_replicamanager_underminisrpartitioncount") == 1
    assert metrics.value("kafka_server_replicamanager_isrexpands_total") == 0

    cluster.start(1)
    wait(lambda: _replica_manager(leader, "isrexpands_total") == 1, "the ISR to expand")
    assert _replica_manager(leader, "underreplicatedpartitions") == 0
    assert _replica_manager(leader, "underminisrpartitioncount") == 0


def test_a_follower_out_of_the_isr_is_not_ready(cluster: ScriptedController):
    """A broker that cannot catch up (its leader refuses its fetches) says so at
    /v1/ready, naming the partition; once it has caught up it is ready."""
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("lagging", [0, 1])
    follower = Admin(cluster.brokers[1])
    assert follower.json("/v1/ready")[0] == 200
    leader.faults.add(api="Fetch", error="NOT_LEADER_OR_FOLLOWER", topic="lagging", partition=0)
    cluster.elect("lagging", 0, leader=0, isr=[0])  # the controller took broker 1 out
    status, body = follower.json("/v1/ready")
    assert status == 503
    assert body["ready"] is False
    assert body["reason"] == "1 followed partition(s) not in the ISR: lagging-0"
    assert Admin(leader).json("/v1/ready")[0] == 200  # the leader serves
    leader.faults.clear()
    cluster.wait_for(lambda: follower.json("/v1/ready")[0] == 200, "the follower to catch up")
