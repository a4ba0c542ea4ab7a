"""Topics in ZooKeeper: made from any broker, in Kafka's znodes and JSON, their leaders
and ISR the same from every broker and every client; partitions added, configs altered
and topics deleted from one broker reach the others."""

from __future__ import annotations

import asyncio
import base64
import json
import re
import socket
import subprocess

from aiokafka import AIOKafkaClient
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)
from kafka.admin import KafkaAdminClient

from brook.broker.zookeeper.server import ZooKeeperServer
from brook.protocol.errors import ErrorCode

from .harness import Cluster, ZooKeeperView, eventually, metadata_of
from .topics import REPLICATION, start_three, state_of, topic_of


def _create(bootstrap: str, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([topic], operation_timeout=20)[topic.topic].result(timeout=30)


def test_a_topic_made_on_one_broker_is_the_same_everywhere(cluster: Cluster, zk: ZooKeeperView):
    brokers = start_three(cluster, zk)
    _create(brokers[2].bootstrap, NewTopic("orders", 3, 3, config={"retention.ms": "3600000"}))

    # Kafka's znodes: the assignment with the topic id, configs, one state per partition.
    assignment = zk.json("/brokers/topics/orders")
    assert assignment["version"] == 3
    assert assignment["adding_replicas"] == {} and assignment["removing_replicas"] == {}
    replicas = {int(p): r for p, r in assignment["partitions"].items()}
    assert sorted(replicas) == [0, 1, 2]
    assert all(sorted(r) == [1, 2, 3] for r in replicas.values())
    # Spread as Kafka spreads them: each broker the preferred leader of one partition.
    assert sorted(r[0] for r in replicas.values()) == [1, 2, 3]
    topic_id = assignment["topic_id"]
    assert len(base64.urlsafe_b64decode(topic_id + "==")) == 16
    assert zk.json("/config/topics/orders") == {"version": 1, "config": {"retention.ms": "3600000"}}
    epoch = zk.controller_epoch()
    for partition, replica_list in replicas.items():
        state = state_of(zk, "orders", partition)
        assert state == {
            "controller_epoch": epoch,
            "leader": replica_list[0],
            "version": 1,
            "leader_epoch": 0,
            "isr": state["isr"],
        }
        assert sorted(state["isr"]) == [1, 2, 3]

    # Every broker answers the same leaders, replicas and ISR.
    for broker in brokers.values():
        error, partitions = eventually(
            lambda b=broker: topic_of(b.port, "orders"),
            lambda seen: len(seen[1]) == 3 and all(len(p.isr) == 3 for p in seen[1].values()),
        )
        assert error == ErrorCode.none
        for index, seen in partitions.items():
            assert seen.leader == replicas[index][0]
            assert seen.replicas == tuple(replicas[index])
            assert seen.offline == ()

    # And so do the clients, each from another broker.
    metadata = AdminClient({"bootstrap.servers": brokers[3].bootstrap}).list_topics(timeout=10)
    seen_by_librdkafka = {
        p.id: (p.leader, sorted(p.replicas), sorted(p.isrs))
        for p in metadata.topics["orders"].partitions.values()
    }
    expected = {p: (r[0], [1, 2, 3], [1, 2, 3]) for p, r in replicas.items()}
    assert seen_by_librdkafka == expected
    admin = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap)
    try:
        (described,) = admin.describe_topics(["orders"])
    finally:
        admin.close()
    assert {
        p["partition_index"]: (p["leader_id"], sorted(p["replica_nodes"]), sorted(p["isr_nodes"]))
        for p in described["partitions"]
    } == expected

    async def aiokafka_view() -> dict[int, int | None]:
        client = AIOKafkaClient(bootstrap_servers=brokers[2].bootstrap)
        await client.bootstrap()
        try:
            await client.fetch_all_metadata()
            cluster_view = await client.fetch_all_metadata()
            return {
                p: cluster_view.leader_for_partition(_tp("orders", p))
                for p in cluster_view.partitions_for_topic("orders") or ()
            }
        finally:
            await client.close()

    assert asyncio.run(aiokafka_view()) == {p: r[0] for p, r in replicas.items()}

    # kcat's metadata listing (-L -J), from the last broker.
    listed = subprocess.run(
        ["kcat", "-b", brokers[3].bootstrap, "-L", "-J", "-t", "orders"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    (kcat_topic,) = json.loads(listed.stdout)["topics"]
    assert {
        p["partition"]: (
            p["leader"],
            sorted(r["id"] for r in p["replicas"]),
            sorted(i["id"] for i in p["isrs"]),
        )
        for p in kcat_topic["partitions"]
    } == expected

    # Made again from another broker: TOPIC_ALREADY_EXISTS, nothing changed.
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    future = admin.create_topics([NewTopic("orders", 1, 1)])["orders"]
    try:
        future.result(timeout=30)
        raise AssertionError("created twice")
    except Exception as exc:  # confluent's KafkaException
        assert exc.args[0].code() == ErrorCode.topic_already_exists
    assert zk.json("/brokers/topics/orders")["topic_id"] == topic_id


def _tp(topic: str, partition: int):  # type: ignore[no-untyped-def]
    from aiokafka.structs import TopicPartition

    return TopicPartition(topic, partition)


def test_bad_creations_are_refused_with_kafkas_errors(cluster: Cluster, zk: ZooKeeperView):
    brokers = start_three(cluster, zk)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    futures = admin.create_topics(
        [
            NewTopic("too-many", 1, 4),
            NewTopic("unknown-broker", 1, replica_assignment=[[1, 7]]),
            NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}),
        ],
        operation_timeout=10,
    )
    codes = {}
    for name, future in futures.items():
        try:
            future.result(timeout=30)
            codes[name] = ErrorCode.none
        except Exception as exc:
            codes[name] = exc.args[0].code()
    assert codes == {
        "too-many": ErrorCode.invalid_replication_factor,
        "unknown-broker": ErrorCode.invalid_replica_assignment,
        "bad-config": ErrorCode.invalid_config,
    }
    # Nothing of them reached ZooKeeper.
    assert zk.children("/brokers/topics") == []
    assert zk.children("/config/topics") == []

    # An explicit assignment is kept as given.
    _create(brokers[3].bootstrap, NewTopic("placed", 2, replica_assignment=[[3, 1], [1, 2]]))
    assert zk.json("/brokers/topics/placed")["partitions"] == {"0": [3, 1], "1": [1, 2]}
    assert state_of(zk, "placed", 0)["leader"] == 3
    assert state_of(zk, "placed", 1)["leader"] == 1


def test_partitions_configs_and_deletion_reach_every_broker(cluster: Cluster, zk: ZooKeeperView):
    brokers = start_three(cluster, zk)
    _create(brokers[1].bootstrap, NewTopic("events", 2, 2))
    for broker in brokers.values():
        eventually(lambda b=broker: topic_of(b.port, "events")[1], lambda p: len(p) == 2)

    # CreatePartitions on broker 2: the assignment grows, the new partitions get leaders.
    admin = AdminClient({"bootstrap.servers": brokers[2].bootstrap})
    admin.create_partitions([NewPartitions("events", 4)])["events"].result(timeout=30)
    grown = zk.json("/brokers/topics/events")["partitions"]
    assert sorted(grown) == ["0", "1", "2", "3"] and all(len(r) == 2 for r in grown.values())
    for broker in brokers.values():
        eventually(
            lambda b=broker: topic_of(b.port, "events")[1],
            lambda p: len(p) == 4 and all(s.leader >= 0 for s in p.values()),
        )
    # Not a decrease.
    future = admin.create_partitions([NewPartitions("events", 3)])["events"]
    try:
        future.result(timeout=30)
        raise AssertionError("partitions decreased")
    except Exception as exc:
        assert exc.args[0].code() == ErrorCode.invalid_partitions

    # Configs altered on broker 3 reach the logs of every replica.
    admin = AdminClient({"bootstrap.servers": brokers[3].bootstrap})
    resource = ConfigResource(
        "topic",
        "events",
        incremental_configs=[
            ConfigEntry("segment.bytes", "1024", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    assert zk.json("/config/topics/events")["config"] == {"segment.bytes": "1024"}
    changes = zk.children("/config/changes")
    assert changes and all(c.startswith("config_change_") for c in changes)
    assert zk.json(f"/config/changes/{changes[-1]}") == {
        "version": 2,
        "entity_path": "topics/events",
    }
    for broker in brokers.values():
        eventually(lambda b=broker: _segment_bytes(b.bootstrap), lambda v: v == "1024")
    # The logs took it: a few KiB written roll into several segments on every replica.
    producer = Producer({"bootstrap.servers": brokers[3].bootstrap, "acks": "all"})
    for _ in range(40):
        producer.produce("events", b"v" * 200, partition=0)
        producer.flush(30)
    replicas = zk.json("/brokers/topics/events")["partitions"]["0"]
    for broker_id in replicas:
        eventually(
            lambda b=broker_id: len(list((brokers[b].data_dir / "events-0").glob("*.log"))),
            lambda count: count > 3,
        )

    # Deleted from broker 1: the controller removes the znodes, every broker its logs.
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.delete_topics(["events"], operation_timeout=20)["events"].result(timeout=30)
    zk.wait_children("/brokers/topics", lambda children: "events" not in children)
    zk.wait_children("/admin/delete_topics", lambda children: children == [])
    assert zk.exists("/config/topics/events") is None
    for broker in brokers.values():
        eventually(lambda b=broker: topic_of(b.port, "events")[0], lambda e: e != ErrorCode.none)
        eventually(
            lambda b=broker: sorted(p.name for p in b.data_dir.glob("events-*")),
            lambda found: found == [],
        )


def _segment_bytes(bootstrap: str) -> str | None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("topic", "events")
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return entries["segment.bytes"].value


def test_znodes_no_broker_writes_are_left_out_with_a_log_line(cluster: Cluster, zk: ZooKeeperView):
    """Someone writes a topic's assignment or state that Kafka would not parse: every
    broker says why in its log, leaves that topic out, and serves the others."""
    brokers = start_three(cluster, zk)
    _create(brokers[1].bootstrap, NewTopic("good", 1, 3))
    zk.client.create(zk.path("/brokers/topics/garbled"), b"{not json")
    zk.client.create(zk.path("/config/topics/good-too"), b'{"version":1,"config":{"x":"y"}}')
    for broker in brokers.values():
        log_text = broker.wait_for_log("Failed to parse the assignment of topic garbled")
        assert "Failed to parse the assignment of topic garbled" in log_text
        assert topic_of(broker.port, "garbled")[0] == ErrorCode.unknown_topic_or_partition
        assert topic_of(broker.port, "good")[0] == ErrorCode.none

    # A state znode that is not Kafka's JSON: the partition shows no leader, the rest
    # of the topic stays served, and the controller's next write repairs nothing it
    # cannot read (the znode is left to the operator).
    zk.client.set(zk.path("/brokers/topics/good/partitions/0/state"), b"[]")
    for broker in brokers.values():
        eventually(
            lambda b=broker: topic_of(b.port, "good")[1][0].error,
            lambda error: error == ErrorCode.leader_not_available,
        )
        assert "Failed to parse a partition state" in broker.wait_for_log(
            "Failed to parse a partition state"
        )


def test_auto_creation_in_a_cluster(cluster: Cluster, zk: ZooKeeperView):
    """Kafka's ZooKeeper-mode auto-creation: the first Metadata writes the topic and says
    LEADER_NOT_AVAILABLE; the leaders follow on every broker."""
    brokers = start_three(cluster, zk, **{"default.replication.factor": 2, "num.partitions": 2})
    error, _ = topic_of(brokers[2].port, "auto", auto_create=True)
    assert error == ErrorCode.leader_not_available
    zk.wait_data("/brokers/topics/auto", lambda data, _: data is not None)
    replicas = zk.json("/brokers/topics/auto")["partitions"]
    assert sorted(replicas) == ["0", "1"] and all(len(r) == 2 for r in replicas.values())
    for broker in brokers.values():
        error, _ = eventually(
            lambda b=broker: topic_of(b.port, "auto"),
            lambda seen: len(seen[1]) == 2 and all(p.leader >= 0 for p in seen[1].values()),
        )
        assert error == ErrorCode.none
    # Not allowed, or not enabled: UNKNOWN_TOPIC_OR_PARTITION, nothing written.
    assert topic_of(brokers[1].port, "manual")[0] == ErrorCode.unknown_topic_or_partition
    assert zk.children("/brokers/topics") == ["auto"]


def test_a_deletion_waits_for_a_replica_that_is_away(cluster: Cluster, zk: ZooKeeperView):
    """As Kafka's controller: a topic is deleted once every replica's broker is live, so
    that each deletes its logs; meanwhile DeleteTopics times out and the mark stays."""
    brokers = start_three(cluster, zk)
    _create(brokers[1].bootstrap, NewTopic("brief", 2, 3))
    for broker in brokers.values():
        eventually(
            lambda b=broker: sorted(p.name for p in b.data_dir.glob("brief-*")),
            lambda found: found == ["brief-0", "brief-1"],
        )
    assert brokers[3].stop() == 0
    zk.wait_broker_ids([1, 2])
    for broker_id in (1, 2):
        eventually(
            lambda b=broker_id: sorted(metadata_of(brokers[b].port).brokers),
            lambda ids: ids == [1, 2],
        )
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    future = admin.delete_topics(["brief"], operation_timeout=1)["brief"]
    try:
        future.result(timeout=30)
        raise AssertionError("deleted with a replica away")
    except Exception as exc:
        assert exc.args[0].code() == ErrorCode.request_timed_out
    assert zk.children("/admin/delete_topics") == ["brief"]
    assert "brief" in zk.children("/brokers/topics")
    controller = brokers[zk.json("/controller")["brokerid"]]
    assert "Deletion of topic brief waits for brokers 3" in controller.wait_for_log(
        "Deletion of topic brief waits"
    )

    # Broker 3 returns: the deletion completes, and every broker's logs go.
    brokers[3] = cluster.restart(brokers[3], 3)
    zk.wait_children("/brokers/topics", lambda children: "brief" not in children)
    zk.wait_children("/admin/delete_topics", lambda children: children == [])
    for broker in brokers.values():
        eventually(
            lambda b=broker: sorted(p.name for p in b.data_dir.glob("brief-*")),
            lambda found: found == [],
        )
        assert topic_of(broker.port, "brief")[0] == ErrorCode.unknown_topic_or_partition


def test_a_topic_an_older_kafka_made_gets_an_id_and_states(cluster: Cluster, zk: ZooKeeperView):
    """A topic znode as Kafka 2.7 wrote it (version 2, no topic id): the controller gives
    it an id and partition states, and every broker serves it."""
    brokers = start_three(cluster, zk)
    zk.client.create(
        zk.path("/brokers/topics/legacy"),
        json.dumps({"version": 2, "partitions": {"0": [2, 3], "1": [3, 1]}}).encode(),
    )
    zk.wait_data(
        "/brokers/topics/legacy",
        lambda data, _: data is not None and "topic_id" in json.loads(data),
    )
    assert zk.json("/brokers/topics/legacy")["partitions"] == {"0": [2, 3], "1": [3, 1]}
    for broker in brokers.values():
        eventually(
            lambda b=broker: topic_of(b.port, "legacy")[1],
            lambda p: len(p) == 2 and p[0].leader == 2 and p[1].leader == 3,
        )


def test_a_topic_of_many_partitions_is_made_in_slices_while_each_broker_serves(
    cluster: Cluster, zk: ZooKeeperView
) -> None:
    """Each broker makes the logs of a topic ZooKeeper brings it a slice at a time
    (topic_watcher applies new topics through MetadataPublisher.apply_in_slices): the
    broker answers Metadata between slices, with the topic still unknown though some of
    its logs are on disk already. A broker making them all in one step could not: a
    request sent after its first log appears is read after its last, the topic visible."""
    brokers = start_three(cluster, zk)
    partitions = 600
    watched = brokers[3]
    logs = watched.data_dir
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    created = admin.create_topics(
        [NewTopic("big", partitions, 3)], operation_timeout=120, request_timeout=150
    )["big"]
    seen_in_progress = False
    while True:
        made = len(list(logs.glob("big-*")))
        error, _ = topic_of(watched.port, "big")
        if error == ErrorCode.none:
            break
        if made:
            assert error == ErrorCode.unknown_topic_or_partition
            seen_in_progress = True
    assert seen_in_progress
    created.result(timeout=150)
    # Whole in the end, on every broker, each partition led.
    for broker in brokers.values():
        eventually(
            lambda b=broker: topic_of(b.port, "big"),
            lambda found: (
                found[0] == ErrorCode.none
                and len(found[1]) == partitions
                and all(p.leader in (1, 2, 3) for p in found[1].values())
            ),
        )
    assert len(list(logs.glob("big-*"))) == partitions


def _total_watches(zookeeper: ZooKeeperServer) -> int:
    """ZooKeeper's own count of the watches its clients hold (the `wchs` command)."""
    with socket.create_connection(("127.0.0.1", zookeeper.port), timeout=10) as conn:
        conn.sendall(b"wchs")
        answer = b"".join(iter(lambda: conn.recv(4096), b"")).decode()
    found = re.search(r"Total watches:\s*(\d+)", answer)
    assert found, answer
    return int(found.group(1))


def test_partitions_not_made_yet_cost_a_watch_per_topic_not_per_partition(
    cluster: Cluster, zk: ZooKeeperView, zookeeper: ZooKeeperServer
) -> None:
    """A topic whose partitions no live broker can lead yet (all on broker 9, which is
    away) has no partition znodes: each broker waits for them on its topic's partitions
    znode, not with a watch per partition, and learns every partition's leader from that
    one watch once the controller makes them."""
    brokers = start_three(cluster, zk)
    partitions = 300
    before = _total_watches(zookeeper)
    zk.client.create(
        zk.path("/brokers/topics/waiting"),
        json.dumps({"version": 2, "partitions": {str(p): [9] for p in range(partitions)}}).encode(),
    )
    # Every broker has read the topic (it has an id now, and no leaders).
    zk.wait_data(
        "/brokers/topics/waiting",
        lambda data, _: data is not None and "topic_id" in json.loads(data),
    )
    for broker in brokers.values():
        eventually(
            lambda b=broker: topic_of(b.port, "waiting")[1],
            lambda found: len(found) == partitions and all(p.leader == -1 for p in found.values()),
        )
    grown = _total_watches(zookeeper) - before
    # The topic's znode, its config and its partitions znode, on each broker: a watch
    # per partition would be 3 x 300.
    assert grown <= 10 * len(brokers), grown
    cluster.start(9, REPLICATION)
    zk.wait_broker_ids([1, 2, 3, 9])
    for broker in brokers.values():
        eventually(
            lambda b=broker: topic_of(b.port, "waiting")[1],
            lambda found: len(found) == partitions and all(p.leader == 9 for p in found.values()),
        )
