"""A ZooKeeper cluster of `brook serve` processes as /metrics and /v1/ready show it: one
active controller among the brokers, and, when a broker dies, its partitions
under-replicated on the survivor, which takes over as controller."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from confluent_kafka.admin import AdminClient, NewTopic

from brook.broker.testing import free_port
from tests.cluster.conftest import chroot, cluster, zk  # noqa: F401 (fixtures)
from tests.cluster.harness import Cluster, ZooKeeperView, eventually

from .conftest import Samples


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _metrics(admin: str) -> Samples:
    status, body = _get(admin + "/metrics")
    assert status == 200, body
    return Samples(body)


def test_one_active_controller_and_a_dead_brokers_partitions_under_replicated(
    cluster: Cluster,  # noqa: F811
    zk: ZooKeeperView,  # noqa: F811
):
    admins = {}
    brokers = {}
    for broker_id in (1, 2):
        admins[broker_id] = f"http://127.0.0.1:{free_port()}"
        brokers[broker_id] = cluster.start(broker_id, {"admin.listener": admins[broker_id]})
    zk.wait_broker_ids([1, 2])
    controller = zk.wait_controller(lambda found: found in (1, 2))
    assert controller is not None

    def active(broker_id: int) -> float | None:
        # None while the broker is still starting: its admin listener serves the process's
        # metrics before the broker's own exist.
        return _metrics(admins[broker_id]).get(
            "kafka_controller_kafkacontroller_activecontrollercount"
        )

    eventually(lambda: [active(1), active(2)], lambda counts: counts in ([0, 1], [1, 0]))
    assert active(controller) == 1
    for admin in admins.values():
        eventually(lambda admin=admin: _get(admin + "/v1/ready")[0], lambda status: status == 200)
        metrics = _metrics(admin)
        assert metrics.value("kafka_controller_kafkacontroller_activebrokercount") == 2

    survivor = 3 - controller
    client = AdminClient({"bootstrap.servers": brokers[survivor].bootstrap})
    client.create_topics([NewTopic("mirrored", 2, 2)])["mirrored"].result(30)
    eventually(
        lambda: _metrics(admins[survivor]).value("kafka_server_replicamanager_partitioncount"),
        lambda count: count == 2,
    )
    brokers[controller].kill()
    # The survivor becomes the controller and leads both partitions, alone in their ISR.
    eventually(lambda: active(survivor), lambda count: count == 1)
    metrics = eventually(
        lambda: _metrics(admins[survivor]),
        lambda m: (
            m.value("kafka_server_replicamanager_leadercount") == 2
            and m.value("kafka_server_replicamanager_underreplicatedpartitions") == 2
        ),
    )
    assert metrics.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert metrics.value("kafka_controller_kafkacontroller_activebrokercount") == 1
    status, body = _get(admins[survivor] + "/v1/ready")
    assert status == 200, body  # it leads what it hosts: nothing to catch up with
    assert json.loads(body)["ready"] is True
