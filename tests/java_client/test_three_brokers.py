"""The Java client against three Brook brokers (ZooKeeper, RF 3, min.insync.replicas 2)
over PLAINTEXT and SASL_SSL: the producer, transaction and group scenarios with every
topic replicated three times, and the AdminClient's view of the cluster (three nodes with
their racks, replicas and ISRs through DescribeTopicPartitions) and its partition
reassignments, carried out by the controller."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.harness import wait_ready

from .cluster import JavaTestCluster
from .harness import JavaClients
from .scenarios import (
    consumer_group_across_coordinator_kill,
    create_topic,
    group_rebalances,
    idempotent_producer,
    read_all,
    transactions,
    unique,
    wait_for,
)


@pytest.fixture(params=["PLAINTEXT", "SASL_SSL"])
def config(request: pytest.FixtureRequest, cluster: JavaTestCluster) -> dict[str, Any]:
    return cluster.plaintext() if request.param == "PLAINTEXT" else cluster.sasl_ssl()


def test_idempotent_producer(java: JavaClients, config: dict[str, Any]) -> None:
    idempotent_producer(java, config, replication_factor=3)


def test_transactions_and_read_committed(java: JavaClients, config: dict[str, Any]) -> None:
    transactions(java, config, replication_factor=3)


def test_a_classic_group_across_rebalances(java: JavaClients, config: dict[str, Any]) -> None:
    group_rebalances(java, config, replication_factor=3)


def test_the_cluster_as_the_admin_client_sees_it(
    java: JavaClients, cluster: JavaTestCluster, config: dict[str, Any]
) -> None:
    described = java.admin(config, "describe_cluster")
    sasl = "security.protocol" in config
    assert [(n["id"], n["port"], n["rack"]) for n in described["nodes"]] == [
        (broker_id, cluster.sasl_ports[broker_id] if sasl else broker.port, f"rack-{broker_id}")
        for broker_id, broker in sorted(cluster.brokers.items())
    ]
    assert described["controller"] in (1, 2, 3)
    topic = unique("java-described")
    create_topic(java, config, topic, partitions=6, replication_factor=3)
    partitions = wait_for(
        lambda: java.admin(config, "describe_topics", names=[topic], partition_limit=4)[topic][
            "partitions"
        ],
        lambda seen: all(len(p["isr"]) == 3 for p in seen),
    )
    assert [p["partition"] for p in partitions] == list(range(6))
    for partition in partitions:
        assert sorted(partition["replicas"]) == [1, 2, 3]
        assert partition["leader"] == partition["replicas"][0]
    # Kafka's assignment spreads the leaders over the brokers.
    assert {p["leader"] for p in partitions} == {1, 2, 3}


def test_a_reassignment_moves_the_replicas(java: JavaClients, cluster: JavaTestCluster) -> None:
    config = cluster.plaintext()
    topic = unique("java-moved")
    create_topic(java, config, topic, partitions=1, replication_factor=2)
    java.call(
        "produce",
        config={**config, "acks": "all"},
        topic=topic,
        records=[{"value": f"v{i}"} for i in range(20)],
    )
    (before,) = java.admin(config, "describe_topics", names=[topic])[topic]["partitions"]
    (outside,) = {1, 2, 3} - set(before["replicas"])
    target = [outside, before["replicas"][0]]
    moved = java.admin(
        config, "alter_reassignments", moves=[{"topic": topic, "partition": 0, "replicas": target}]
    )
    assert moved == {f"{topic}-0": {"ok": None}}
    # Done once the controller lists no move and the partition has the target replicas,
    # all in sync.
    wait_for(
        lambda: java.admin(config, "list_reassignments"), lambda moves: f"{topic}:0" not in moves
    )
    (after,) = wait_for(
        lambda: java.admin(config, "describe_topics", names=[topic])[topic]["partitions"],
        lambda seen: seen[0]["replicas"] == target and sorted(seen[0]["isr"]) == sorted(target),
    )
    assert after["leader"] in target
    assert [r["value"] for r in read_all(java, config, topic, 20)] == [f"v{i}" for i in range(20)]
    # Cancelling a move that is not under way: Kafka's NoReassignmentInProgressException.
    cancelled = java.admin(
        config, "alter_reassignments", moves=[{"topic": topic, "partition": 0, "replicas": None}]
    )
    assert cancelled[f"{topic}-0"]["error"]["type"] == "NoReassignmentInProgressException"
    # A move onto a broker that does not exist is refused, and nothing moves.
    refused = java.admin(
        config, "alter_reassignments", moves=[{"topic": topic, "partition": 0, "replicas": [1, 9]}]
    )
    assert refused[f"{topic}-0"]["error"]["type"] == "InvalidReplicaAssignmentException"
    (unmoved,) = java.admin(config, "describe_topics", names=[topic])[topic]["partitions"]
    assert unmoved["replicas"] == target


def test_a_consumer_group_across_its_coordinators_kill(
    java: JavaClients, cluster: JavaTestCluster
) -> None:
    """KIP-848 with the Java client: the group's coordinator killed under it."""
    killed: list[int] = []

    def kill(broker_id: int) -> None:
        cluster.brokers[broker_id].kill()
        killed.append(broker_id)

    try:
        consumer_group_across_coordinator_kill(java, cluster.plaintext(), kill)
    finally:
        for broker_id in killed:  # the module's next tests want three brokers
            cluster.restart(broker_id)
        wait_ready(cluster.zk, cluster.brokers)


def test_a_share_group_across_its_partition_leaders_kill(
    java: JavaClients, cluster: JavaTestCluster
) -> None:
    """KafkaShareConsumer (KIP-932) on three brokers: records accepted before the kill of
    the partition's leader are never delivered again; the rest come once."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    from tests.cluster.topics import topic_of

    config = cluster.plaintext()
    topic, group = unique("java-share-failover"), unique("java-share")
    create_topic(java, config, topic, partitions=1, replication_factor=3)
    producer = Producer({**config, "acks": "all"})
    values = [f"job-{i}" for i in range(30)]
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(30) == 0
    resource = ConfigResource(ConfigResource.Type.GROUP, group)
    resource.add_incremental_config(
        ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
        )
    )
    admin = AdminClient(config)
    admin.incremental_alter_configs([resource])[resource].result(30)
    share = {**config, "group.id": group, "share.acknowledgement.mode": "explicit"}
    first = java.call("share_consume", config=share, topic=topic, count=30, idle_ms=2000)
    assert [r["value"] for r in first] == values  # all accepted
    producer = Producer({**config, "acks": "all"})
    later = [f"later-{i}" for i in range(10)]
    for value in later:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(30) == 0
    leader = topic_of(cluster.brokers[1].port, topic)[1][0].leader
    cluster.brokers[leader].kill()
    try:
        survivors = {
            "bootstrap.servers": ",".join(
                b.bootstrap for broker_id, b in cluster.brokers.items() if broker_id != leader
            )
        }
        second = java.call(
            "share_consume",
            config={**share, **survivors},
            topic=topic,
            count=40,
            idle_ms=5000,
            timeout_ms=60000,
        )
        assert [r["value"] for r in second] == later
    finally:
        cluster.restart(leader)
        wait_ready(cluster.zk, cluster.brokers)
