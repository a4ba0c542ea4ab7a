"""The coordinators follow the leadership of their internal topic's partitions: the
new leader loads what its replica copied (committed offsets, groups), the old one
answers NOT_COORDINATOR from then on."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from brook.protocol import coordinator_records as cr

from .harness import ScriptedController

GROUP = "billing"


def _committed(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP})
    try:
        return consumer.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        consumer.close()


def test_committed_offsets_fail_over_with_their_partition(cluster: ScriptedController):
    first = cluster.start(0)
    cluster.start(1)
    cluster.create_topic(
        "__consumer_offsets", [0, 1], partitions=1, configs={"cleanup.policy": "compact"}
    )
    cluster.create_topic("invoices", [0, 1])
    consumer = Consumer({"bootstrap.servers": first.bootstrap, "group.id": GROUP})
    consumer.commit(offsets=[TopicPartition("invoices", 0, 42)], asynchronous=False)
    consumer.close()
    assert _committed(first.bootstrap, "invoices") == 42
    assert cr.group_partition(GROUP, 1) == 0
    cluster.wait_for(
        lambda: (
            cluster.partition_state(1, "__consumer_offsets")["high_watermark"]
            == cluster.partition_state(0, "__consumer_offsets")["log_end_offset"]
        ),
        "the offsets' replica",
    )
    # Broker 1 leads the partition now: it loads the commit from its replica.
    cluster.elect("__consumer_offsets", 0, leader=1)
    second = cluster.brokers[1]

    def loaded() -> bool:
        return bool(
            second.call(
                lambda: (
                    second.broker.groups.runtime.state_of(0) is not None
                    and second.broker.groups.runtime.state_of(0).value == "active"
                )
            )
        )

    cluster.wait_for(loaded, "the new coordinator's load")
    assert _committed(second.bootstrap, "invoices") == 42
    # The old coordinator dropped the partition: it answers NOT_COORDINATOR.
    assert first.call(lambda: first.broker.groups.runtime.state_of(0)) is None


def test_find_coordinator_answers_the_leader_of_the_keys_partition(cluster: ScriptedController):
    from kio.schema.find_coordinator.v4 import request as find4

    from tests.integration.raw_client import RawClient

    first = cluster.start(0)
    second = cluster.start(1)
    cluster.create_topic("__consumer_offsets", [0, 1], partitions=1)

    def locate(port: int) -> tuple[int, int, int]:
        with RawClient(port) as client:
            response = client.request(
                find4.FindCoordinatorRequest(key_type=0, coordinator_keys=(GROUP,))
            )
        found = response.coordinators[0]
        return int(found.error_code), int(found.node_id), int(found.port)

    assert locate(first.port) == locate(second.port) == (0, 0, first.port)
    cluster.elect("__consumer_offsets", 0, leader=1)
    assert locate(first.port) == locate(second.port) == (0, 1, second.port)
    # No leader (its only live replica gone, as the controller would write it): none.
    cluster.elect("__consumer_offsets", 0, leader=-1, isr=[])
    assert locate(first.port) == (15, -1, -1)  # COORDINATOR_NOT_AVAILABLE
