"""Kafka 4.4's own kafka-consumer-groups (ConsumerGroupCommand, from the cached jars) and
`brook groups`, side by side against one Brook broker holding a consumer group of Kafka
4's protocol (KIP-848) and a classic group: Kafka's tool reads Brook's groups as it
reads Kafka's, and Brook's tool prints the same tables, row for row."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from bench.apache_kafka import run_tool
from brook.broker.testing import BrokerThread, wait_until
from tests.integration.cli import brook
from tests.integration.clients import create_topic, produce
from tests.integration.groups import consumer_group_view

KAFKA_TOOL = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    started = BrokerThread(
        tmp_path_factory.mktemp("groups-tool") / "data",
        {
            "offsets.topic.num.partitions": 1,
            "group.consumer.min.heartbeat.interval.ms": 200,
            "group.consumer.heartbeat.interval.ms": 200,
        },
    ).start()
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def groups(broker: BrokerThread, apache_kafka_jars: Path) -> Iterator[None]:
    """Group "orders-app" (KIP-848, two members over topics orders and audit) and group
    "legacy" (classic, one member), each having committed some offsets."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "orders", partitions=3)
    create_topic(bootstrap, "audit", partitions=2)
    for partition in range(3):
        produce(bootstrap, "orders", [(None, b"o")] * (5 + partition), partition=partition)
    members = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "orders-app",
                "group.protocol": "consumer",
                "client.id": f"orders-{name}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        for name in ("a", "b")
    ]
    legacy = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "legacy",
            "client.id": "legacy-client",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    for member in members:
        member.subscribe(["orders", "audit"])
    legacy.subscribe(["orders"])
    everyone = [*members, legacy]

    def settled() -> bool:
        for consumer in everyone:
            consumer.poll(0.05)
        view = consumer_group_view(broker.port, "orders-app")
        return (
            view is not None
            and view.state == "Stable"
            and sorted(len(p) for p in view.members.values()) == [2, 3]
            and len(legacy.assignment()) == 3
        )

    wait_until(settled, "both groups to settle", 60)
    members[0].commit(offsets=[TopicPartition("orders", 0, 3)], asynchronous=False)
    legacy.commit(offsets=[TopicPartition("orders", 1, 6)], asynchronous=False)
    # Keep them members while the tools look (each heartbeat keeps its session).
    running = True

    def keep_polling() -> None:
        while running:
            for consumer in everyone:
                consumer.poll(0.05)

    poller = threading.Thread(target=keep_polling, daemon=True)
    poller.start()
    try:
        yield
    finally:
        running = False
        poller.join(10)
        for consumer in everyone:
            consumer.close()


def rows(text: str) -> list[list[str]]:
    """A tool's table, cell by cell, blank lines dropped, rows sorted after the header
    (Kafka's tool orders member rows by its own hash map)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return lines[:1] + sorted(lines[1:])


TABLES = [
    pytest.param(["--list", "--type"], id="list-types"),
    pytest.param(["--list", "--state"], id="list-states"),
    pytest.param(["--list", "--type", "consumer"], id="list-consumer-groups"),
    pytest.param(["--describe", "--group", "orders-app"], id="offsets"),
    pytest.param(["--describe", "--group", "orders-app", "--members"], id="members"),
    pytest.param(
        ["--describe", "--group", "orders-app", "--members", "--verbose"], id="members-verbose"
    ),
    pytest.param(["--describe", "--group", "orders-app", "--state"], id="state"),
    pytest.param(
        ["--describe", "--group", "orders-app", "--state", "--verbose"], id="state-verbose"
    ),
    pytest.param(
        ["--describe", "--group", "legacy", "--members", "--verbose"], id="classic-members-verbose"
    ),
    pytest.param(["--describe", "--group", "legacy", "--state", "--verbose"], id="classic-state"),
]


@pytest.mark.parametrize("args", TABLES)
def test_brook_groups_prints_kafkas_tables(
    broker: BrokerThread, groups: None, args: list[str]
) -> None:
    kafka = run_tool(KAFKA_TOOL, "--bootstrap-server", broker.bootstrap, *args)
    assert kafka.returncode == 0, kafka.stderr[-2000:]
    ours = brook("groups", "--bootstrap-server", broker.bootstrap, *args)
    assert ours.returncode == 0, ours
    assert rows(ours.stdout) == rows(kafka.stdout)
    assert len(rows(kafka.stdout)) > 1  # a table with rows, not a header alone


def test_both_tools_refuse_an_unknown_group(broker: BrokerThread, groups: None) -> None:
    kafka = run_tool(
        KAFKA_TOOL, "--bootstrap-server", broker.bootstrap, "--describe", "--group", "nope"
    )
    ours = brook("groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", "nope")
    # Kafka 4.4's tool fails as it fails against Kafka 4.4 (DescribeGroups v6 answers
    # GROUP_ID_NOT_FOUND, KIP-1043); Brook's says so in its own words.
    assert "GroupIdNotFoundException: Group nope not found." in kafka.stdout + kafka.stderr
    assert ours.returncode != 0 and "consumer group 'nope' does not exist" in ours.stderr
