"""A leader cut off from ZooKeeper and from its followers (a loopback proxy on each of
those links, its clients still reaching it): it stops acknowledging acks=all writes (its
followers cannot fetch, and it fences itself before its session expires), the controller
elects another leader from the ISR, and once the links heal it comes back as a follower,
cuts what it wrote alone, and no record it or anyone acknowledged is lost."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from brook.broker.testing import free_port
from brook.broker.zookeeper.server import ZooKeeperServer
from tests.integration.acked import (
    AckRecorder,
    assert_all_acked_kept,
    assert_order_kept,
    read_all,
)

from .harness import Cluster, ZooKeeperView, eventually, wait_ready
from .netproxy import NetProxy

TOPIC = "partitioned"


@pytest.fixture
def proxies() -> Iterator[list[NetProxy]]:
    started: list[NetProxy] = []
    yield started
    for proxy in started:
        proxy.stop()


def _state(zk: ZooKeeperView) -> dict:
    state: dict = zk.json(f"/brokers/topics/{TOPIC}/partitions/0/state")
    return state


def test_a_leader_cut_off_from_zookeeper_and_followers_loses_no_acknowledged_write(
    cluster: Cluster,
    zk: ZooKeeperView,
    zookeeper: ZooKeeperServer,
    chroot: str,
    proxies: list[NetProxy],
):
    zk_host, zk_port = zookeeper.connect.rsplit(":", 1)
    brokers, links = {}, {}
    for broker_id in (1, 2, 3):
        client_port, internal_port = free_port(), free_port()
        to_zookeeper = NetProxy(zk_host, int(zk_port)).start()
        to_broker = NetProxy("127.0.0.1", internal_port).start()
        proxies += [to_zookeeper, to_broker]
        links[broker_id] = (to_zookeeper, to_broker)
        brokers[broker_id] = cluster.start(
            broker_id,
            {
                "zookeeper.connect": to_zookeeper.address + chroot,
                "listeners": f"PLAINTEXT://127.0.0.1:{client_port},"
                f"INTERNAL://127.0.0.1:{internal_port}",
                # The other brokers reach this one through its proxy only.
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{client_port},"
                f"INTERNAL://{to_broker.address}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
            },
            port=client_port,
        )
    wait_ready(zk, brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(
        30
    )
    eventually(lambda: sorted(_state(zk)["isr"]), lambda isr: isr == [1, 2, 3])
    with AckRecorder(
        bootstrap, TOPIC, "split", partitions=1, acks="all", idempotent=True, rate=1000
    ) as producer:
        producer.wait_for_acks(500, timeout=60)
        old = _state(zk)
        leader = old["leader"]
        to_zookeeper, to_broker = links[leader]
        to_zookeeper.cut()
        to_broker.cut()
        # It fences itself first, then its session expires and another leads.
        eventually(brokers[leader].log_text, lambda text: "stops leading its partitions" in text)
        new = eventually(
            lambda: _state(zk),
            lambda state: (
                state["leader"] not in (-1, leader) and state["leader_epoch"] > old["leader_epoch"]
            ),
            timeout=60,
        )
        # Clients that still reach it get NOT_LEADER_OR_FOLLOWER and no leader from its
        # Metadata (its view may be stale); one connected to it alone (librdkafka's sparse
        # connections) may wait for the heal: no progress is asked of it meanwhile.
        to_zookeeper.heal()
        to_broker.heal()
        # Back as a follower of the new leader (truncating what it wrote alone), in the
        # ISR again, and the producer goes on.
        eventually(lambda: sorted(_state(zk)["isr"]), lambda isr: isr == [1, 2, 3], timeout=60)
        assert _state(zk)["leader"] == new["leader"]
        producer.wait_for_acks(len(producer.acked) + 500, timeout=60)
    stored = read_all(bootstrap, TOPIC, 1)
    assert_all_acked_kept(stored, producer.acked)
    assert_order_kept(stored)
