"""Kafka's habits on the command line: `brook serve server.properties` with a real Kafka
file (KRaft; the ZooKeeper-flavoured one joins a ZooKeeper: tests/cluster), unknown keys
named in one warning, BROOK_* variables that are not configs, `brook --version`, `brook`
alone, configs-list's values.

Every test runs the `brook` console script as a user does and talks to the broker with
a real client.
"""

from __future__ import annotations

import importlib.metadata
import re
import socket
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from brook.broker.testing import free_port

from .cli import brook
from .clients import create_topic, poll_until
from .processes import read_partition, run_brook

KAFKA_PROPERTIES = Path(__file__).with_name("kafka_properties")
PASSING_OVER = re.compile(r"WARNING .*Passing over \d+ key\(s\) of ")


def _round_trip(bootstrap: str, topic: str) -> None:
    """A record produced through the broker comes back from it."""
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"from a kafka file", partition=0)
    assert producer.flush(15) == 0
    assert [m.value() for m in read_partition(bootstrap, topic, 0, 1)] == [b"from a kafka file"]


def _brokers_in_metadata(bootstrap: str) -> dict[int, str]:
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {broker.id: f"{broker.host}:{broker.port}" for broker in metadata.brokers.values()}


def _port_listens(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _warnings(log_text: str, pattern: re.Pattern[str]) -> list[str]:
    return [line for line in log_text.splitlines() if pattern.search(line)]


# --- server.properties as Kafka ships it ------------------------------------------------


def test_a_kraft_server_properties_starts_brook(brokers, topic_name):
    """Kafka's KRaft file for a combined node: node.id is the broker id, the CONTROLLER
    listener is neither bound nor advertised (one line says so), the keys Brook has no use
    for are one warning, and clients are served on PLAINTEXT."""
    port, controller_port = free_port(), free_port()
    data_dir = brokers.root / "kraft-data"
    text = (KAFKA_PROPERTIES / "kraft-server.properties").read_text()
    # Only the ports and the data dir move (and the listeners bind 127.0.0.1 only).
    text = (
        text.replace("PLAINTEXT://:9092", f"PLAINTEXT://127.0.0.1:{port}")
        .replace("CONTROLLER://:9093", f"CONTROLLER://127.0.0.1:{controller_port}")
        .replace("localhost:9092", f"localhost:{port}")
        .replace("localhost:9093", f"localhost:{controller_port}")
        .replace("/tmp/kraft-combined-logs", str(data_dir))
    )
    properties = brokers.root / "server.properties"
    properties.write_text(text)
    broker = brokers.start(port=port, args=[str(properties)], test_listener=False)

    assert _brokers_in_metadata(broker.bootstrap) == {1: f"localhost:{port}"}
    _round_trip(broker.bootstrap, topic_name)
    assert not _port_listens(controller_port)
    assert "broker.id=1" in (data_dir / "meta.properties").read_text()
    log_text = broker.log_text()
    passed_over = _warnings(log_text, PASSING_OVER)
    assert len(passed_over) == 1, passed_over
    for key in (
        "controller.quorum.voters",
        "num.network.threads",
        "num.io.threads",
        "socket.send.buffer.bytes",
        "num.recovery.threads.per.data.dir",
    ):
        assert key in passed_over[0], passed_over[0]
    # Keys Brook knows are not in the warning.
    for key in (
        "node.id",
        "process.roles",
        "controller.listener.names",
        "log.dirs",
        "transaction.state.log.min.isr",
        "share.coordinator.state.topic.replication.factor",
    ):
        assert f" {key}," not in passed_over[0] and not passed_over[0].endswith(f" {key}")
    controller_lines = [line for line in log_text.splitlines() if "Not listening on" in line]
    assert len(controller_lines) == 1, controller_lines
    assert f"CONTROLLER://127.0.0.1:{controller_port}" in controller_lines[0]
    assert "Traceback" not in log_text
    assert broker.stop() == 0


def _partitions_of_auto_created(bootstrap: str, topic: str) -> int:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"auto")  # the producer's metadata request creates it
    assert producer.flush(15) == 0
    return len(producer.list_topics(topic, timeout=10).topics[topic].partitions)


def test_unknown_keys_of_a_file_are_one_warning_and_the_known_ones_apply(brokers, topic_name):
    properties = brokers.root / "server.properties"
    properties.write_text("first.unknown=1\nnum.partitions=3\nsecond.unknown = x\n")
    broker = brokers.start(args=[str(properties)])
    assert _partitions_of_auto_created(broker.bootstrap, topic_name) == 3
    passed_over = _warnings(broker.log_text(), PASSING_OVER)
    assert len(passed_over) == 1, passed_over
    assert "first.unknown, second.unknown" in passed_over[0]
    assert str(properties) in passed_over[0]
    assert broker.stop() == 0


def test_kafkas_keys_given_as_overrides_are_passed_over_as_a_files_are(brokers, topic_name):
    """`--override num.network.threads=3` is what a file's key gets: one warning (a typo
    of a known key named with it), and the broker starts with what it knows."""
    broker = brokers.start(
        overrides={
            "num.network.threads": 3,
            "num.io.threads": 8,
            "socket.send.buffer.bytes": 102400,
            "offsets.commit.required.acks": -1,
            "zookeeper.set.acl": "false",
            "num.partitons": 4,
            "num.partitions": 2,
        }
    )
    assert _partitions_of_auto_created(broker.bootstrap, topic_name) == 2
    passed_over = _warnings(broker.log_text(), PASSING_OVER)
    assert len(passed_over) == 1, passed_over
    line = passed_over[0]
    assert "of --override" in line
    for key in ("num.network.threads", "num.io.threads", "zookeeper.set.acl"):
        assert key in line
    assert "num.partitons (did you mean num.partitions?)" in line
    assert broker.stop() == 0


def test_the_file_as_an_option_or_an_argument_but_not_both(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=2\n")
    finished = run_brook(["serve", str(properties), "--config", str(properties)])
    assert finished.returncode == 2
    assert "give the properties file once" in finished.output
    assert not (tmp_path / "data").exists()


def test_brook_variables_that_are_not_configs_do_not_stop_the_broker(brokers, topic_name):
    broker = brokers.start(
        env={
            "BROOK_VENV": "/somewhere/.venv",  # test.sh's
            "BROOK_FUZZ_SEED": "7",  # the fuzz tests'
            "BROOK_NOT_A_CONFIG": "1",
            "BROOK_NUM_PARTITIONS": "2",
        }
    )
    assert _partitions_of_auto_created(broker.bootstrap, topic_name) == 2
    warned = _warnings(broker.log_text(), re.compile(r"WARNING .*name no broker config"))
    # One warning, for the variable Brook's own scripts do not set.
    assert len(warned) == 1, warned
    assert "BROOK_NOT_A_CONFIG" in warned[0]
    assert "BROOK_VENV" not in warned[0] and "BROOK_FUZZ_SEED" not in warned[0]
    assert broker.stop() == 0


# --- the command itself -----------------------------------------------------------------


def test_version_prints_the_installed_version():
    finished = run_brook(["--version"])
    assert finished.returncode == 0
    assert finished.output.strip() == importlib.metadata.version("brook-broker")


def test_brook_alone_prints_the_help_as_kafka_tools_do():
    # Kafka's tools print their usage on stderr and exit 1 when given no arguments.
    finished = run_brook([])
    assert finished.returncode == 1
    assert finished.output.startswith("usage: brook")
    for command in ("serve", "configs-list", "topics", "groups", "dump-log", "--version"):
        assert command in finished.output, finished.output
    assert "error" not in finished.output


def test_configs_list_prints_booleans_as_kafka_does():
    finished = run_brook(["configs-list"])
    assert finished.returncode == 0
    assert re.search(r"^auto\.create\.topics\.enable=true ", finished.output, re.M)
    assert re.search(r"^unclean\.leader\.election\.enable=false ", finished.output, re.M)
    assert re.search(r"^log\.cleanup\.policy=delete ", finished.output, re.M)
    assert not re.search(r"=(True|False|\[)", finished.output), finished.output


# --- what the broker logs ---------------------------------------------------------------


def test_a_topic_id_is_logged_as_kafka_tools_print_it(brokers, topic_name):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, 1)
    described = brook("topics", "--bootstrap-server", broker.bootstrap, "--describe")
    printed = re.search(rf"Topic: {topic_name}\tTopicId: (\S+)", described.stdout)
    assert printed, described.stdout
    created = [line for line in broker.log_text().splitlines() if "Created topic" in line]
    assert len(created) == 1, created
    # "1 partition", and the id as kafka-topics.sh --describe prints it (base64).
    assert created[0].endswith(
        f"Created topic {topic_name} with 1 partition (topic id {printed[1]})"
    ), created[0]
    assert broker.stop() == 0


def test_the_first_consumer_group_logs_one_line_for_its_offsets_topic(brokers, topic_name):
    """The group coordinator's __consumer_offsets (50 partitions) is made on the first
    group's first request: one line, not two per partition; nor does a consumer's first
    read of each partition log one."""
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, 3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for partition in range(3):
        producer.produce(topic_name, value=b"v", partition=partition)
    assert producer.flush(15) == 0
    before = len(broker.log_text().splitlines())
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "first-group",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic_name])
    received = poll_until(consumer, lambda got: len(got) >= 3, timeout=30)
    consumer.close()
    assert len(received) == 3
    logged = broker.log_text().splitlines()[before:]
    offsets_lines = [line for line in logged if "__consumer_offsets" in line]
    assert len(offsets_lines) == 1, offsets_lines
    assert "Created topic __consumer_offsets with 50 partitions" in offsets_lines[0]
    per_partition = [line for line in logged if re.search(rf"{topic_name}-\d", line)]
    assert not per_partition, per_partition
    assert broker.stop() == 0


def _log_dir_is_a_file(root: Path) -> tuple[str, str]:
    (root / "a-file").write_text("not a directory\n")
    return str(root / "a-file"), f"Log dir {root / 'a-file'} (log.dirs) is not a directory"


def _second_log_dir_is_a_file(root: Path) -> tuple[str, str]:
    (root / "a-file").write_text("not a directory\n")
    return (
        f"{root / 'good'},{root / 'a-file'}",
        f"Log dir {root / 'a-file'} (log.dirs) is not a directory",
    )


def _log_dir_under_a_file(root: Path) -> tuple[str, str]:
    (root / "a-file").write_text("not a directory\n")
    return str(root / "a-file" / "data"), f"Cannot create log dir {root / 'a-file' / 'data'}"


def _damaged_state_file(name: str):
    def make(root: Path) -> tuple[str, str]:
        (root / "data").mkdir()
        (root / "data" / name).write_text("{ half written")
        return str(root / "data"), f"{root / 'data' / name} is damaged: not valid JSON"

    return make


@pytest.mark.parametrize(
    "make",
    [
        _log_dir_is_a_file,
        _second_log_dir_is_a_file,
        _log_dir_under_a_file,
        _damaged_state_file("brook-broker-configs.json"),
        _damaged_state_file("brook-topic-configs.json"),
        _damaged_state_file("brook-producer-ids.json"),
    ],
    ids=[
        "a-file",
        "second-is-a-file",
        "under-a-file",
        "damaged-broker-configs",
        "damaged-topic-configs",
        "damaged-producer-ids",
    ],
)
def test_a_bad_data_directory_is_named_in_one_line(tmp_path, make):
    log_dirs, message = make(tmp_path)
    finished = run_brook(
        [
            "serve",
            "--override",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "--override",
            f"log.dirs={log_dirs}",
        ]
    )
    assert finished.returncode == 1, finished.output
    errors = [line for line in finished.output.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and message in errors[0], finished.output
    assert "Traceback" not in finished.output
    assert "listening on" not in finished.output
