"""Brokers talking to each other over a SASL_SSL inter-broker listener: TLS with the
test CA, SCRAM-SHA-512 with a credential created through AlterUserScramCredentials and
kept in ZooKeeper where Kafka keeps it (/config/users/<user>), read by every broker."""

from __future__ import annotations

import json
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from brook.broker.testing import free_port
from tests.security.certs import KEY_PASSWORD, make_pki

from .harness import Cluster, ZooKeeperView, eventually, metadata_of
from .topics import REPLICATION, topic_of

SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required"
    ' username="broker" password="{password}";'
)


def _secure(pki, password: str = "broker-secret") -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server.keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca.cert_path),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
            password=password
        ),
        **{key: str(value) for key, value in REPLICATION.items()},
    }


def _start(cluster: Cluster, broker_id: int, pki, **extra: str):
    plain, internal = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain},INTERNAL://127.0.0.1:{internal}"
    return cluster.start(
        broker_id,
        {"listeners": listeners, "advertised.listeners": listeners, **_secure(pki), **extra},
        port=plain,
    )


def _first_broker_with_login(
    cluster: Cluster, zk: ZooKeeperView, pki: Any, iterations: int
) -> tuple[Any, AdminClient]:
    """Broker 1, the controller, with the brokers' own SCRAM login made through it before
    the others start, as Kafka's docs have it; and the admin client that made it."""
    first = _start(cluster, 1, pki)
    zk.wait_broker_ids([1])
    # librdkafka sends AlterUserScramCredentials to the controller: elected first.
    zk.wait_controller(lambda controller: controller == 1)
    eventually(lambda: metadata_of(first.port).controller_id, lambda known: known == 1)
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    upsertion = UserScramCredentialUpsertion(
        "broker", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, iterations), b"broker-secret"
    )
    admin.alter_user_scram_credentials([upsertion])["broker"].result(30)
    return first, admin


def test_replication_over_sasl_ssl(cluster: Cluster, zk: ZooKeeperView, tmp_path):
    pki = make_pki(tmp_path / "pki")
    first, admin = _first_broker_with_login(cluster, zk, pki, iterations=8192)
    stored = zk.json("/config/users/broker")
    assert stored["version"] == 1
    fields = dict(item.split("=", 1) for item in stored["config"]["SCRAM-SHA-512"].split(","))
    assert sorted(fields) == ["iterations", "salt", "server_key", "stored_key"]
    assert fields["iterations"] == "8192"
    changes = [
        json.loads(zk.get(f"/config/changes/{name}")[0]) for name in zk.children("/config/changes")
    ]
    assert {"version": 2, "entity_path": "users/broker"} in changes

    brokers = {1: first, 2: _start(cluster, 2, pki), 3: _start(cluster, 3, pki)}
    zk.wait_broker_ids([1, 2, 3])
    for broker in brokers.values():
        eventually(lambda b=broker: sorted(metadata_of(b.port).brokers), lambda ids: len(ids) == 3)

    topic = NewTopic("secure", 1, 3, config={"min.insync.replicas": "3"})
    admin.create_topics([topic], operation_timeout=20)["secure"].result(30)
    # acks=all with min.insync.replicas=3: answered only once both followers fetched the
    # batch over the SASL_SSL listener.
    producer = Producer({"bootstrap.servers": first.bootstrap, "acks": "all"})
    errors = []
    for index in range(10):
        producer.produce(
            "secure", b"v%d" % index, on_delivery=lambda e, m: errors.append(e) if e else None
        )
    assert producer.flush(60) == 0
    assert errors == []
    _, partitions = eventually(
        lambda: topic_of(first.port, "secure"), lambda seen: len(seen[1][0].isr) == 3
    )
    assert sorted(partitions[0].isr) == [1, 2, 3]
    for broker in brokers.values():
        assert "Failed authentication" not in broker.log_text()


def test_a_broker_with_a_wrong_password_cannot_replicate(
    cluster: Cluster, zk: ZooKeeperView, tmp_path
):
    pki = make_pki(tmp_path / "pki")
    first, admin = _first_broker_with_login(cluster, zk, pki, iterations=4096)
    wrong = _start(
        cluster,
        2,
        pki,
        **{
            "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
                password="wrong"
            )
        },
    )
    zk.wait_broker_ids([1, 2])
    # The controller (broker 1) has seen broker 2 register (its own watch, a moment later).
    eventually(lambda: sorted(metadata_of(first.port).brokers), lambda ids: len(ids) == 2)
    topic = NewTopic("guarded", 1, replica_assignment=[[1, 2]])
    admin.create_topics([topic], operation_timeout=20)["guarded"].result(30)
    producer = Producer({"bootstrap.servers": first.bootstrap, "acks": "1"})
    producer.produce("guarded", b"x")
    assert producer.flush(30) == 0
    # Broker 2's fetches are refused at the leader: it logs each failed login, and broker
    # 2 never joins the ISR.
    eventually(
        first.log_text,
        lambda text: "Failed authentication" in text and "SCRAM-SHA-512" in text,
    )
    # The ISR starts with both replicas, and drops broker 2 once it lags
    # replica.lag.time.max.ms without a fetch.
    eventually(lambda: topic_of(first.port, "guarded")[1][0].isr, lambda isr: isr == (1,))
    assert wrong.process.poll() is None  # refused, not crashed
