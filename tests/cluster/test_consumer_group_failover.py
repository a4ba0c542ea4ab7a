"""A consumer group of Kafka 4's protocol (KIP-848) across the SIGKILL of its
coordinator's broker, on three brokers: the group's records are replicated with
`__consumer_offsets`, so the new coordinator has the same members at the same epochs;
the members carry on; no committed offset ever goes back; every acknowledged record is
read. The group's config, set through another broker, is kept in ZooKeeper: every
broker describes it, and the new coordinator applies it."""

from __future__ import annotations

import contextlib
import datetime
import itertools
import threading
import time
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.errors import ErrorCode

from brook.broker.testing import wait_until
from tests.integration.groups import consumer_group_view
from tests.integration.raw_client import RawClient
from tests.integration.test_group_configs import SET, alter, describe

from .harness import Cluster, ZooKeeperView
from .test_coordinators import _find_coordinator
from .topics import start_three

GROUP = "kip848-failover"
TOPIC = "orders"
PARTITIONS = 4
GROUP_SETTINGS = {
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 1,
    "group.consumer.min.session.timeout.ms": 500,
    "group.consumer.session.timeout.ms": 6000,  # outlives the failover
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 200,
}


class Member(threading.Thread):
    """A member consuming and committing each record after it, as an application does."""

    def __init__(self, bootstrap: str, name: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([TOPIC])
        self.values: list[bytes] = []
        self.failure: BaseException | None = None
        self.running = True

    def run(self) -> None:
        try:
            while self.running:
                message = self.consumer.poll(0.1)
                if message is None:
                    continue
                if message.error():
                    if message.error().code() in (
                        KafkaError._TRANSPORT,
                        KafkaError._ALL_BROKERS_DOWN,
                    ):
                        continue
                    raise RuntimeError(message.error())
                self.values.append(message.value())
                # A commit refused while the coordinator moves: the next one covers it.
                with contextlib.suppress(KafkaException):
                    self.consumer.commit(message=message, asynchronous=False)
        except BaseException as exc:
            self.failure = exc
        finally:
            self.consumer.close()


def committed(bootstrap: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[
            GROUP
        ].result(10)
    except Exception:
        return {}
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def group_view(brokers: dict[int, Any], ask: int) -> Any:
    """ConsumerGroupDescribe from the group's coordinator, found through broker `ask`."""
    error, coordinator, _ = _find_coordinator(brokers[ask].port, GROUP)
    if error or coordinator not in brokers:
        return None
    return consumer_group_view(brokers[coordinator].port, GROUP)


def test_a_consumer_group_carries_on_across_its_coordinators_kill(
    cluster: Cluster, zk: ZooKeeperView
) -> None:
    brokers = start_three(cluster, zk, **GROUP_SETTINGS)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})]
    )
    created[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acknowledged: list[bytes] = []

    def produce(tag: str, count: int) -> None:
        def delivered(error: Any, message: Any) -> None:
            if error is None:
                acknowledged.append(message.value())

        for i in range(count):
            producer.produce(
                TOPIC, f"{tag}-{i}".encode(), partition=i % PARTITIONS, on_delivery=delivered
            )
        producer.flush(60)

    produce("before", 200)
    # The group's own heartbeat interval, set through broker 2 (ZooKeeper's /config/groups).
    assert alter(brokers[2].port, GROUP, ("consumer.heartbeat.interval.ms", "300", SET)) == (
        ErrorCode.none,
        None,
    )
    for broker in brokers.values():
        wait_until(
            lambda b=broker: (
                describe(b.port, GROUP)[1]["consumer.heartbeat.interval.ms"].value == "300"
            ),
            "every broker to read the group's config",
            20,
        )
    members = [Member(bootstrap, f"member-{i}") for i in range(2)]
    for member in members:
        member.start()

    def stable() -> bool:
        view = group_view(brokers, 1)
        return (
            view is not None
            and view.state == "Stable"
            and sorted(len(p) for p in view.members.values()) == [2, 2]
        )

    wait_until(stable, "the two members to share the four partitions", 60)
    _, coordinator, _ = _find_coordinator(brokers[1].port, GROUP)
    before_kill = group_view(brokers, 1)

    # Committed offsets watched throughout from the brokers that stay: never backwards.
    survivors = [b for i, b in brokers.items() if i != coordinator]
    seen: list[dict[int, int]] = []
    watching = True

    def watch() -> None:
        while watching:
            found = committed(",".join(b.bootstrap for b in survivors))
            if found:
                seen.append(found)
            time.sleep(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    produce("during", 200)
    brokers[coordinator].kill()
    produce("after", 200)
    zk.wait_broker_ids(sorted(i for i in brokers if i != coordinator))
    wait_until(
        lambda: (
            set(acknowledged) <= {v for m in members for v in m.values}
            or any(m.failure for m in members)
        ),
        "every acknowledged record to be read",
        120,
    )
    assert [m.failure for m in members] == [None, None]
    # The new coordinator has the group: the same members, no one had to rejoin.
    alive = {i: b for i, b in brokers.items() if i != coordinator}
    after = group_view(alive, next(iter(alive)))
    assert after is not None and after.member_ids == before_kill.member_ids
    # The new coordinator tells a member the group's interval.
    new_coordinator = _find_coordinator(next(iter(alive.values())).port, GROUP)[1]
    with RawClient(brokers[new_coordinator].port) as client:
        joined = client.request(
            ConsumerGroupHeartbeatRequest(
                group_id=GROUP,
                member_id="late-member",
                member_epoch=0,
                rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=(TOPIC,),
                topic_partitions=(),
            )
        )
    assert (joined.error_code, joined.heartbeat_interval) == (
        ErrorCode.none,
        datetime.timedelta(milliseconds=300),
    )
    watching = False
    watcher.join(10)
    for member in members:
        member.running = False
    for member in members:
        member.join(30)
    for earlier, later in itertools.pairwise(seen):
        for partition, offset in earlier.items():
            assert later.get(partition, offset) >= offset, (partition, earlier, later)
    assert len(acknowledged) == 600
