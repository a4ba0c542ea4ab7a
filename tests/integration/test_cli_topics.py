"""`brook topics` against a real broker: the console script as a subprocess, its output
read as an operator would, and its effects checked through confluent-kafka's AdminClient
and the broker's own state."""

from __future__ import annotations

import base64
import re
import uuid

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from brook.broker.metadata.records import PartitionRecord
from brook.broker.testing import BrokerThread, free_port

from .cli import assert_one_line_error, brook
from .clients import create_topic


def topics(broker: BrokerThread, *args: str):
    return brook("topics", "--bootstrap-server", broker.bootstrap, *args)


def described(bootstrap: str, name: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_topics(TopicCollection([name]))[name].result(15)


def kafka_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def test_help_of_every_subcommand():
    top = brook("--help")
    assert top.returncode == 0
    for command in ("serve", "topics", "configs", "dump-log"):
        assert command in top.stdout
    for command, options in {
        "topics": ["--bootstrap-server", "--create", "--under-replicated-partitions"],
        "configs": ["--entity-type", "--add-config", "--delete-config"],
        "dump-log": ["--print-data-log", "--deep-iteration", "--verify-index-only"],
    }.items():
        ran = brook(command, "--help")
        assert ran.returncode == 0, ran
        assert ran.stdout.startswith(f"usage: brook {command}")
        for option in options:
            assert option in ran.stdout
        assert "examples" in ran.stdout


def test_create_with_partitions_replication_and_configs(brook_broker, topic_name):
    ran = topics(
        brook_broker,
        "--create",
        "--topic",
        topic_name,
        "--partitions",
        "3",
        "--replication-factor",
        "1",
        "--config",
        "retention.ms=60000",
        "--config",
        "cleanup.policy=[compact,delete]",
    )
    assert ran.returncode == 0, ran
    assert ran.stdout == f"Created topic {topic_name}.\n"
    description = described(brook_broker.bootstrap, topic_name)
    assert [p.id for p in description.partitions] == [0, 1, 2]
    assert all(len(p.replicas) == 1 for p in description.partitions)
    configs = brook_broker.call(lambda: dict(brook_broker.broker.metadata.get(topic_name).configs))
    # The broker keeps configs parsed: a long, and a list for the bracketed value.
    assert configs == {"retention.ms": 60000, "cleanup.policy": ["compact", "delete"]}


def test_create_takes_the_broker_defaults(brook_broker, topic_name):
    ran = topics(brook_broker, "create", "--topic", topic_name)  # the action as a word
    assert ran.returncode == 0, ran
    assert len(described(brook_broker.bootstrap, topic_name).partitions) == 1  # num.partitions


def test_create_an_existing_topic(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    ran = topics(brook_broker, "--create", "--topic", topic_name)
    assert_one_line_error(ran, topic_name, "already exists", "TOPIC_ALREADY_EXISTS", code=1)
    assert ran.stdout == ""
    ran = topics(brook_broker, "--create", "--topic", topic_name, "--if-not-exists")
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--config", "retention.ms=soon"], ["retention.ms", "INVALID_CONFIG"]),
        (["--config", "no.such.key=1"], ["no.such.key", "INVALID_CONFIG"]),
        (["--replication-factor", "3"], ["INVALID_REPLICATION_FACTOR"]),
    ],
)
def test_create_rejected_by_the_broker(brook_broker, topic_name, args, fragments):
    ran = topics(brook_broker, "--create", "--topic", topic_name, *args)
    assert_one_line_error(ran, f"cannot create topic {topic_name}", *fragments, code=1)
    assert brook_broker.call(lambda: brook_broker.broker.metadata.get(topic_name)) is None


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--create", "--topic", "no spaces"], "is illegal"),
        (["--create", "--topic", "x" * 250], "is illegal"),
        (["--create", "--topic", "t", "--partitions", "0"], "--partitions must be at least 1"),
        (["--create", "--topic", "t", "--config", "novalue"], "is not KEY=VALUE"),
        (["--create"], "--create needs --topic"),
        (["--alter", "--topic", "t"], "--alter needs --partitions"),
        (["--alter", "--topic", "t", "--partitions", "2", "--config", "a=b"], "brook configs"),
        (["--describe", "--partitions", "2"], "--partitions is only for"),
        (["--list", "--under-replicated-partitions"], "only for --describe"),
        (["--describe", "--topic", "("], "not a valid regular expression"),
        (["list", "--describe"], "give one action"),
        ([], "give one action"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(brook_broker, args, fragment):
    assert_one_line_error(topics(brook_broker, *args), fragment, code=2)


def test_list(brook_broker):
    for name in ("beta", "alpha", "alpha-2"):
        create_topic(brook_broker.bootstrap, name)
    ran = topics(brook_broker, "--list")
    assert (ran.returncode, ran.lines, ran.stderr) == (0, ["alpha", "alpha-2", "beta"], "")
    assert topics(brook_broker, "--list", "--topic", "alpha.*").lines == ["alpha", "alpha-2"]
    assert topics(brook_broker, "--list", "--exclude-internal").lines == [
        "alpha",
        "alpha-2",
        "beta",
    ]


def test_describe_output_is_shaped_like_kafka_topics(brook_broker):
    create_topic(brook_broker.bootstrap, "orders", partitions=2)
    create_topic(brook_broker.bootstrap, "other")
    ran = topics(brook_broker, "--describe", "--topic", "orders")
    assert ran.returncode == 0, ran
    topic_id = kafka_uuid(
        brook_broker.call(lambda: brook_broker.broker.metadata.get("orders")).topic_id
    )
    header, *partitions = ran.lines
    assert re.fullmatch(
        rf"Topic: orders\tTopicId: {re.escape(topic_id)}\tPartitionCount: 2"
        r"\tReplicationFactor: 1\tConfigs: .*",
        header,
    ), header
    assert partitions == [
        "\tTopic: orders\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0",
        "\tTopic: orders\tPartition: 1\tLeader: 0\tReplicas: 0\tIsr: 0",
    ]
    everything = topics(brook_broker, "--describe")
    assert [line.split("\t")[0] for line in everything.lines if line.startswith("Topic:")] == [
        "Topic: orders",
        "Topic: other",
    ]
    assert len(everything.lines) == 2 + 3


def test_describe_a_missing_topic(brook_broker):
    ran = topics(brook_broker, "--describe", "--topic", "nowhere")
    assert_one_line_error(ran, "Topic 'nowhere' does not exist", code=1)
    ran = topics(brook_broker, "--describe", "--topic", "nowhere", "--if-exists")
    assert (ran.returncode, ran.stdout) == (0, "")
    # Describing must not auto-create the topic (auto.create.topics.enable is on).
    assert topics(brook_broker, "--list").lines == []


def test_partition_filters(brook_broker):
    """One broker has nothing under-replicated or leaderless, so the test gives two
    partitions of a topic replicas and leaders that cannot be live, in the broker's own
    state, and checks that each filter shows exactly those partitions and no header."""
    create_topic(brook_broker.bootstrap, "healthy", partitions=2)
    create_topic(brook_broker.bootstrap, "sick", partitions=3)
    for option in ("--under-replicated-partitions", "--unavailable-partitions"):
        ran = topics(brook_broker, "--describe", option)
        assert (ran.returncode, ran.stdout) == (0, ""), ran

    def damage() -> None:
        # As a ZooKeeper change will arrive: broker 7 is a replica of partition 1 but
        # not in sync, and leads partition 2 without being a live broker.
        broker = brook_broker.broker
        topic_id = broker.metadata.get("sick").topic_id
        broker.metadata_publisher.apply(
            [
                PartitionRecord(topic_id, 1, (0, 7), (0,), 0, 0),
                PartitionRecord(topic_id, 2, (0, 7), (0, 7), 7, 1),
            ]
        )

    brook_broker.call(damage)
    ran = topics(brook_broker, "--describe", "--under-replicated-partitions")
    assert ran.lines == ["\tTopic: sick\tPartition: 1\tLeader: 0\tReplicas: 0,7\tIsr: 0"]
    ran = topics(brook_broker, "--describe", "--unavailable-partitions")
    assert len(ran.lines) == 1 and ran.lines[0].startswith("\tTopic: sick\tPartition: 2\t"), ran
    ran = topics(brook_broker, "--describe", "--topic", "healthy", "--unavailable-partitions")
    assert (ran.returncode, ran.stdout) == (0, "")


def test_alter_adds_partitions(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    ran = topics(brook_broker, "--alter", "--topic", topic_name, "--partitions", "5")
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert len(described(brook_broker.bootstrap, topic_name).partitions) == 5
    ran = topics(brook_broker, "--alter", "--topic", topic_name, "--partitions", "3")
    assert_one_line_error(ran, topic_name, "INVALID_PARTITIONS", code=1)
    assert len(described(brook_broker.bootstrap, topic_name).partitions) == 5
    ran = topics(brook_broker, "--alter", "--topic", "missing", "--partitions", "3")
    assert_one_line_error(ran, "Topic 'missing' does not exist", code=1)


def test_delete(brook_broker):
    for name in ("keep", "drop-1", "drop-2"):
        create_topic(brook_broker.bootstrap, name)
    ran = topics(brook_broker, "--delete", "--topic", "drop-.*")
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert topics(brook_broker, "--list").lines == ["keep"]
    assert_one_line_error(
        topics(brook_broker, "--delete", "--topic", "drop-1"), "does not exist", code=1
    )
    ran = topics(brook_broker, "--delete", "--topic", "drop-1", "--if-exists")
    assert ran.returncode == 0, ran


def test_unreachable_broker():
    ran = brook("topics", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list")
    assert_one_line_error(ran, "cannot connect to the broker", "refused", code=1)
    ran = brook("topics", "--bootstrap-server", "nonsense", "--list")
    assert_one_line_error(ran, "is not HOST:PORT", code=2)


def test_command_config_reaches_the_client(brook_broker, tmp_path):
    good = tmp_path / "client.properties"
    good.write_text("# as for kafka-topics.sh --command-config\nclient.id=brook-tools\n")
    ran = topics(brook_broker, "--list", "--command-config", str(good))
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    bad = tmp_path / "bad.properties"
    bad.write_text("no.such.client.property=1\n")
    ran = topics(brook_broker, "--list", "--command-config", str(bad))
    assert_one_line_error(ran, "invalid client configuration", "no.such.client.property", code=1)
