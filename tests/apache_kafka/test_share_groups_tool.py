"""Kafka 4.4's own kafka-share-groups (ShareGroupCommand, from the cached jars, through
Kafka's Java admin client) and `brook share-groups`, side by side against one Brook broker
holding a share group (KIP-932): Kafka's tool lists, describes, resets and deletes Brook's
share groups as it does Kafka's, and Brook's tool prints the same tables, row for row."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from bench.apache_kafka import run_tool
from brook.broker.testing import BrokerThread
from tests.integration.cli import brook
from tests.integration.clients import create_topic, produce

KAFKA_TOOL = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
GROUP = "jobs-app"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    started = BrokerThread(
        tmp_path_factory.mktemp("share-groups-tool") / "data",
        {
            "offsets.topic.num.partitions": 1,
            "group.share.min.heartbeat.interval.ms": 200,
            "group.share.heartbeat.interval.ms": 200,
        },
    ).start()
    try:
        yield started
    finally:
        started.stop()


def _earliest(bootstrap: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.GROUP, group)
    resource.add_incremental_config(
        ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
        )
    )
    admin.incremental_alter_configs([resource])[resource].result(15)


@pytest.fixture(scope="module")
def share_group(broker: BrokerThread, apache_kafka_jars: Path) -> Iterator[ShareConsumer]:
    """Group "jobs-app": one member over topic jobs (2 partitions), 4 of 10 records
    accepted."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "jobs", partitions=2)
    for partition in range(2):
        produce(bootstrap, "jobs", [(None, b"j")] * 5, partition=partition)
    _earliest(bootstrap, GROUP)
    consumer = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": "jobs-worker",
            "share.acknowledgement.mode": "explicit",
            "max.poll.records": 10,
        }
    )
    consumer.subscribe(["jobs"])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        got += [m for m in consumer.poll(0.5) or [] if m.error() is None]
    assert len(got) == 10
    for message in got:
        consumer.acknowledge(message)
    consumer.commit_sync()
    running = True

    def keep_polling() -> None:
        while running:
            consumer.poll(0.1)

    poller = threading.Thread(target=keep_polling, daemon=True)
    poller.start()
    try:
        yield consumer
    finally:
        running = False
        poller.join(10)
        consumer.close()


def rows(text: str) -> list[list[str]]:
    """A tool's table, cell by cell, blank lines dropped, rows sorted after the header
    (Kafka's tool orders rows by its own hash map)."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    return lines[:1] + sorted(lines[1:])


TABLES = [
    pytest.param(["--list"], id="list"),
    pytest.param(["--list", "--state"], id="list-states"),
    pytest.param(["--describe", "--group", GROUP], id="offsets"),
    pytest.param(["--describe", "--group", GROUP, "--members"], id="members"),
    pytest.param(["--describe", "--group", GROUP, "--members", "--verbose"], id="members-verbose"),
    pytest.param(["--describe", "--group", GROUP, "--state"], id="state"),
    pytest.param(["--describe", "--group", GROUP, "--state", "--verbose"], id="state-verbose"),
]


@pytest.mark.parametrize("args", TABLES)
def test_brook_share_groups_prints_kafkas_tables(
    broker: BrokerThread, share_group: ShareConsumer, args: list[str]
) -> None:
    kafka = run_tool(KAFKA_TOOL, "--bootstrap-server", broker.bootstrap, *args)
    assert kafka.returncode == 0, kafka.stderr[-2000:]
    ours = brook("share-groups", "--bootstrap-server", broker.bootstrap, *args)
    assert ours.returncode == 0, ours
    assert rows(ours.stdout) == rows(kafka.stdout)
    assert rows(kafka.stdout)  # something listed, not nothing on both sides


def test_the_offsets_table_has_the_start_offsets_and_lag(
    broker: BrokerThread, share_group: ShareConsumer
) -> None:
    ours = brook(
        "share-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", GROUP
    )
    assert rows(ours.stdout) == [
        ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
        [GROUP, "jobs", "0", "5", "0"],
        [GROUP, "jobs", "1", "5", "0"],
    ]


def test_reset_delete_offsets_and_delete_with_either_tool(
    broker: BrokerThread, apache_kafka_jars: Path
) -> None:
    """An empty group: Kafka's tool resets it, Brook's sees the reset, deletes the topic's
    offsets and then the group, and Kafka's sees each change."""
    bootstrap = broker.bootstrap
    group = "idle-app"
    create_topic(bootstrap, "idle", partitions=1)
    produce(bootstrap, "idle", [(None, b"i")] * 4, partition=0)
    reset = run_tool(
        KAFKA_TOOL,
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        "idle",
        "--to-offset",
        "3",
        "--execute",
    )
    assert reset.returncode == 0, reset.stderr[-2000:]
    described = brook(
        "share-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    assert rows(described.stdout)[1] == [group, "idle", "0", "3", "1"]
    ours = brook(
        "share-groups",
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        "idle",
        "--to-earliest",
        "--execute",
    )
    assert ours.returncode == 0, ours
    kafka = run_tool(KAFKA_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert rows(kafka.stdout)[1] == [group, "idle", "0", "0", "4"]
    deleted = brook(
        "share-groups",
        "--bootstrap-server",
        bootstrap,
        "--delete-offsets",
        "--group",
        group,
        "--topic",
        "idle",
    )
    assert rows(deleted.stdout) == [["TOPIC", "STATUS"], ["idle", "Successful"]]
    kafka = run_tool(KAFKA_TOOL, "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert f"Share group '{group}' has no offset information." in kafka.stdout
    gone = brook("share-groups", "--bootstrap-server", bootstrap, "--delete", "--group", group)
    assert gone.stdout.strip() == f"Deletion of requested share groups ('{group}') was successful."
    listed = run_tool(KAFKA_TOOL, "--bootstrap-server", bootstrap, "--list")
    assert group not in listed.stdout.split()


def test_a_group_with_members_is_not_reset(
    broker: BrokerThread, share_group: ShareConsumer
) -> None:
    ours = brook(
        "share-groups",
        "--bootstrap-server",
        broker.bootstrap,
        "--reset-offsets",
        "--group",
        GROUP,
        "--topic",
        "jobs",
        "--to-earliest",
        "--execute",
    )
    assert ours.returncode != 0 and "has active members" in ours.stderr
    kafka = run_tool(
        KAFKA_TOOL, "--bootstrap-server", broker.bootstrap, "--describe", "--group", "nope"
    )
    assert "GroupIdNotFoundException: Group nope not found." in kafka.stdout + kafka.stderr
