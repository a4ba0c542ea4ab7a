"""The Java client (kafka-clients 4.4) against one Brook broker over PLAINTEXT: its
producers (idempotent, every codec, transactional), its consumers (read_committed, a
classic group and a KIP-848 consumer group across rebalances), its share consumer
(KafkaShareConsumer, KIP-932: beside confluent-kafka's, acknowledging each way, read_committed)
and its AdminClient (topics through
DescribeTopicPartitions, configs, consumer-group offsets, the cluster), with the errors
Kafka's client raises for bad requests. The records cross over to confluent-kafka both
ways: what one client writes, the other reads."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from brook.broker.testing import BrokerThread
from tests.observability.conftest import Admin

from .harness import JavaClientError, JavaClients
from .scenarios import (
    COOPERATIVE_STICKY,
    consumer_group_regex_and_static,
    create_topic,
    group_rebalances,
    idempotent_producer,
    member_state,
    mixed_group,
    produce_batch,
    read_all,
    transactions,
    unique,
    wait_for,
)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    data = tmp_path_factory.mktemp("java-one-broker") / "data"
    started = BrokerThread(
        data,
        {
            "admin.listener": "http://127.0.0.1:0",
            "group.initial.rebalance.delay.ms": 0,
            # Consumer groups (KIP-848) heartbeat as the broker says: often, here; and a
            # member that dies is fenced within seconds.
            "group.consumer.min.heartbeat.interval.ms": 500,
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.min.session.timeout.ms": 3000,
            "group.consumer.session.timeout.ms": 3000,
            # Share groups' locks may be short here (a test waits one out).
            "group.share.min.record.lock.duration.ms": 1000,
        },
    ).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def config(broker: BrokerThread) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap}


def test_idempotent_producer(java: JavaClients, config: dict[str, Any]) -> None:
    idempotent_producer(java, config)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_codec_from_java_reads_in_confluent_kafka(
    java: JavaClients, config: dict[str, Any], codec: str
) -> None:
    topic = unique(f"java-{codec}")
    create_topic(java, config, topic)
    records = [{"key": f"k{i}", "value": f"{codec} value {i}" * 20} for i in range(100)]
    java.call(
        "produce",
        config={**config, "compression.type": codec, "linger.ms": "20"},
        topic=topic,
        records=records,
    )
    consumer = Consumer(
        {**config, "group.id": unique("confluent"), "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    read: list[tuple[str, str]] = []
    try:
        while len(read) < 100:
            message = consumer.poll(15)
            assert message is not None, f"read {len(read)} of 100"
            assert message.error() is None, message.error()
            read.append(
                (bytes(message.key() or b"").decode(), bytes(message.value() or b"").decode())
            )
    finally:
        consumer.close()
    assert read == [(r["key"], r["value"]) for r in records]


def test_java_reads_what_confluent_kafka_wrote(java: JavaClients, config: dict[str, Any]) -> None:
    topic = unique("from-confluent")
    create_topic(java, config, topic)
    producer = Producer({**config, "compression.type": "zstd", "enable.idempotence": True})
    for i in range(50):
        producer.produce(
            topic, key=None if i % 5 == 0 else f"k{i}", value=f"v{i}", headers={"h": f"{i}"}
        )
    assert producer.flush(30) == 0
    read = read_all(java, config, topic, 50)
    assert [(r["offset"], r["key"], r["value"], r["headers"]) for r in read] == [
        (i, None if i % 5 == 0 else f"k{i}", f"v{i}", {"h": f"{i}"}) for i in range(50)
    ]


def test_offsets_by_time_and_the_log_ends(java: JavaClients, config: dict[str, Any]) -> None:
    """The consumer's beginningOffsets, endOffsets and offsetsForTimes (ListOffsets) over
    records with the producer's own timestamps; a DeleteRecords moves the beginning."""
    topic = unique("java-times")
    create_topic(java, config, topic)
    base = 1_700_000_000_000
    records = [{"value": f"v{i}", "timestamp": base + 1000 * i} for i in range(10)]
    java.call("produce", config=config, topic=topic, records=records)
    found = java.call(
        "offsets",
        config=config,
        topic=topic,
        partition=0,
        timestamps=[base - 1, base + 1000 * 3, base + 1000 * 3 + 1, base + 1000 * 20],
    )
    assert (found["beginning"], found["end"]) == (0, 10)
    # The first record at or after each time, with its timestamp; none past the last.
    assert found["for_times"] == [
        [0, base],
        [3, base + 3000],
        [4, base + 4000],
        None,
    ]
    read = read_all(java, config, topic, 10)
    assert [r["timestamp"] for r in read] == [base + 1000 * i for i in range(10)]
    assert java.admin(config, "delete_records", topic=topic, partition=0, before=4) == 4
    after = java.call("offsets", config=config, topic=topic, partition=0, timestamps=[base])
    # The beginning moved; the earliest time now finds the first record kept.
    assert (after["beginning"], after["end"], after["for_times"]) == (4, 10, [[4, base + 4000]])


def test_transactions_and_read_committed(java: JavaClients, config: dict[str, Any]) -> None:
    transactions(java, config)


@pytest.mark.parametrize("assignor", [None, COOPERATIVE_STICKY], ids=["eager-range", "cooperative"])
def test_a_classic_group_across_rebalances(
    java: JavaClients, config: dict[str, Any], assignor: str | None
) -> None:
    """With the client's default assignors (range: every partition revoked at each
    rebalance) and with incremental cooperative rebalancing (KIP-429: only the moved
    partitions revoked, in two rounds)."""
    group_rebalances(java, config, assignor=assignor)


def _requests_served(broker: BrokerThread, api: str) -> float:
    """How many requests of `api` the broker has served, by its own /metrics."""
    samples = Admin(broker).metrics().samples
    return sum(
        value
        for (name, labels), value in samples.items()
        if name == "kafka_network_requestmetrics_requests_total" and ("request", api) in labels
    )


def test_admin_topics(java: JavaClients, config: dict[str, Any], broker: BrokerThread) -> None:
    topic = unique("java-admin")
    create_topic(java, config, topic, partitions=5, configs={"cleanup.policy": "compact"})
    assert topic in java.admin(config, "list_topics")
    asked_before = _requests_served(broker, "DescribeTopicPartitions")
    # Two partitions a page: the client follows the broker's cursor for the rest.
    described = java.admin(config, "describe_topics", names=[topic], partition_limit=2)[topic]
    assert _requests_served(broker, "DescribeTopicPartitions") >= asked_before + 3
    broker_id = int(broker.config["broker.id"])
    assert described["internal"] is False
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2, 3, 4]
    assert all(
        p["leader"] == broker_id and p["isr"] == [broker_id] for p in described["partitions"]
    )
    assert "DESCRIBE" in described["authorized_operations"]
    assert java.admin(config, "create_partitions", counts={topic: 7}) == {topic: {"ok": None}}
    grown = java.admin(config, "describe_topics", names=[topic])[topic]
    assert len(grown["partitions"]) == 7
    # Kafka's errors, by the client's exception classes.
    again = java.admin(config, "create_topics", topics=[{"name": topic, "partitions": 1}])
    assert again[topic]["error"]["type"] == "TopicExistsException"
    unknown = java.admin(config, "describe_topics", names=["no-such-topic"])["no-such-topic"]
    assert unknown["error"]["type"] == "UnknownTopicOrPartitionException"
    fewer = java.admin(config, "create_partitions", counts={topic: 3})
    assert fewer[topic]["error"]["type"] == "InvalidPartitionsException"
    assert java.admin(config, "delete_topics", names=[topic]) == {topic: {"ok": None}}
    gone = java.admin(config, "describe_topics", names=[topic])[topic]
    assert gone["error"]["type"] == "UnknownTopicOrPartitionException"


def test_admin_configs(java: JavaClients, config: dict[str, Any], broker: BrokerThread) -> None:
    topic = unique("java-configs")
    create_topic(java, config, topic)
    resource = {"type": "TOPIC", "name": topic}
    changed = java.admin(
        config,
        "alter_configs",
        resources=[{**resource, "ops": [{"key": "retention.ms", "value": "3600000", "op": "SET"}]}],
    )
    assert list(changed.values()) == [{"ok": None}]
    described = java.admin(config, "describe_configs", resources=[resource])[topic]
    assert described["retention.ms"]["value"] == "3600000"
    assert described["retention.ms"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert described["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
    deleted = java.admin(
        config,
        "alter_configs",
        resources=[{**resource, "ops": [{"key": "retention.ms", "op": "DELETE"}]}],
    )
    assert list(deleted.values()) == [{"ok": None}]
    after = java.admin(config, "describe_configs", resources=[resource])[topic]
    assert after["retention.ms"]["source"] == "DEFAULT_CONFIG"
    bad = java.admin(
        config,
        "alter_configs",
        resources=[{**resource, "ops": [{"key": "retention.ms", "value": "soon", "op": "SET"}]}],
    )
    (bad_outcome,) = bad.values()
    assert bad_outcome["error"]["type"] == "InvalidConfigurationException"
    broker_id = broker.config["broker.id"]
    broker_configs = java.admin(
        config, "describe_configs", resources=[{"type": "BROKER", "name": str(broker_id)}]
    )[str(broker_id)]
    assert broker_configs["num.partitions"]["value"] == "1"
    assert broker_configs["log.dirs"]["read_only"] is True


def test_a_consumer_groups_regex_subscription_and_static_member(
    java: JavaClients, config: dict[str, Any]
) -> None:
    consumer_group_regex_and_static(java, config)


def test_a_killed_members_partitions_move_after_its_session(
    java: JavaClients, config: dict[str, Any], tmp_path: Path
) -> None:
    """A KIP-848 member whose JVM is SIGKILLed sends no leave: the coordinator fences it
    when its session ends, and the other member takes its partitions and reads on."""
    topic = unique("java-killed")
    group = unique("java-killed")
    create_topic(java, config, topic, partitions=4)
    member = {
        **config,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
    }
    doomed_jvm = JavaClients(tmp_path / "doomed.log")
    try:
        doomed_jvm.call("member_start", name="doomed", config=member, topic=topic)
        java.call("member_start", name="survivor", config=member, topic=topic)
        wait_for(
            lambda: (member_state(java, "survivor"), member_state(doomed_jvm, "doomed")),
            lambda pair: len(pair[0]["assigned"]) == len(pair[1]["assigned"]) == 2,
        )
        os.kill(doomed_jvm.process.pid, signal.SIGKILL)
        doomed_jvm.process.wait()
        every_partition = [f"{topic}:{p}" for p in range(4)]
        wait_for(lambda: member_state(java, "survivor"), lambda s: s["assigned"] == every_partition)
        produce_batch(java, config, topic, "late", 20, [])
        wait_for(lambda: member_state(java, "survivor")["count"], lambda n: n == 20)
        described = java.admin(config, "describe_groups", groups=[group])[group]
        assert len(described["members"]) == 1  # the killed member fenced
    finally:
        java.call("member_stop", name="survivor")
        doomed_jvm.stop()


def test_a_classic_group_upgraded_to_a_consumer_group_and_back(
    java: JavaClients, config: dict[str, Any]
) -> None:
    mixed_group(java, config)


def test_admin_group_configs(java: JavaClients, config: dict[str, Any]) -> None:
    """The GROUP config resource through the Java AdminClient (incrementalAlterConfigs,
    describeConfigs): a group's own heartbeat interval, the broker's bounds refused."""
    group = unique("java-group-config")
    resource = {"type": "GROUP", "name": group}

    def change(key: str, value: str | None, op: str) -> dict[str, Any]:
        op_spec = {"key": key, "value": value, "op": op}
        (outcome,) = java.admin(
            config, "alter_configs", resources=[{**resource, "ops": [op_spec]}]
        ).values()
        return outcome  # type: ignore[no-any-return]

    assert change("consumer.heartbeat.interval.ms", "1000", "SET") == {"ok": None}
    described = java.admin(config, "describe_configs", resources=[resource])[group]
    assert described["consumer.heartbeat.interval.ms"]["value"] == "1000"
    assert described["consumer.heartbeat.interval.ms"]["source"] == "DYNAMIC_GROUP_CONFIG"
    assert described["consumer.session.timeout.ms"]["source"] == "DEFAULT_CONFIG"
    refused = change("consumer.heartbeat.interval.ms", "100", "SET")["error"]
    assert refused["type"] == "InvalidConfigurationException"
    assert "must be in the range 500 to 15000 inclusive" in refused["message"]
    unknown = change("consumer.unknown.ms", "1", "SET")["error"]
    assert unknown["message"] == "Unknown group config name: consumer.unknown.ms"
    assert change("consumer.heartbeat.interval.ms", None, "DELETE") == {"ok": None}
    after = java.admin(config, "describe_configs", resources=[resource])[group]
    assert after["consumer.heartbeat.interval.ms"]["value"] == "500"  # the broker's


def test_admin_group_offsets(java: JavaClients, config: dict[str, Any]) -> None:
    topic = unique("java-offsets")
    group = unique("java-offsets")
    create_topic(java, config, topic, partitions=2)
    java.call(
        "produce",
        config=config,
        topic=topic,
        records=[{"value": f"v{i}", "partition": i % 2} for i in range(10)],
    )
    java.call(
        "consume",
        config={
            **config,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        },
        topic=topic,
        count=10,
        commit=True,
    )
    assert java.admin(config, "list_group_offsets", group=group) == {
        f"{topic}:0": 5,
        f"{topic}:1": 5,
    }
    listed = java.admin(config, "list_groups")
    assert listed[group]["type"] == "CLASSIC" and listed[group]["state"] == "EMPTY"
    altered = java.admin(config, "alter_group_offsets", group=group, offsets=[[topic, 0, 2]])
    assert altered == {"all": {"ok": None}}
    assert java.admin(config, "list_group_offsets", group=group) == {
        f"{topic}:0": 2,
        f"{topic}:1": 5,
    }
    # The next member of the group starts where the offsets say: three records of
    # partition 0 again, none of partition 1.
    again = java.call(
        "consume",
        config={**config, "group.id": group, "enable.auto.commit": "false"},
        topic=topic,
        count=3,
        timeout_ms=15000,
    )
    assert sorted((r["partition"], r["offset"]) for r in again) == [(0, 2), (0, 3), (0, 4)]
    deleted = java.admin(config, "delete_group_offsets", group=group, partitions=[[topic, 1]])
    assert deleted == {"all": {"ok": None}}
    assert java.admin(config, "list_group_offsets", group=group) == {f"{topic}:0": 2}
    assert java.admin(config, "delete_groups", groups=[group]) == {group: {"ok": None}}
    # A deleted group is no group: DescribeGroups v6 says so (KIP-1043), and the Java
    # admin raises it, as against Kafka 4.4.
    missing = java.admin(config, "describe_groups", groups=[group])[group]
    assert missing["error"]["type"] == "GroupIdNotFoundException"
    assert missing["error"]["message"] == f"Group {group} not found."


def test_admin_describe_cluster(
    java: JavaClients, config: dict[str, Any], broker: BrokerThread
) -> None:
    cluster = java.admin(config, "describe_cluster")
    broker_id = int(broker.config["broker.id"])
    assert cluster["controller"] == broker_id
    assert cluster["nodes"] == [
        {"id": broker_id, "host": "127.0.0.1", "port": broker.port, "rack": None}
    ]
    assert cluster["cluster_id"]
    assert "DESCRIBE" in cluster["authorized_operations"]


def test_a_bad_request_gets_kafkas_exception_and_the_broker_serves_on(
    java: JavaClients, config: dict[str, Any], tmp_path: Path
) -> None:
    topic = unique("java-bad")
    refused = java.admin(config, "create_topics", topics=[{"name": "bad name!", "partitions": 1}])
    assert refused["bad name!"]["error"]["type"] == "InvalidTopicException"
    too_many = java.admin(
        config, "create_topics", topics=[{"name": topic, "partitions": 1, "replication_factor": 3}]
    )
    assert too_many[topic]["error"]["type"] == "InvalidReplicationFactorException"
    large = "x" * (2 * 1024 * 1024)
    with pytest.raises(JavaClientError) as too_large:
        java.call(
            "produce",
            config={**config, "max.request.size": str(4 * 1024 * 1024)},
            topic=unique("java-large"),
            records=[{"value": large}],
        )
    assert too_large.value.type == "RecordTooLargeException"
    create_topic(java, config, topic)
    java.call("produce", config=config, topic=topic, records=[{"value": "after"}])
    assert [r["value"] for r in read_all(java, config, topic, 1)] == ["after"]


def test_a_consumer_group_of_kip_848_across_rebalances(
    java: JavaClients, config: dict[str, Any]
) -> None:
    """group.protocol=consumer: the broker assigns (uniform), the members reconcile with
    ConsumerGroupHeartbeat; the same exactly-once reading as the classic group's."""
    group_rebalances(java, config, group_protocol="consumer")


# --- share groups (KIP-932): the Java client's KafkaShareConsumer -------------------------


def _share_group(bootstrap: str, **configs: str) -> str:
    """A new share group with `configs` (share.auto.offset.reset=earliest besides)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    group = unique("share")
    resource = ConfigResource(ConfigResource.Type.GROUP, group)
    for name, value in {"share.auto.offset.reset": "earliest", **configs}.items():
        resource.add_incremental_config(
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        )
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(15)
    return group


def test_java_and_confluent_share_consumers_share_one_partition(
    java: JavaClients, config: dict[str, Any]
) -> None:
    """A KafkaShareConsumer and confluent-kafka's ShareConsumer in one share group read
    one partition together: each record is delivered to one of them, once."""
    import threading

    from confluent_kafka import ShareConsumer

    topic = unique("java-share")
    create_topic(java, config, topic)
    values = [f"r{i}" for i in range(200)]
    producer = Producer(config)
    for index, value in enumerate(values, 1):
        producer.produce(topic, value.encode(), partition=0)
        if index % 10 == 0:
            producer.flush(10)  # batches of ten: each fetch acquires about one
    assert producer.flush(10) == 0
    group = _share_group(config["bootstrap.servers"])
    confluent: list[str] = []
    stop = threading.Event()

    def share_with_confluent() -> None:
        # A slow worker (a tenth of a second a record): the Java consumer, whose JVM
        # member joins later, finds most of the work left.
        consumer = ShareConsumer({**config, "group.id": group, "max.poll.records": 5})
        consumer.subscribe([topic])
        while not stop.is_set():
            for message in consumer.poll(0.2) or []:
                if not message.error():
                    confluent.append(message.value().decode())
                    time.sleep(0.1)
        consumer.close()

    thread = threading.Thread(target=share_with_confluent)
    thread.start()
    try:
        from_java = java.call(
            "share_consume",
            config={**config, "group.id": group, "max.poll.records": "10"},
            topic=topic,
            count=len(values),
            idle_ms=3000,
            timeout_ms=60000,
        )
    finally:
        stop.set()
        thread.join(30)
    java_values = [r["value"] for r in from_java]
    assert sorted(java_values + confluent) == sorted(values)
    assert java_values and confluent  # both had a share
    assert {r["delivery_count"] for r in from_java} == {1}


def test_java_release_delivers_again_until_the_limit_and_reject_archives(
    java: JavaClients, config: dict[str, Any]
) -> None:
    topic = unique("java-share-acks")
    create_topic(java, config, topic)
    producer = Producer(config)
    for value in ("keep", "again", "poison"):
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(10) == 0
    group = _share_group(config["bootstrap.servers"], **{"share.delivery.count.limit": "3"})
    read = java.call(
        "share_consume",
        config={**config, "group.id": group, "share.acknowledgement.mode": "explicit"},
        topic=topic,
        count=10,
        idle_ms=3000,
        acks={"again": "RELEASE", "poison": "REJECT"},
    )
    deliveries = [(r["value"], r["delivery_count"]) for r in read]
    # Released, "again" comes back with its count up until share.delivery.count.limit;
    # rejected, "poison" never comes back; "keep" was accepted.
    assert [count for value, count in deliveries if value == "again"] == [1, 2, 3]
    assert [v for v in deliveries if v[0] != "again"] == [("keep", 1), ("poison", 1)]


def test_java_share_consumer_reads_committed_only(
    java: JavaClients, config: dict[str, Any]
) -> None:
    topic = unique("java-share-txn")
    create_topic(java, config, topic)
    producer = Producer({**config, "transactional.id": unique("txn")})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", partition=0)
    producer.abort_transaction(15)
    producer.begin_transaction()
    producer.produce(topic, b"committed", partition=0)
    producer.commit_transaction(15)
    group = _share_group(config["bootstrap.servers"], **{"share.isolation.level": "read_committed"})
    read = java.call(
        "share_consume",
        config={**config, "group.id": group},
        topic=topic,
        count=2,
        idle_ms=2000,
    )
    assert [r["value"] for r in read] == ["committed"]


def test_java_holding_past_its_lock_gives_the_records_back(
    java: JavaClients, config: dict[str, Any]
) -> None:
    """A KafkaShareConsumer that holds records without acknowledging them: once their lock
    (share.record.lock.duration.ms) runs out they go to another member, delivered twice."""
    topic = unique("java-share-lock")
    create_topic(java, config, topic)
    producer = Producer(config)
    for value in ("slow-1", "slow-2"):
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(10) == 0
    group = _share_group(config["bootstrap.servers"], **{"share.record.lock.duration.ms": "2000"})
    name = unique("holder")
    held = java.call(
        "share_hold", config={**config, "group.id": group}, topic=topic, count=2, name=name
    )
    try:
        assert [(r["value"], r["delivery_count"]) for r in held] == [("slow-1", 1), ("slow-2", 1)]
        again = java.call(
            "share_consume",
            config={**config, "group.id": group},
            topic=topic,
            count=2,
            timeout_ms=40000,
        )
        assert sorted((r["value"], r["delivery_count"]) for r in again) == [
            ("slow-1", 2),
            ("slow-2", 2),
        ]
    finally:
        java.call("share_hold_close", name=name)


def test_a_java_consumer_killed_mid_batch_loses_nothing(
    java: JavaClients, config: dict[str, Any], tmp_path: Path
) -> None:
    """SIGKILL of a JVM whose KafkaShareConsumer holds records: its connections close, its
    records go back at once without counting the delivery, and another member (confluent's)
    gets every one."""
    from confluent_kafka import ShareConsumer

    topic = unique("java-share-kill")
    create_topic(java, config, topic)
    values = [f"job-{i}" for i in range(10)]
    producer = Producer(config)
    for value in values:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(10) == 0
    group = _share_group(config["bootstrap.servers"])
    doomed = JavaClients(tmp_path / "doomed.log")
    try:
        held = doomed.call(
            "share_hold", config={**config, "group.id": group}, topic=topic, count=10, name="h"
        )
        assert len(held) == 10
        os.kill(doomed.process.pid, signal.SIGKILL)
        doomed.process.wait(10)
    finally:
        doomed.stop()
    consumer = ShareConsumer({**config, "group.id": group})
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        got += [m for m in consumer.poll(0.5) or [] if m.error() is None]
    consumer.close()
    assert sorted(m.value().decode() for m in got) == values
    assert {m.delivery_count() for m in got} == {1}
