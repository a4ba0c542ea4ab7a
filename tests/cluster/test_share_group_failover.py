"""A share group (KIP-932) across the SIGKILL of the broker holding its partition's state
(the share coordinator of its key: the leader of a `__share_group_state` partition,
replicated three times) and of the broker leading its partition, on three brokers. The
leader reaches the coordinator over ReadShareGroupState and WriteShareGroupState when it
is another broker: what was accepted before each kill is never delivered again, and every
record is accepted once in the end."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kio.schema.errors import ErrorCode
from kio.schema.read_share_group_state.v0 import request as read0
from kio.static.primitive import i32

from brook.broker.testing import wait_until
from tests.integration.processes import ServeProcess
from tests.integration.raw_client import RawClient, topic_id

from .harness import Cluster, ZooKeeperView
from .topics import start_three, topic_of

GROUP = "share-failover"
TOPIC = "jobs"
SETTINGS = {
    "offsets.topic.replication.factor": 3,
    "offsets.topic.num.partitions": 1,
    "share.coordinator.state.topic.replication.factor": 3,
    "share.coordinator.state.topic.num.partitions": 3,
    "group.share.min.heartbeat.interval.ms": 200,
    "group.share.heartbeat.interval.ms": 200,
}


def _consumer(bootstrap: str) -> ShareConsumer:
    return ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "share.acknowledgement.mode": "explicit",
        }
    )


def test_accepted_records_stay_accepted_across_the_kills_of_the_leader_and_coordinator(
    cluster: Cluster, zk: ZooKeeperView
) -> None:
    brokers = start_three(cluster, zk, **SETTINGS)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(
        30
    )
    resource = ConfigResource(ConfigResource.Type.GROUP, GROUP)
    resource.add_incremental_config(
        ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
        )
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    values = [f"job-{n}".encode() for n in range(40)]
    for value in values:
        producer.produce(TOPIC, value)
    assert producer.flush(30) == 0

    accepted = _accept(bootstrap, 20)
    # The share partition's state, as its coordinator (and only it) answers for it.
    share_topic = _topic_id(brokers[1].port)
    states = wait_until(
        lambda: _states(brokers.values(), share_topic, lambda s: s[1] >= 20),
        "the accepted records written to __share_group_state",
    )
    assert sorted(error for error, _ in states.values()) == [
        ErrorCode.none,
        ErrorCode.not_coordinator,
        ErrorCode.not_coordinator,
    ]
    coordinator = next(
        broker_id
        for broker_id, broker in brokers.items()
        if states[broker.port][0] == ErrorCode.none
    )
    leader = topic_of(brokers[1].port, TOPIC)[1][0].leader
    # The share-state coordinator dies first (when it is not the partition's leader,
    # which then reaches the new one), then the partition's leader.
    alive = dict(brokers)
    for victim in dict.fromkeys([coordinator, leader]):
        alive.pop(victim).kill()
        port = next(iter(alive.values())).port
        wait_until(
            lambda port=port: topic_of(port, TOPIC)[1][0].leader in alive,
            "the partition led by a live broker",
            timeout=30,
        )
        wanted = 10 if len(alive) == 2 else 40 - len(accepted)
        more = _accept(",".join(b.bootstrap for b in alive.values()), wanted)
        assert not set(more) & set(accepted), sorted(set(more) & set(accepted))
        accepted += more
    if len(accepted) < 40:
        accepted += _accept(",".join(b.bootstrap for b in alive.values()), 40 - len(accepted))
    assert sorted(accepted) == sorted(values)
    # All 40 accepted: the share partition's start offset is past them.
    wait_until(
        lambda: _states(alive.values(), share_topic, lambda s: s[1] == 40),
        "every record accepted in __share_group_state",
    )


def _accept(bootstrap: str, count: int) -> list[bytes]:
    """`count` records accepted by a new member (what it gets past them it releases),
    which then leaves."""
    consumer = _consumer(bootstrap)
    consumer.subscribe([TOPIC])
    accepted: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(accepted) < count and time.monotonic() < deadline:
        for message in consumer.poll(0.5) or []:
            if message.error() is not None:
                continue  # a coordinator or the leader moving: the client tries again
            if len(accepted) < count:
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
                accepted.append(message.value())
            else:
                consumer.acknowledge(message, AcknowledgeType.RELEASE)
        consumer.commit_sync()
    consumer.close()
    assert len(accepted) == count, f"accepted {len(accepted)} of {count}"
    return accepted


def _topic_id(port: int) -> uuid.UUID:
    with RawClient(port) as client:
        return topic_id(client, TOPIC)


def _states(
    brokers: Iterable[ServeProcess],
    topic: uuid.UUID,
    done: Callable[[tuple[int, int]], bool],
) -> dict[int, tuple[int, int]] | None:
    """ReadShareGroupState of the share partition from each broker: (error, start
    offset) by port, once the coordinator's answer satisfies `done`."""
    answers = {}
    for broker in brokers:
        with RawClient(broker.port) as client:
            response = client.request(
                read0.ReadShareGroupStateRequest(
                    group_id=GROUP,
                    topics=(
                        read0.ReadStateData(
                            topic_id=topic,
                            partitions=(
                                read0.PartitionData(partition=i32(0), leader_epoch=i32(-1)),
                            ),
                        ),
                    ),
                )
            )
        result = response.results[0].partitions[0]
        answers[broker.port] = (result.error_code, result.start_offset)
    found = [a for a in answers.values() if a[0] == ErrorCode.none]
    return answers if len(found) == 1 and done(found[0]) else None
