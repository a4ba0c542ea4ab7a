"""An operator's habits from Kafka's tools, carried to `brook`'s: the tools' Kafka names
(`brook consumer-groups`), `--zookeeper` answered as Kafka 3+ answers it, a mistyped
option answered with the subcommand's own usage, and `--version` on every subcommand.

Every test runs the `brook` console script; those that need a broker use a real one.
"""

from __future__ import annotations

import importlib.metadata

import pytest
from confluent_kafka import Consumer, TopicPartition

from .cli import brook

VERSION = importlib.metadata.version("brook-broker")


def test_kafkas_tool_names_run_brooks_tools(brook_broker, topic_name):
    """kafka-consumer-groups.sh and kafka-reassign-partitions.sh by their own names."""
    brook_broker.produce(topic_name, [b"one"], partition=0)
    group = f"habits-{topic_name}"
    consumer = Consumer({"bootstrap.servers": brook_broker.bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    server = ["--bootstrap-server", brook_broker.bootstrap]
    listed = brook("consumer-groups", *server, "--list")
    assert (listed.returncode, listed.stderr) == (0, ""), listed
    assert group in listed.lines
    reassignments = brook("reassign-partitions", *server, "--list")
    assert (reassignments.returncode, reassignments.stderr) == (0, ""), reassignments
    assert reassignments.stdout.strip() == "No partition reassignments found."


@pytest.mark.parametrize(
    ("tool", "name"),
    [
        (["topics", "--list"], "topics"),
        (["consumer-groups", "--list"], "groups"),
        (["configs", "--describe", "--entity-type", "topics"], "configs"),
        (["acls", "--list"], "acls"),
        (["reassign-partitions", "--verify"], "reassign"),
    ],
    ids=lambda value: value if isinstance(value, str) else value[0],
)
def test_zookeeper_is_refused_naming_bootstrap_server(tool, name):
    """Kafka's tools dropped --zookeeper in 3.0; an old script's call says so, in the
    tool's usage, rather than "invalid choice: 'localhost:2181'"."""
    ran = brook(tool[0], "--zookeeper", "localhost:2181", *tool[1:])
    assert ran.returncode == 2
    assert ran.stderr.startswith(f"usage: brook {name} "), ran.stderr
    assert ran.stderr.splitlines()[-1] == (
        f"brook {name}: error: --zookeeper is not supported (Kafka's tools removed it in"
        " 3.0: they talk to the brokers): use --bootstrap-server HOST:PORT"
    )


def test_a_mistyped_option_shows_the_subcommands_usage_and_the_nearest_option():
    ran = brook("topics", "--bootstrap-server", "127.0.0.1:1", "--lst")
    assert ran.returncode == 2
    assert ran.stderr.startswith("usage: brook topics "), ran.stderr
    assert ran.stderr.splitlines()[-1] == (
        "brook topics: error: unrecognized arguments: --lst (did you mean --list?)"
    )


@pytest.mark.parametrize(
    "command", ["topics", "consumer-groups", "configs", "transactions", "dump-log", "serve"]
)
def test_every_subcommand_prints_the_version(command):
    """`kafka-topics.sh --version` prints Kafka's version; `brook topics --version`
    prints Brook's, with nothing else asked of it."""
    ran = brook(command, "--version")
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, f"{VERSION}\n", "")
