"""Fault injection: errors by Kafka's names (per partition where the API has them),
latency, closed connections, a broker that is down, a stalled disk; from Python
(`brook_broker.faults`), over HTTP (`admin.listener`) and from the shell (`brook faults`).
Real clients meet the faults and recover as they would from a real Kafka's."""

from __future__ import annotations

import datetime
import json
import logging
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from kio.index import load_request_schema
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest as FindCoordinatorV3
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest as FindCoordinatorV4
from kio.schema.metadata.v4.request import MetadataRequest

from brook.broker.faults import FaultSpecError
from brook.broker.testing import BrokerThread, wait_until
from brook.protocol.api_table import ApiKey
from brook.protocol.record_batch import Record, build_batch

from .clients import create_topic, stored_batches
from .raw_client import RawClient, make, nested

TIMEOUT_S = 20


def _produce_two_partitions(port: int, topic: str) -> dict[int, str]:
    request_type = load_request_schema(ApiKey.PRODUCE, 9)
    batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"v")])
    request = make(
        request_type,
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            make(
                nested(request_type, "TopicProduceData"),
                name=topic,
                partition_data=tuple(
                    make(nested(request_type, "PartitionProduceData"), index=i, records=batch)
                    for i in (0, 1)
                ),
            ),
        ),
    )
    with RawClient(port) as client:
        response = client.request(request)
    return {p.index: p.error_code.name for p in response.responses[0].partition_responses}


def test_a_produce_error_fails_only_its_partition_and_only_count_times(
    brook_broker, topic_name, caplog
):
    caplog.set_level(logging.INFO, logger="brook.faults")
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    fault = brook_broker.faults.add(
        api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=2, topic=topic_name, partition=0
    )
    assert _produce_two_partitions(brook_broker.port, topic_name) == {
        0: "not_leader_or_follower",
        1: "none",
    }
    assert stored_batches(brook_broker.data_dir, topic_name, 0) == []  # nothing written
    assert len(stored_batches(brook_broker.data_dir, topic_name, 1)) == 1
    assert _produce_two_partitions(brook_broker.port, topic_name)[0] == "not_leader_or_follower"
    assert _produce_two_partitions(brook_broker.port, topic_name) == {0: "none", 1: "none"}
    assert brook_broker.faults.fired(fault["id"]) == 2
    assert brook_broker.faults.list()["armed"] == []
    fired = [r.getMessage() for r in caplog.records if "fired" in r.getMessage()]
    assert len(fired) == 2 and "NOT_LEADER_OR_FOLLOWER" in fired[0]


def test_real_producers_retry_through_injected_errors(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    fault = brook_broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3)
    producer = Producer({"bootstrap.servers": brook_broker.bootstrap, "linger.ms": 0})
    delivered = []
    producer.produce(topic_name, b"survives", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [None]
    assert brook_broker.faults.fired(fault["id"]) == 3
    kcat = subprocess.run(
        ["kcat", "-C", "-b", brook_broker.bootstrap, "-t", topic_name, "-e", "-q"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    assert kcat.stdout.split() == ["survives"]  # written once, after the retries


def test_a_request_level_error_answers_the_whole_request(brook_broker):
    brook_broker.faults.add(api="FindCoordinator", error="COORDINATOR_LOAD_IN_PROGRESS", count=2)
    with RawClient(brook_broker.port) as client:
        old = client.request(FindCoordinatorV3(key="g", key_type=0))
        new = client.request(FindCoordinatorV4(key_type=0, coordinator_keys=("a", "b")))
        after = client.request(FindCoordinatorV3(key="g", key_type=0))
    assert (old.error_code.name, old.node_id, old.port) == ("coordinator_load_in_progress", -1, -1)
    assert [(c.key, c.error_code.name) for c in new.coordinators] == [
        ("a", "coordinator_load_in_progress"),
        ("b", "coordinator_load_in_progress"),
    ]
    assert after.error_code.name == "none"


def test_a_consumer_group_rides_out_coordinator_errors(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": brook_broker.bootstrap})
    producer.produce(topic_name, b"hello")
    producer.flush(TIMEOUT_S)
    fault = brook_broker.faults.add(api="JoinGroup", error="COORDINATOR_NOT_AVAILABLE", count=2)
    consumer = Consumer(
        {
            "bootstrap.servers": brook_broker.bootstrap,
            "group.id": "riders",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic_name])
    message = None
    while message is None or message.error() is not None:
        message = consumer.poll(1)
    assert message.value() == b"hello"
    consumer.close()
    assert brook_broker.faults.fired(fault["id"]) == 2


def test_metadata_errors_name_the_topic_they_hit(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    create_topic(brook_broker.bootstrap, topic_name + "-other")
    brook_broker.faults.add(api="Metadata", error="LEADER_NOT_AVAILABLE", topic=topic_name)
    with RawClient(brook_broker.port) as client:
        response = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
    errors = {topic.name: topic.error_code.name for topic in response.topics}
    assert errors == {topic_name: "leader_not_available", topic_name + "-other": "none"}


def _recv_all(sock: socket.socket) -> bytes:
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_a_delayed_request_holds_only_its_own_connection(brook_broker):
    brook_broker.faults.add(api="Metadata", delay_ms=3000, count=1)
    with RawClient(brook_broker.port) as slow, RawClient(brook_broker.port) as fast:
        slow.sock.settimeout(0.05)
        slow.send(MetadataRequest(topics=None, allow_auto_topic_creation=False))
        # Another connection is answered at once while the first waits.
        assert fast.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
        with pytest.raises(TimeoutError):
            slow.sock.recv(1)
        slow.sock.settimeout(15)
        from kio.schema.metadata.v4.response import MetadataResponse

        assert slow.receive(MetadataResponse).brokers  # the delayed answer comes, whole


def test_connections_closed_after_or_in_the_middle_of_a_response(brook_broker):
    brook_broker.faults.add(api="Metadata", close="after_response", count=1)
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    with RawClient(brook_broker.port) as client:
        assert client.request(request).brokers  # the response arrives whole...
        assert client.sock.recv(1) == b""  # ...then the broker hangs up
    brook_broker.faults.add(api="Metadata", close="mid_response", count=1)
    with RawClient(brook_broker.port) as client:
        client.send(request)
        data = _recv_all(client.sock)
    size = int.from_bytes(data[:4], "big")
    assert 0 < len(data) - 4 < size  # half a response, then the end of the stream
    # A real client reconnects and carries on.
    brook_broker.faults.add(api="Produce", close="mid_response", count=1)
    producer = Producer({"bootstrap.servers": brook_broker.bootstrap, "linger.ms": 0})
    producer.produce("after-close", b"x")
    assert producer.flush(TIMEOUT_S) == 0


def _connection_refused(port: int) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(5)
        try:
            return sock.recv(1) == b""  # closed before a byte is read
        except ConnectionResetError:
            return True


def test_a_broker_that_is_down_drops_connections_until_it_comes_back(brook_broker):
    fault = brook_broker.faults.add(refuse_connections=True)
    assert _connection_refused(brook_broker.port)
    assert brook_broker.faults.fired(fault["id"]) == 1
    assert brook_broker.faults.clear() == 1
    with RawClient(brook_broker.port) as client:
        assert client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
    # With a duration it comes back by itself.
    brook_broker.faults.add(refuse_connections=True, duration_ms=300)
    wait_until(lambda: not brook_broker.faults.list()["armed"], what="the outage to end")
    with RawClient(brook_broker.port) as client:
        assert client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))


def test_a_stalled_partition_holds_its_appends_until_released(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    fault = brook_broker.faults.add(pause_appends=True, topic=topic_name, partition=0)
    producer = Producer({"bootstrap.servers": brook_broker.bootstrap, "linger.ms": 0})
    delivered = []
    producer.produce(topic_name, b"held", partition=0, on_delivery=lambda e, m: delivered.append(e))
    wait_until(
        lambda: brook_broker.faults.fired(fault["id"]) >= 1,
        tick=lambda: producer.poll(0),
        what="the append to reach the stalled partition",
    )
    assert stored_batches(brook_broker.data_dir, topic_name, 0) == []
    # Another client's appends to another partition go on (this client's connection
    # waits behind its held request, as with Kafka's one-request-at-a-time channels).
    other = Producer({"bootstrap.servers": brook_broker.bootstrap, "linger.ms": 0})
    other.produce(topic_name, b"free", partition=1)
    assert other.flush(TIMEOUT_S) == 0
    assert len(stored_batches(brook_broker.data_dir, topic_name, 1)) == 1
    assert stored_batches(brook_broker.data_dir, topic_name, 0) == []
    assert delivered == []
    brook_broker.faults.clear()
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [None]
    assert len(stored_batches(brook_broker.data_dir, topic_name, 0)) == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"api": "Produse", "error": "NOT_LEADER_OR_FOLLOWER"}, "Unknown API 'Produse'"),
        ({"api": "Produce", "error": "NOT_A_LEADER"}, "Unknown error 'NOT_A_LEADER'"),
        ({"error": "NOT_LEADER_OR_FOLLOWER"}, "needs the api"),
        ({"api": "JoinGroup", "error": "UNKNOWN_MEMBER_ID", "topic": "t"}, "no topics to match"),
        ({"api": "DescribeGroups", "error": "NOT_COORDINATOR"}, "has no error to inject"),
        ({"api": "Produce"}, "Say what to inject"),
        ({"api": "Produce", "delay_ms": -5}, "delay_ms must be a whole number"),
        ({"partition": 0, "pause_appends": True}, "partition needs a topic"),
        ({"api": "Produce", "error": "NONE"}, "injects nothing"),
        ({"api": "Produce", "errors": "X"}, "Unknown fault fields: errors"),
        ({"api": "Fetch", "error": "X", "close": "after_response"}, "One fault at a time"),
    ],
)
def test_faults_that_cannot_be_armed_say_why(brook_broker, spec, message):
    with pytest.raises(FaultSpecError, match=message):
        brook_broker.faults.add(**spec)
    assert brook_broker.faults.list() == {"armed": [], "faults": []}


@pytest.fixture
def admin_broker(tmp_path):
    broker = BrokerThread(tmp_path / "data", {"admin.listener": "http://127.0.0.1:0"}).start()
    try:
        yield broker, f"http://127.0.0.1:{broker.broker.admin.port}"
    finally:
        broker.stop()


def _http(method: str, url: str, body: object = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_admin_endpoint_arms_lists_and_clears_faults(admin_broker, topic_name):
    broker, admin = admin_broker
    create_topic(broker.bootstrap, topic_name, partitions=2)
    status, body = _http(
        "POST",
        admin + "/v1/faults",
        {
            "api": "Produce",
            "error": "NOT_LEADER_OR_FOLLOWER",
            "count": 3,
            "topic": topic_name,
            "partition": 0,
        },
    )
    assert status == 201 and body["armed"][0]["remaining"] == 3
    assert _produce_two_partitions(broker.port, topic_name)[0] == "not_leader_or_follower"
    status, listing = _http("GET", admin + "/v1/faults")
    assert status == 200
    [fault] = listing["armed"]
    assert (fault["fired"], fault["remaining"], fault["error"]) == (1, 2, "NOT_LEADER_OR_FOLLOWER")
    # A bad fault is refused with the reason, and a list with one arms none.
    status, body = _http(
        "POST", admin + "/v1/faults", [{"api": "Fetch", "delay_ms": 10}, {"api": "Nope"}]
    )
    assert status == 400 and "Unknown API 'Nope'" in body["error"]
    assert len(_http("GET", admin + "/v1/faults")[1]["armed"]) == 1
    assert _http("POST", admin + "/v1/faults", b"x".decode())[0] == 400
    assert _http("GET", admin + "/v2/other")[0] == 404
    assert _http("DELETE", admin + "/v1/faults") == (200, {"cleared": 1})
    assert _produce_two_partitions(broker.port, topic_name) == {0: "none", 1: "none"}


def test_brook_faults_from_the_shell(admin_broker, topic_name):
    broker, admin = admin_broker
    brook = [sys.executable, "-m", "brook.broker.cli", "faults"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*brook, *args, "--admin-url", admin],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )

    added = run("add", "--api", "Produce", "--error", "NOT_LEADER_OR_FOLLOWER", "--count", "1")
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["armed"][0]["api"] == "Produce"
    create_topic(broker.bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce(topic_name, b"x")
    assert producer.flush(TIMEOUT_S) == 0
    listing = json.loads(run("list").stdout)
    assert listing["faults"][0]["fired"] == 1 and listing["armed"] == []
    refused = run("add", "--json", '{"api": "Produce", "error": "BOGUS"}')
    assert refused.returncode == 1 and "Unknown error 'BOGUS'" in refused.stderr
    assert json.loads(run("clear").stdout) == {"cleared": 0}
