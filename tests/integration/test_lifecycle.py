"""`brook serve` as an operator meets it: start-up, signals, the files a clean stop
leaves, start-up failures, configuration layers, and --help.

Every broker here is a real `brook serve` process (the console script) on a free port
of 127.0.0.1; each test stops exactly the processes it started.
"""

from __future__ import annotations

import datetime
import importlib
import re
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka.record import MemoryRecordsBuilder
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v7.response import ProduceResponse

from brook.broker.testing import free_port
from brook.protocol.client_wire import (
    decode_response,
    encode_request,
    frame_size,
    peek_correlation_id,
)

from .clients import create_topic
from .processes import read_partition, run_brook, stop_with, watermarks

LISTENING = re.compile(r"listening on (\S+)")


def _serve_args(port: int, data_dir: Path) -> list[str]:
    return [
        "serve",
        "--override",
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override",
        f"log.dirs={data_dir}",
    ]


# --- start ------------------------------------------------------------------------------


def test_starts_on_an_empty_data_dir_and_says_where_it_listens(brokers):
    data_dir = brokers.root / "fresh" / "data"  # not even the parent exists yet
    broker = brokers.start(data_dir=data_dir)
    log_text = broker.wait_for_log("listening on")
    lines = [line for line in log_text.splitlines() if LISTENING.search(line)]
    assert len(lines) == 1, lines
    assert f"PLAINTEXT://127.0.0.1:{broker.port}" in lines[0]
    assert str(data_dir) in lines[0]
    meta = (data_dir / "meta.properties").read_text()
    assert "broker.id=0" in meta and re.search(r"^cluster\.id=\S{22}$", meta, re.M)
    # It serves: a topic round-trips.
    create_topic(broker.bootstrap, "first", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("first", value=b"hello", partition=0)
    assert producer.flush(10) == 0
    assert [m.value() for m in read_partition(broker.bootstrap, "first", 0, 1)] == [b"hello"]
    assert broker.stop() == 0


# --- stop -------------------------------------------------------------------------------


CLIENT_ID = "lifecycle-test"


def _read_frame(sock: socket.socket) -> bytes | None:
    """One response frame, or None when the broker closed the connection."""
    data = b""
    needed = 4
    while len(data) < needed:
        chunk = sock.recv(needed - len(data))
        if not chunk:
            return None
        data += chunk
        if needed == 4 and len(data) == 4:
            needed = 4 + frame_size(data)
    return data[4:]


def _record_batch(values: list[bytes]) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(timestamp=int(time.time() * 1000), key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def _checkpoint(path: Path, topic: str) -> dict[tuple[str, int], int]:
    """Kafka's offset checkpoint file (version 0, a count, then `topic partition offset`
    lines): the entries of `topic`, after checking the whole file's format. (Other
    topics may be there: a consumer's group lookup creates __consumer_offsets.)"""
    lines = path.read_text().splitlines()
    assert lines[0] == "0", f"{path.name}: version line {lines[0]!r}"
    count = int(lines[1])
    assert len(lines) == 2 + count, f"{path.name}: {count} entries promised, {lines[2:]}"
    entries = {}
    for line in lines[2:]:
        name, partition, offset = line.split(" ")
        entries[(name, int(partition))] = int(offset)
    return {key: offset for key, offset in entries.items() if key[0] == topic}


def _fetch(version: int, topic: str, max_wait_ms: int) -> tuple[bytes, type]:
    """A Fetch of partition 0 from offset 0 in `version`, and that version's response type."""
    request = importlib.import_module(f"kio.schema.fetch.v{version}.request")
    response = importlib.import_module(f"kio.schema.fetch.v{version}.response")
    extra = {"forgotten_topics_data": ()} if version >= 7 else {}
    body = request.FetchRequest(
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        topics=(
            request.FetchTopic(
                topic=topic,
                partitions=(
                    request.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                    ),
                ),
            ),
        ),
        **extra,
    )
    return encode_request(body, 2, CLIENT_ID), response.FetchResponse


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False


def _produce_then_park_fetch(
    broker: Any, sock: socket.socket, topic: str, fetch_version: int, max_wait_ms: int
) -> type:
    """Send, in one write, a produce of three records to partition 1 (correlation id 1)
    and a long-polling fetch of the empty partition 0 (correlation id 2), and return once
    the produce is in the log. The broker handles a connection's requests one at a time,
    as Kafka does, so the fetch was read before the watermarks were asked for (its bytes
    arrived with the produce's) and is parked, waiting for data, unanswered."""
    fetch, fetch_response_type = _fetch(fetch_version, topic, max_wait_ms)
    produce = ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(
                    PartitionProduceData(
                        index=1, records=_record_batch([b"in-flight-%d" % i for i in range(3)])
                    ),
                ),
            ),
        ),
    )
    sock.sendall(encode_request(produce, 1, CLIENT_ID) + fetch)
    deadline = time.monotonic() + 10
    while watermarks(broker.bootstrap, topic, 2)[1] != (0, 3):
        assert not _closed_by_peer(sock), "the broker closed the connection"
        assert time.monotonic() < deadline, "the produce was not applied"
        time.sleep(0.02)
    return fetch_response_type


@pytest.mark.parametrize(
    ("signum", "fetch_version"),
    [
        (signal.SIGTERM, 11),
        (signal.SIGINT, 11),
        (signal.SIGTERM, 4),
    ],
    ids=["SIGTERM", "SIGINT", "SIGTERM-fetch-v4"],
)
def test_signal_stops_cleanly_after_answering_requests_in_flight(
    brokers, topic_name, signum, fetch_version
):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, 2)
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=15)
    try:
        fetch_response_type = _produce_then_park_fetch(
            broker, sock, topic_name, fetch_version, max_wait_ms=2000
        )
        assert broker.process is not None
        broker.process.send_signal(signum)

        produced = _read_frame(sock)
        assert produced is not None, "the produce was not answered"
        assert peek_correlation_id(produced) == 1
        produce_response = decode_response(produced, ProduceResponse).body
        partition = produce_response.responses[0].partition_responses[0]
        assert (partition.error_code.value, partition.base_offset) == (0, 0)
        fetched = _read_frame(sock)
        assert fetched is not None, "the in-flight fetch was not answered"
        fetch_response = decode_response(fetched, fetch_response_type).body
        assert peek_correlation_id(fetched) == 2
        assert fetch_response.responses[0].partitions[0].error_code.value == 0
        assert _read_frame(sock) is None  # then the broker closes the connection
    finally:
        sock.close()
    assert broker.process.wait(15) == 0
    text = broker.log_text()
    assert "stopped cleanly" in text
    assert "Traceback" not in text

    data_dir = broker.data_dir
    assert (data_dir / ".kafka_cleanshutdown").exists()
    assert _checkpoint(data_dir / "recovery-point-offset-checkpoint", topic_name) == {
        (topic_name, 0): 0,
        (topic_name, 1): 3,
    }
    # Kafka lists a partition here only when its log start is above its first segment.
    assert _checkpoint(data_dir / "log-start-offset-checkpoint", topic_name) == {}
    assert _checkpoint(data_dir / "replication-offset-checkpoint", topic_name) == {
        (topic_name, 0): 0,
        (topic_name, 1): 3,
    }

    # The next start trusts the clean stop and still has the write.
    broker = brokers.restart(broker)
    text = broker.log_text()
    assert "after a clean shutdown" in text and "Recovering" not in text
    assert not (data_dir / ".kafka_cleanshutdown").exists()  # consumed at start
    values = [m.value() for m in read_partition(broker.bootstrap, topic_name, 1, 3)]
    assert values == [b"in-flight-%d" % i for i in range(3)]
    assert stop_with(broker, signum) == 0


def test_stop_answers_a_fetch_parked_beyond_the_grace_at_once(brokers, topic_name):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, 2)
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=15)
    try:
        _produce_then_park_fetch(broker, sock, topic_name, 11, max_wait_ms=60_000)
        assert broker.process is not None
        broker.process.send_signal(signal.SIGTERM)
        sock.settimeout(3)
        try:
            answers = [_read_frame(sock), _read_frame(sock)]
        except TimeoutError:
            answers = []
        assert len(answers) == 2 and None not in answers, "in-flight requests not answered"
        assert [peek_correlation_id(answer) for answer in answers] == [1, 2]
    finally:
        sock.close()
    assert broker.process.wait(15) == 0


# --- start-up failures ------------------------------------------------------------------


def test_port_in_use_fails_with_a_message(tmp_path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        finished = run_brook(_serve_args(port, tmp_path / "data"))
    assert finished.returncode != 0
    assert re.search(rf"127\.0\.0\.1.*{port}.*address already in use", finished.output), (
        finished.output
    )
    assert "Traceback" not in finished.output


def test_data_dir_in_use_by_another_broker_fails_with_a_message(brokers):
    broker = brokers.start()
    finished = run_brook(_serve_args(free_port(), broker.data_dir))
    assert finished.returncode != 0
    assert "Failed to acquire lock" in finished.output and str(broker.data_dir) in finished.output
    assert "Traceback" not in finished.output
    # The first broker is untouched.
    create_topic(broker.bootstrap, "still-serving", 1)
    assert broker.stop() == 0


def _bad_value_in_file(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    path = tmp_path / "server.properties"
    path.write_text("log.segment.bytes=1\n")
    return ["--config", str(path)], {}


@pytest.mark.parametrize(
    ("make_input", "named"),
    [
        (lambda _: (["--override", "num.partitions=zero"], {}), ["num.partitions", "zero"]),
        (lambda _: (["--override", "log.segment.bytes=1"], {}), ["log.segment.bytes"]),
        (_bad_value_in_file, ["log.segment.bytes"]),
        (lambda _: ([], {"BROOK_NUM_PARTITIONS": "0"}), ["num.partitions"]),
        (lambda _: (["--override", "listeners=nonsense"], {}), ["listeners"]),
        (
            lambda _: (["--override", "listeners=PLAINTEXT://127.0.0.1:70000"], {}),
            ["listeners", "port 70000 is out of range"],
        ),
        (
            lambda _: (["--override", "admin.listener=http://127.0.0.1:99999"], {}),
            ["admin.listener", "port 99999 is out of range"],
        ),
        (
            lambda _: (["--override", "broker.id=2", "--override", "node.id=3"], {}),
            ["broker.id (2) and node.id (3)"],
        ),
        (lambda _: (["--override", "process.roles=controller"], {}), ["process.roles"]),
        (
            lambda _: (["--override", "controller.listener.names=PLAINTEXT"], {}),
            ["controller.listener.names=PLAINTEXT", "serve no client"],
        ),
        (lambda tmp: (["--config", str(tmp / "missing.properties")], {}), ["missing.properties"]),
    ],
    ids=[
        "num.partitions=zero",
        "log.segment.bytes=1",
        "bad-value-in-config-file",
        "bad-value-env",
        "bad-listener",
        "listener-port-out-of-range",
        "admin-port-out-of-range",
        "broker.id-and-node.id-differ",
        "controller-role-only",
        "only-a-controller-listener",
        "missing-config-file",
    ],
)
def test_bad_configuration_stops_start_up(tmp_path, make_input, named):
    extra_args, env = make_input(tmp_path)
    data_dir = tmp_path / "data"
    # Our listener and data dir come as --override too; they never set the key under
    # test, so they cannot mask it.
    args = ["serve", *extra_args, "--override", f"log.dirs={data_dir}"]
    if not any(arg.startswith("listeners=") for arg in extra_args):
        args += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}"]
    finished = run_brook(args, env)
    assert finished.returncode != 0, finished.output
    for name in named:
        assert name in finished.output, finished.output
    assert "listening on" not in finished.output
    assert "Traceback" not in finished.output
    assert not data_dir.exists(), "start-up went on past a bad configuration"


# --- configuration layers ---------------------------------------------------------------


def _partitions_of_auto_created(bootstrap: str, topic: str) -> int:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"auto")  # a producer's metadata request creates it
    assert producer.flush(15) == 0
    return len(producer.list_topics(topic, timeout=10).topics[topic].partitions)


@pytest.mark.parametrize(
    ("env", "overrides", "expected"),
    [
        ({}, {}, 2),
        ({"BROOK_NUM_PARTITIONS": "3", "BROOK_LOG_LEVEL": "DEBUG"}, {}, 3),
        ({"BROOK_NUM_PARTITIONS": "3"}, {"num.partitions": "4"}, 4),
    ],
    ids=["config-file", "env-over-file", "override-over-env"],
)
def test_configuration_layers(brokers, topic_name, env, overrides, expected):
    properties = brokers.root / "server.properties"
    properties.write_text("num.partitions=2\nauto.create.topics.enable=true\n")
    broker = brokers.start(overrides, args=["--config", str(properties)], env=env)
    assert _partitions_of_auto_created(broker.bootstrap, topic_name) == expected
    assert broker.stop() == 0


def test_env_can_disable_what_the_file_enables(brokers, topic_name):
    properties = brokers.root / "server.properties"
    properties.write_text("auto.create.topics.enable=true\n")
    broker = brokers.start(
        args=["--config", str(properties)], env={"BROOK_AUTO_CREATE_TOPICS_ENABLE": "false"}
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    metadata = producer.list_topics(topic_name, timeout=10)
    assert metadata.topics[topic_name].error is not None  # UNKNOWN_TOPIC_OR_PART
    assert topic_name not in {p.name.rsplit("-", 1)[0] for p in broker.data_dir.iterdir()}
    assert broker.stop() == 0


# --- help -------------------------------------------------------------------------------


def test_help():
    top = run_brook(["--help"])
    assert top.returncode == 0
    assert "serve" in top.output and "configs-list" in top.output
    serve = run_brook(["serve", "--help"])
    assert serve.returncode == 0
    for expected in ("--config", "--override", "KEY=VALUE", "BROOK_", "--log-level"):
        assert expected in serve.output, serve.output
    listed = run_brook(["configs-list"])
    assert listed.returncode == 0
    assert re.search(r"^num\.partitions=1 ", listed.output, re.M)
    assert re.search(r"^log\.segment\.bytes=1073741824 ", listed.output, re.M)
