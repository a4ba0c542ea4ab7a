"""Replication with ZooKeeper as the source of truth: acks=all with min.insync.replicas=2,
the same bytes in every replica's log dir, a SIGKILLed leader replaced from the ISR with
the next leader epoch while clients go on, the killed broker rejoining the ISR, two
brokers down refusing acks=all but still serving reads, unclean election only when
enabled, and producer ids unique across brokers."""

from __future__ import annotations

import datetime
import json

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from brook.protocol.errors import ErrorCode
from tests.integration.processes import read_partition
from tests.integration.raw_client import RawClient

from .harness import Cluster, ZooKeeperView, eventually
from .topics import start_three, state_of, topic_of


def _create(bootstrap: str, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([topic], operation_timeout=20)[topic.topic].result(timeout=30)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> list[tuple[int, int]]:
    """acks=all, idempotent; returns (partition, offset) of each, raising on any error."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )
    acked: list[tuple[int, int]] = []
    errors: list[KafkaError] = []

    def report(error: KafkaError | None, message) -> None:  # type: ignore[no-untyped-def]
        if error is not None:
            errors.append(error)
        else:
            acked.append((message.partition(), message.offset()))

    for value in values:
        producer.produce(topic, value, partition=0, on_delivery=report)
        producer.poll(0)
    assert producer.flush(90) == 0
    assert errors == []
    return acked


def _segments(broker, topic: str) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    directory = broker.data_dir / f"{topic}-0"
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.log"))}


def test_acks_all_a_killed_leader_and_its_return(cluster: Cluster, zk: ZooKeeperView):
    brokers = start_three(cluster, zk, **{"min.insync.replicas": 2})
    _create(brokers[1].bootstrap, NewTopic("ledger", 1, 3))
    first = [f"before-{i}".encode() for i in range(200)]
    acked = _produce(brokers[2].bootstrap, "ledger", first)
    assert [offset for _, offset in acked] == list(range(200))

    # Every replica holds the same bytes (the followers fetch up to the leader's end).
    leader = state_of(zk, "ledger", 0)["leader"]
    expected = _segments(brokers[leader], "ledger")
    for broker in brokers.values():
        eventually(lambda b=broker: _segments(b, "ledger"), lambda found: found == expected)

    # SIGKILL the leader while a producer goes on: a new leader from the ISR, with the
    # next leader epoch, and the producer sees no error.
    old_state = state_of(zk, "ledger", 0)
    survivor = next(i for i in brokers if i != leader)
    producer = Producer(
        {
            "bootstrap.servers": brokers[survivor].bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
        }
    )
    delivered: list[int] = []
    failed: list[KafkaError] = []

    def report(error, message) -> None:  # type: ignore[no-untyped-def]
        (failed.append(error) if error is not None else delivered.append(message.offset()))

    for i in range(50):
        producer.produce("ledger", f"during-{i}".encode(), partition=0, on_delivery=report)
    producer.poll(0)
    brokers[leader].kill()
    zk.wait_data(
        "/brokers/topics/ledger/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["leader"] not in (leader, -1),
    )
    new_state = state_of(zk, "ledger", 0)
    assert new_state["leader_epoch"] == old_state["leader_epoch"] + 1
    assert new_state["leader"] in old_state["isr"]
    assert leader not in new_state["isr"]
    for i in range(50, 100):
        producer.produce("ledger", f"during-{i}".encode(), partition=0, on_delivery=report)
    assert producer.flush(90) == 0
    assert failed == [] and len(delivered) == 100

    # Everything acknowledged is there, in order, read from a survivor.
    records = read_partition(brokers[survivor].bootstrap, "ledger", 0, 300)
    values = [r.value() for r in records]
    assert values[:200] == first
    assert sorted(values[200:]) == sorted(f"during-{i}".encode() for i in range(100))

    # The killed broker comes back, catches up and rejoins the ISR.
    brokers[leader] = cluster.restart(brokers[leader], leader, extra={"min.insync.replicas": 2})
    zk.wait_data(
        "/brokers/topics/ledger/partitions/0/state",
        lambda data, _: data is not None and sorted(json.loads(data)["isr"]) == [1, 2, 3],
    )
    current = state_of(zk, "ledger", 0)["leader"]
    expected = _segments(brokers[current], "ledger")
    eventually(lambda: _segments(brokers[leader], "ledger"), lambda found: found == expected)

    # Two brokers down: the ISR is the leader alone, acks=all refused, reads go on.
    for other in [i for i in brokers if i != current]:
        brokers[other].kill()
    zk.wait_data(
        "/brokers/topics/ledger/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["isr"] == [current],
    )
    # The leader itself knows (its cache and partition change together).
    eventually(
        lambda: topic_of(brokers[current].port, "ledger")[1][0].isr, lambda isr: isr == (current,)
    )
    assert _produce_error(brokers[current].port, "ledger") == ErrorCode.not_enough_replicas
    assert len(read_partition(brokers[current].bootstrap, "ledger", 0, 300)) == 300


def _produce_error(port: int, topic: str) -> int:
    """The error of one acks=all Produce v9 of one record to partition 0."""
    from kio.schema.produce.v9 import request as produce9

    from brook.protocol.record_batch import Record, build_batch

    with RawClient(port) as client:
        response = client.request(
            produce9.ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout=datetime.timedelta(seconds=5),
                topic_data=(
                    produce9.TopicProduceData(
                        name=topic,
                        partition_data=(
                            produce9.PartitionProduceData(
                                index=0,
                                records=build_batch([Record(0, 1_700_000_000_000, None, b"x")]),
                            ),
                        ),
                    ),
                ),
            )
        )
    return response.responses[0].partition_responses[0].error_code


def test_unclean_election_only_when_enabled(cluster: Cluster, zk: ZooKeeperView):
    brokers = start_three(cluster, zk)
    _create(brokers[1].bootstrap, NewTopic("fragile", 1, replica_assignment=[[1, 2]]))
    zk.wait_data(
        "/brokers/topics/fragile/partitions/0/state",
        lambda data, _: data is not None and sorted(json.loads(data)["isr"]) == [1, 2],
    )
    # The follower goes first (the ISR is the leader alone), then the leader.
    brokers[2].kill()
    zk.wait_data(
        "/brokers/topics/fragile/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["isr"] == [1],
    )
    brokers[1].kill()
    brokers[2] = cluster.restart(brokers[2], 2)
    zk.wait_broker_ids([2, 3])
    # Broker 2 is live but not in the ISR: the partition stays without a leader.
    zk.wait_data(
        "/brokers/topics/fragile/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["leader"] == -1,
    )
    eventually(
        lambda: topic_of(brokers[3].port, "fragile")[1][0].error,
        lambda error: error == ErrorCode.leader_not_available,
    )
    assert state_of(zk, "fragile", 0)["isr"] == [1]

    # Enabled for the topic: broker 2 leads, the ISR is itself.
    admin = AdminClient({"bootstrap.servers": brokers[3].bootstrap})
    resource = ConfigResource(
        "topic",
        "fragile",
        incremental_configs=[
            ConfigEntry(
                "unclean.leader.election.enable",
                "true",
                incremental_operation=AlterConfigOpType.SET,
            )
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    zk.wait_data(
        "/brokers/topics/fragile/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["leader"] == 2,
    )
    state = state_of(zk, "fragile", 0)
    assert state["isr"] == [2]
    # The controller says so in its log (the line follows its write to ZooKeeper).
    controller = brokers[zk.json("/controller")["brokerid"]]
    assert "UNCLEAN election, leader 2" in controller.wait_for_log("UNCLEAN election")


def test_producer_ids_are_unique_across_brokers(cluster: Cluster, zk: ZooKeeperView):
    brokers = start_three(cluster, zk)
    from kio.schema.init_producer_id.v4 import request as init4

    seen: dict[int, list[int]] = {}
    for broker_id, broker in brokers.items():
        with RawClient(broker.port) as client:
            for _ in range(3):
                response = client.request(
                    init4.InitProducerIdRequest(
                        transactional_id=None,
                        transaction_timeout=datetime.timedelta(seconds=60),
                        producer_id=-1,
                        producer_epoch=-1,
                    )
                )
                assert response.error_code == ErrorCode.none
                seen.setdefault(broker_id, []).append(response.producer_id)
    every = [pid for ids in seen.values() for pid in ids]
    assert len(set(every)) == len(every) == 9
    # Each broker reserved a block of 1000 of its own; the latest is in Kafka's JSON.
    starts = sorted(ids[0] for ids in seen.values())
    assert starts == [0, 1000, 2000]
    block = zk.json("/latest_producer_id_block")
    assert block["version"] == 1 and block["block_start"] == "2000"
    assert block["block_end"] == "2999" and block["broker"] in brokers


def test_python_clients_go_on_through_a_leader_kill(cluster: Cluster, zk: ZooKeeperView):
    """kafka-python and aiokafka producers at acks=all, and their consumers, through the
    SIGKILL of the partition's leader: no error reaches the application."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    brokers = start_three(cluster, zk, **{"min.insync.replicas": 2})
    _create(brokers[1].bootstrap, NewTopic("stream", 1, 3))
    leader = state_of(zk, "stream", 0)["leader"]
    others = [i for i in brokers if i != leader]
    bootstrap = [brokers[i].bootstrap for i in others]

    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", retries=100, retry_backoff_ms=200
    )
    sent = [producer.send("stream", f"kp-{i}".encode(), partition=0) for i in range(20)]
    assert [f.get(timeout=30).offset for f in sent] == list(range(20))

    async def aiokafka_round(values: list[bytes]) -> list[int]:
        aio = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", retry_backoff_ms=200)
        await aio.start()
        try:
            return [(await aio.send_and_wait("stream", v, partition=0)).offset for v in values]
        finally:
            await aio.stop()

    assert asyncio.run(aiokafka_round([f"aio-{i}".encode() for i in range(20)])) == list(
        range(20, 40)
    )

    brokers[leader].kill()
    # Both keep producing while the controller elects a new leader.
    sent = [producer.send("stream", f"kp-{i}".encode(), partition=0) for i in range(20, 40)]
    offsets = [f.get(timeout=60).offset for f in sent]
    producer.close()
    assert offsets == sorted(offsets) and len(set(offsets)) == 20
    after = asyncio.run(aiokafka_round([f"aio-{i}".encode() for i in range(20, 40)]))
    assert len(set(after)) == 20
    new_state = state_of(zk, "stream", 0)
    assert new_state["leader"] in others and new_state["leader_epoch"] == 1

    expected = {f"kp-{i}".encode() for i in range(40)} | {f"aio-{i}".encode() for i in range(40)}
    consumer = KafkaConsumer(
        "stream",
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
        group_id=None,
    )
    seen = []
    for message in consumer:
        seen.append(message.value)
        if len(seen) == 80:
            break
    consumer.close()
    assert set(seen) == expected and len(seen) == 80

    async def aiokafka_read() -> list[bytes]:
        reader = AIOKafkaConsumer(
            "stream", bootstrap_servers=bootstrap, auto_offset_reset="earliest"
        )
        await reader.start()
        try:
            values: list[bytes] = []
            while len(values) < 80:
                batch = await reader.getmany(timeout_ms=1000)
                for records in batch.values():
                    values += [r.value for r in records]
            return values
        finally:
            await reader.stop()

    assert set(asyncio.run(asyncio.wait_for(aiokafka_read(), 60))) == expected


def test_a_new_controller_repairs_what_its_predecessor_left(cluster: Cluster, zk: ZooKeeperView):
    """A controller frozen (SIGSTOP) while a partition is left without a leader and a
    topic without partition states: the next controller, once elected, repairs both."""
    import os
    import signal

    brokers = start_three(cluster, zk)
    _create(brokers[1].bootstrap, NewTopic("halfway", 1, replica_assignment=[[1, 2, 3]]))
    zk.wait_data(
        "/brokers/topics/halfway/partitions/0/state",
        lambda data, _: data is not None and len(json.loads(data)["isr"]) == 3,
    )
    controller = zk.json("/controller")["brokerid"]
    assert brokers[controller].process is not None
    os.kill(brokers[controller].process.pid, signal.SIGSTOP)
    try:
        live = [i for i in brokers if i != controller]
        # What a controller that died halfway leaves: a leaderless partition whose ISR
        # has live members, and a topic whose states were never written.
        state = zk.json("/brokers/topics/halfway/partitions/0/state")
        state.update(leader=-1, isr=live)
        zk.client.set(
            zk.path("/brokers/topics/halfway/partitions/0/state"), json.dumps(state).encode()
        )
        zk.client.create(
            zk.path("/brokers/topics/orphan"),
            json.dumps(
                {"version": 3, "topic_id": "AAECAwQFBgcICQoLDA0ODw", "partitions": {"0": live}}
            ).encode(),
        )
        successor = zk.wait_controller(lambda c: c is not None and c != controller)
    finally:
        brokers[controller].kill()
    zk.wait_data(
        "/brokers/topics/halfway/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["leader"] in live,
    )
    repaired = state_of(zk, "halfway", 0)
    assert repaired["leader_epoch"] == state["leader_epoch"] + 1
    assert repaired["controller_epoch"] == zk.controller_epoch()
    zk.wait_data("/brokers/topics/orphan/partitions/0/state", lambda data, _: data is not None)
    assert state_of(zk, "orphan", 0)["leader"] == live[0]
    assert successor in live


def test_the_last_isr_member_leads_again_when_it_returns(cluster: Cluster, zk: ZooKeeperView):
    brokers = start_three(cluster, zk)
    _create(brokers[3].bootstrap, NewTopic("patient", 1, replica_assignment=[[1, 2]]))
    acked = _produce(brokers[3].bootstrap, "patient", [b"kept-1", b"kept-2"])
    assert [offset for _, offset in acked] == [0, 1]
    brokers[2].kill()
    zk.wait_data(
        "/brokers/topics/patient/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["isr"] == [1],
    )
    brokers[1].kill()
    zk.wait_data(
        "/brokers/topics/patient/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["leader"] == -1,
    )
    offline = state_of(zk, "patient", 0)
    assert offline["isr"] == [1]

    # Broker 1 registers again: the controller elects it, cleanly, with the next epoch.
    brokers[1] = cluster.restart(brokers[1], 1)
    zk.wait_data(
        "/brokers/topics/patient/partitions/0/state",
        lambda data, _: data is not None and json.loads(data)["leader"] == 1,
    )
    assert state_of(zk, "patient", 0)["leader_epoch"] == offline["leader_epoch"] + 1
    records = read_partition(brokers[3].bootstrap, "patient", 0, 2)
    assert [r.value() for r in records] == [b"kept-1", b"kept-2"]
