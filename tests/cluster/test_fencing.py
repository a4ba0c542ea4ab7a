"""A partition leader cut off from ZooKeeper stops taking writes before ZooKeeper could
expire its session (after which the controller may elect another leader), and takes
them again once it is back in the same session."""

from __future__ import annotations

from brook.broker.zookeeper.server import ZooKeeperServer
from brook.protocol.record_batch import Record, build_batch
from tests.integration.clients import create_topic
from tests.integration.raw_client import RawClient, produce_request

from .harness import Cluster, ZooKeeperView, eventually
from .netproxy import NetProxy


def _produce_error(port: int, topic: str) -> str:
    """The error a Produce (acks=1) of one record gets, by Kafka's name."""
    batch = build_batch([Record(0, 1_700_000_000_000, None, b"v")])
    with RawClient(port) as client:
        response = client.request(produce_request(topic, 0, batch, acks=1))
    return str(response.responses[0].partition_responses[0].error_code.name)


def test_a_leader_cut_off_from_zookeeper_stops_taking_writes(
    tmp_path, zookeeper: ZooKeeperServer, chroot: str, zk: ZooKeeperView
):
    host, port = zookeeper.connect.split(",")[0].rsplit(":", 1)
    proxy = NetProxy(host, int(port)).start()
    try:
        cluster = Cluster(tmp_path, proxy.address + chroot)
        try:
            broker = cluster.start(1)
            zk.wait_broker_ids([1])
            zk.wait_controller(lambda controller: controller == 1)  # CreateTopics goes there
            create_topic(broker.bootstrap, "fenced")
            # CreateTopics is answered once the topic is in ZooKeeper; the broker leads its
            # partition when the controller's state reaches it, a moment later.
            eventually(lambda: _produce_error(broker.port, "fenced"), lambda e: e == "none")
            proxy.cut()
            # After a quarter of the session timeout without ZooKeeper, it steps down.
            eventually(broker.log_text, lambda text: "stops leading its partitions" in text)
            assert _produce_error(broker.port, "fenced") == "not_leader_or_follower"
            proxy.heal()
            eventually(broker.log_text, lambda text: "leads again" in text)
            assert _produce_error(broker.port, "fenced") == "none"
        finally:
            cluster.stop_all()
    finally:
        proxy.stop()
