"""Client quotas in a ZooKeeper cluster: kept in the config znodes Kafka keeps them in
(/config/users/<u>, /config/users/<u>/clients/<c>, /config/clients/<c>, beside a user's
SCRAM credentials, and /config/ips/<ip>) and announced by change notifications, so that a
quota altered through one broker is applied by every broker."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.alter_client_quotas.v1.request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from kio.schema.describe_client_quotas.v1.request import (
    ComponentData,
    DescribeClientQuotasRequest,
)
from kio.static.primitive import i8

from brook.broker.client import BlockingClient

from .harness import Cluster, ZooKeeperView, eventually, metadata_of


def _alter(port: int, entity: list[tuple[str, str | None]], ops: dict[str, float | None]) -> int:
    request = AlterClientQuotasRequest(
        entries=(
            EntryData(
                entity=tuple(EntityData(entity_type=t, entity_name=n) for t, n in entity),
                ops=tuple(OpData(key=k, value=v or 0.0, remove=v is None) for k, v in ops.items()),
            ),
        ),
        validate_only=False,
    )
    with BlockingClient("127.0.0.1", port, "quota-admin") as client:
        return int(client.request(request).entries[0].error_code)


def _quotas(port: int) -> dict[tuple, dict[str, float]]:
    request = DescribeClientQuotasRequest(
        components=(ComponentData(entity_type="client-id", match_type=i8(2), match=None),),
        strict=False,
    )
    with BlockingClient("127.0.0.1", port, "quota-admin") as client:
        response = client.request(request)
    return {
        tuple((e.entity_type, e.entity_name) for e in entry.entity): {
            v.key: v.value for v in entry.values
        }
        for entry in response.entries
    }


def _throttles(bootstrap: str, topic: str, client_id: str) -> list[Any]:
    told: list[Any] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "batch.size": 16384,
            "linger.ms": 5,
            "throttle_cb": lambda event: told.append(event.throttle_time),
        }
    )
    for _ in range(20):
        producer.produce(topic, b"q" * 10240)
        producer.poll(0)
    assert producer.flush(60) == 0
    producer.poll(0)
    return told


def test_a_quota_altered_through_one_broker_is_applied_by_the_others(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = {i: cluster.start(i) for i in (1, 2)}
    zk.wait_broker_ids([1, 2])
    for broker in brokers.values():
        eventually(lambda b=broker: sorted(metadata_of(b.port).brokers), lambda ids: len(ids) == 2)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    created = admin.create_topics(
        [NewTopic("metered", 1, replica_assignment=[[2, 1]])], operation_timeout=20
    )
    created["metered"].result(30)
    # A user's quota shares the znode of its SCRAM credentials, neither erasing the other.
    upsert = UserScramCredentialUpsertion(
        "quinn", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"quinn-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(15)
    assert _alter(brokers[1].port, [("user", "quinn")], {"producer_byte_rate": 5000}) == 0
    config = zk.json("/config/users/quinn")
    assert config["version"] == 1
    assert config["config"]["producer_byte_rate"] == "5000"
    assert "SCRAM-SHA-256" in config["config"]
    # A client quota set through broker 1, in Kafka's znode, and applied by broker 2
    # (the leader of the partition the client writes to).
    entity = [("user", "quinn"), ("client-id", "metered-app")]
    assert _alter(brokers[1].port, entity, {"producer_byte_rate": 1000}) == 0
    client = [("client-id", "metered-app")]
    assert _alter(brokers[1].port, client, {"producer_byte_rate": 15000}) == 0
    assert zk.json("/config/clients/metered-app")["config"] == {"producer_byte_rate": "15000"}
    assert zk.json("/config/users/quinn/clients/metered-app")["config"] == {
        "producer_byte_rate": "1000"
    }
    changes = zk.children("/config/changes")
    notified = [zk.json(f"/config/changes/{c}")["entity_path"] for c in changes]
    assert "users/quinn/clients/metered-app" in notified and "clients/metered-app" in notified
    eventually(
        lambda: _quotas(brokers[2].port),
        lambda q: q.get((("client-id", "metered-app"),)) == {"producer_byte_rate": 15000.0},
    )
    # 200 KB at 15 KB/s (150 KB pass in the first window): broker 2 throttles the client.
    told = _throttles(brokers[2].bootstrap, "metered", "metered-app")
    assert told and max(told) > 0
    # Removed through broker 2: broker 1 forgets it too.
    assert _alter(brokers[2].port, client, {"producer_byte_rate": None}) == 0
    eventually(
        lambda: _quotas(brokers[1].port),
        lambda q: (("client-id", "metered-app"),) not in q,
    )
    assert (("user", "quinn"), ("client-id", "metered-app")) in _quotas(brokers[1].port)


def _ip_quotas(port: int) -> dict[str | None, dict[str, float]]:
    request = DescribeClientQuotasRequest(
        components=(ComponentData(entity_type="ip", match_type=i8(2), match=None),),
        strict=False,
    )
    with BlockingClient("127.0.0.1", port, "quota-admin") as client:
        response = client.request(request)
    return {
        entry.entity[0].entity_name: {v.key: v.value for v in entry.values}
        for entry in response.entries
    }


def test_an_ip_quota_is_kept_in_config_ips(cluster: Cluster, zk: ZooKeeperView):
    brokers = {i: cluster.start(i) for i in (1, 2)}
    zk.wait_broker_ids([1, 2])
    assert _alter(brokers[1].port, [("ip", "10.1.2.3")], {"connection_creation_rate": 7}) == 0
    assert _alter(brokers[1].port, [("ip", None)], {"connection_creation_rate": 50}) == 0
    assert zk.json("/config/ips/10.1.2.3")["config"] == {"connection_creation_rate": "7"}
    assert zk.json("/config/ips/<default>")["config"] == {"connection_creation_rate": "50"}
    notified = [
        zk.json(f"/config/changes/{c}")["entity_path"] for c in zk.children("/config/changes")
    ]
    assert "ips/10.1.2.3" in notified and "ips/<default>" in notified
    expected = {
        "10.1.2.3": {"connection_creation_rate": 7.0},
        None: {"connection_creation_rate": 50.0},
    }
    eventually(lambda: _ip_quotas(brokers[2].port), lambda found: found == expected)
    # Removed through broker 2: broker 1 forgets it too.
    assert _alter(brokers[2].port, [("ip", None)], {"connection_creation_rate": None}) == 0
    eventually(lambda: _ip_quotas(brokers[1].port), lambda found: None not in found)
