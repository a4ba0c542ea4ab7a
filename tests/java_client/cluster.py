"""Three `brook serve` brokers in a ZooKeeper chroot for the Java client's modules: a
PLAINTEXT listener (also the brokers' own) and a SASL_SSL one for clients (PLAIN user
alice, the test CA), Kafka's replicated defaults (RF 3, min.insync.replicas 2 for topics,
offsets and transaction state), short replication timeouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from brook.broker.testing import free_port
from tests.cluster.harness import Cluster, ZooKeeperView, new_chroot, wait_ready
from tests.cluster.topics import REPLICATION
from tests.integration.processes import ServeProcess
from tests.security.certs import KEY_PASSWORD, TestPki, make_pki
from tests.security.conftest import plain_jaas

ALICE = ("alice", "alice-secret")


class JavaTestCluster:
    def __init__(self, root: Path, zookeeper_connect: str) -> None:
        self.chroot = new_chroot()
        self.cluster = Cluster(root, zookeeper_connect + self.chroot)
        self.pki: TestPki = make_pki(root / "pki")
        self.zk_client = KazooClient(zookeeper_connect, timeout=10)
        self.zk_client.start(timeout=30)
        self.zk = ZooKeeperView(self.zk_client, self.chroot)
        self.brokers: dict[int, ServeProcess] = {}
        self.sasl_ports: dict[int, int] = {}

    def start(
        self, broker_id: int, port: int | None = None, sasl_port: int | None = None
    ) -> ServeProcess:
        plain = port or free_port()
        sasl = sasl_port or free_port()
        listeners = f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}"
        overrides: dict[str, Any] = {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self.pki.server.keystore),
            "ssl.key.password": KEY_PASSWORD,
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(dict([ALICE])),
            "broker.rack": f"rack-{broker_id}",
            "default.replication.factor": 3,
            "min.insync.replicas": 2,
            "offsets.topic.replication.factor": 3,
            "transaction.state.log.replication.factor": 3,
            "transaction.state.log.min.isr": 2,
            # Share groups' state survives a broker's death only when replicated.
            "share.coordinator.state.topic.replication.factor": 3,
            "share.coordinator.state.topic.min.isr": 2,
            "group.initial.rebalance.delay.ms": 0,
            # Consumer groups (KIP-848) heartbeat as the broker says: often, here.
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.consumer.heartbeat.interval.ms": 500,
            # A killed broker's session ends soon, and its partitions move on.
            "zookeeper.session.timeout.ms": 4000,
            **REPLICATION,
        }
        broker = self.cluster.start(broker_id, overrides, port=plain)
        self.brokers[broker_id] = broker
        self.sasl_ports[broker_id] = sasl
        return broker

    def start_all(self) -> JavaTestCluster:
        for broker_id in (1, 2, 3):
            self.start(broker_id)
        wait_ready(self.zk, self.brokers)
        return self

    def restart(self, broker_id: int) -> ServeProcess:
        """A killed broker back on its ports and data dir."""
        previous = self.brokers[broker_id]
        assert previous.process is not None and previous.process.poll() is not None
        return self.start(broker_id, port=previous.port, sasl_port=self.sasl_ports[broker_id])

    def plaintext(self) -> dict[str, Any]:
        return {"bootstrap.servers": ",".join(b.bootstrap for b in self.brokers.values())}

    def sasl_ssl(self) -> dict[str, Any]:
        user, password = ALICE
        return {
            "bootstrap.servers": ",".join(f"127.0.0.1:{port}" for port in self.sasl_ports.values()),
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule"
            f' required username="{user}" password="{password}";',
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.pki.ca.cert_path),
        }

    def stop(self) -> None:
        self.cluster.stop_all()
        self.zk_client.stop()
        self.zk_client.close()
