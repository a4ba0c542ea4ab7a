"""`brook.emulate.release` (`brook serve --emulate 2.8`): ApiVersions advertises an Apache
Kafka release's ranges cut to Brook's, other versions are refused as unserved ones are,
and real clients take their fallback paths and still produce, consume and run a group.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import re
import socket
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer
from kio.index import load_request_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3 import request as api_versions3
from kio.schema.api_versions.v4 import request as api_versions4

from brook.broker.client import ConnectionClosedError
from brook.broker.config.broker_config import BrokerConfig, ConfigError
from brook.broker.testing import BrokerThread, wait_until
from brook.protocol.api_table import SERVED, ApiKey
from brook.protocol.client_wire import decode_response, encode_request, frame_size
from brook.protocol.releases import KNOWN_RELEASES, RELEASE_RANGES

from .cli import assert_one_line_error, brook
from .clients import create_topic
from .groups import broker_committed
from .raw_client import RawClient, make, nested
from .test_kcat import KCAT, kcat, kcat_consume, kcat_produce

# Kafka 2.8's ApiVersions (recorded from its broker) cut to the ranges Brook serves: Fetch
# from v4 and ListOffsets from v1 (KIP-896 floors), Produce advertised from v0 as Brook does.
KAFKA_2_8 = {
    ApiKey.PRODUCE: (0, 9),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (1, 6),
    ApiKey.METADATA: (0, 11),
    ApiKey.OFFSET_COMMIT: (2, 8),
    ApiKey.OFFSET_FETCH: (1, 7),
    ApiKey.FIND_COORDINATOR: (0, 3),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 4),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 4),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (1, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 0),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.CONTROLLED_SHUTDOWN: (1, 3),
    ApiKey.DESCRIBE_ACLS: (1, 2),
    ApiKey.CREATE_ACLS: (1, 2),
    ApiKey.DELETE_ACLS: (1, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
}
# 3.3 over 2.8: topic ids in Fetch/Metadata (KIP-516), KIP-699's batched FindCoordinator,
# KIP-800/814 JoinGroup and LeaveGroup, and the transaction admin APIs of 3.0 (KIP-664).
KAFKA_3_3 = {
    **KAFKA_2_8,
    ApiKey.FETCH: (4, 13),
    ApiKey.LIST_OFFSETS: (1, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.OFFSET_FETCH: (1, 8),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 0),
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
}
EXPECTED = {"2.8": KAFKA_2_8, "3.3": KAFKA_3_3}

EMULATE_2_8 = pytest.mark.brook_config(brook_emulate_release="2.8")


def emulating(release: str) -> Any:
    """A parameter that runs the test against a broker emulating `release`."""
    return pytest.param(
        release, marks=pytest.mark.brook_config(brook_emulate_release=release), id=release
    )


def api_versions(port: int) -> Any:
    """ApiVersions v3 (what librdkafka sends first) over a raw socket."""
    with RawClient(port) as client:
        return client.request(
            api_versions3.ApiVersionsRequest(
                client_software_name="emulate-test", client_software_version="1"
            )
        )


def advertised(response: Any) -> dict[int, tuple[int, int]]:
    return {entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys}


def metadata_request(version: int) -> Any:
    return make(
        load_request_schema(ApiKey.METADATA, version),
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


# --- ApiVersions -----------------------------------------------------------------------


@pytest.mark.parametrize("release", [emulating("2.8"), emulating("3.3")])
def test_api_versions_lists_the_release_cut_to_brook(brook_broker, release):
    response = api_versions(brook_broker.port)
    assert response.error_code == 0
    assert advertised(response) == EXPECTED[release]
    # A ZooKeeper-mode broker before 4.0 advertises no feature, and no finalized epoch.
    assert response.supported_features == ()
    assert response.finalized_features == ()
    assert response.finalized_features_epoch == -1


@pytest.mark.parametrize("release", KNOWN_RELEASES)
def test_every_known_release_advertises_within_brook_and_the_release(tmp_path, release):
    broker = BrokerThread(tmp_path / "data", {"brook.emulate.release": release}).start()
    try:
        response = api_versions(broker.port)
    finally:
        broker.stop()
    listed = advertised(response)
    released = RELEASE_RANGES[release]
    for api_key, served in SERVED.items():
        brook_low, brook_high = served.advertised
        if api_key not in released:
            assert api_key not in listed, api_key.name
            continue
        low, high = listed[api_key]
        # Within Brook's range and the release's, and all of what they share.
        assert (low, high) == (
            max(brook_low, released[api_key][0]),
            min(brook_high, released[api_key][1]),
        ), api_key.name
    features = {feature.name for feature in response.finalized_features}
    kafka_4 = int(release.split(".")[0]) >= 4
    assert features == ({"transaction.version"} if kafka_4 else set())


@pytest.mark.parametrize("release", [emulating("4.0")])
def test_kafka_4_0_has_its_floors_and_features(brook_broker, release):
    """4.0 dropped JoinGroup v0-v1 (KIP-896; 4.1 brought them back): a v1 request now
    closes the connection, while Produce stays advertised from v0 (KAFKA-18659)."""
    response = api_versions(brook_broker.port)
    listed = advertised(response)
    assert listed[ApiKey.JOIN_GROUP] == (2, 9)
    assert listed[ApiKey.PRODUCE] == (0, 12)
    assert [(f.name, f.max_version_level) for f in response.finalized_features] == [
        ("transaction.version", 2)
    ]
    assert response.finalized_features_epoch == 0
    join_v1 = load_request_schema(ApiKey.JOIN_GROUP, 1)
    protocol = make(nested(join_v1, "JoinGroupRequestProtocol"), name="range", metadata=b"")
    with RawClient(brook_broker.port) as client, pytest.raises(ConnectionClosedError):
        client.request(
            make(
                join_v1,
                group_id="g",
                session_timeout=datetime.timedelta(seconds=6),
                rebalance_timeout=datetime.timedelta(seconds=6),
                member_id="",
                protocol_type="consumer",
                protocols=(protocol,),
            )
        )


@EMULATE_2_8
def test_a_version_the_release_lacks_closes_the_connection(brook_broker, caplog):
    """Metadata v12 is Brook's, not 2.8's: Kafka 2.8 closes the connection, so Brook does,
    with a line that says why; v11 and everyone else are served."""
    with RawClient(brook_broker.port) as bystander:
        with RawClient(brook_broker.port) as client, pytest.raises(ConnectionClosedError):
            client.request(metadata_request(12))
        assert "API key 3 version 12 is not served (emulating Apache Kafka 2.8)" in caplog.text
        assert bystander.request(metadata_request(11)).brokers[0].port == brook_broker.port


@EMULATE_2_8
def test_api_versions_above_the_release_gets_its_list(brook_broker):
    """ApiVersions v4 came with 3.9: 2.8 answers UNSUPPORTED_VERSION in a v0 body listing
    its own ranges, so the client retries with v3."""
    with socket.create_connection(("127.0.0.1", brook_broker.port), timeout=10) as sock:
        sock.sendall(
            encode_request(
                api_versions4.ApiVersionsRequest(
                    client_software_name="emulate-test", client_software_version="1"
                ),
                7,
                "emulate-test",
            )
        )
        size = sock.recv(4, socket.MSG_WAITALL)
        frame = sock.recv(frame_size(size), socket.MSG_WAITALL)
    response = decode_response(frame, ApiVersionsResponseV0).body
    assert response.error_code == 35  # UNSUPPORTED_VERSION
    assert advertised(response) == KAFKA_2_8


def test_an_unknown_release_is_refused():
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.build({}, {}, {"brook.emulate.release": "2.7"})
    assert "brook.emulate.release" in str(refused.value)
    assert ", ".join(KNOWN_RELEASES) in str(refused.value)


def test_serve_refuses_an_unknown_release_in_one_line():
    ran = brook("serve", "--emulate", "9.9", "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    assert_one_line_error(ran, "'9.9'", "brook.emulate.release", "2.8, 3.0", "(from --emulate)")
    assert ran.returncode == 2


def test_serve_emulate_flag_logs_the_release_and_advertises_it(brokers):
    broker = brokers.start(args=["--emulate", "3.3"])
    assert advertised(api_versions(broker.port)) == KAFKA_3_3
    assert "Emulating Apache Kafka 3.3" in broker.log_text()


# --- Real clients fall back ------------------------------------------------------------


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _sent_versions(lines: list[str]) -> dict[str, set[int]]:
    """librdkafka's protocol debug lines, as {request name: versions sent}."""
    sent: dict[str, set[int]] = {}
    for line in lines:
        for name, version in re.findall(r"Sent (\w+)Request \(v(\d+)", line):
            sent.setdefault(name, set()).add(int(version))
    return sent


# librdkafka's names of the APIs a producer and a group consumer use.
LIBRDKAFKA_NAMES = {
    "Produce": ApiKey.PRODUCE,
    "Fetch": ApiKey.FETCH,
    "ListOffsets": ApiKey.LIST_OFFSETS,
    "Metadata": ApiKey.METADATA,
    "OffsetCommit": ApiKey.OFFSET_COMMIT,
    "OffsetFetch": ApiKey.OFFSET_FETCH,
    "FindCoordinator": ApiKey.FIND_COORDINATOR,
    "JoinGroup": ApiKey.JOIN_GROUP,
    "Heartbeat": ApiKey.HEARTBEAT,
    "LeaveGroup": ApiKey.LEAVE_GROUP,
    "SyncGroup": ApiKey.SYNC_GROUP,
    "ApiVersion": ApiKey.API_VERSIONS,
}


@pytest.mark.parametrize("release", [emulating("2.8"), emulating("3.3")])
def test_confluent_kafka_produces_and_consumes_in_a_group(brook_broker, topic_name, release):
    bootstrap = brook_broker.bootstrap
    collect = _Collect()
    logger = logging.getLogger(f"librdkafka-{topic_name}")
    logger.addHandler(collect)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    debug = {"debug": "protocol", "logger": logger}
    create_topic(bootstrap, topic_name, partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **debug})
    for i in range(10):
        producer.produce(topic_name, value=b"%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{topic_name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **debug,
        }
    )
    consumer.subscribe([topic_name])
    got: list[Any] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                got.append(message)
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert sorted(int(m.value()) for m in got) == list(range(10))
    assert broker_committed(brook_broker.port, f"g-{topic_name}") == {
        (topic_name, 0): (5, ""),
        (topic_name, 1): (5, ""),
    }
    sent = _sent_versions(collect.lines)
    expected = EXPECTED[release]
    for name, versions in sent.items():
        if name in LIBRDKAFKA_NAMES:
            low, high = expected[LIBRDKAFKA_NAMES[name]]
            assert low <= min(versions) and max(versions) <= high, (name, versions)
    # librdkafka speaks newer Fetch and Metadata than either release: it fell back to
    # the release's highest.
    assert max(sent["Fetch"]) == expected[ApiKey.FETCH][1]
    assert max(sent["Metadata"]) == expected[ApiKey.METADATA][1]


@EMULATE_2_8
def test_kafka_python_takes_the_broker_for_2_8_and_runs_a_group(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        # kafka-python infers the broker's release from ApiVersions.
        assert producer.config["api_version"] == (2, 8)
        for i in range(5):
            producer.send(topic_name, b"%d" % i).get(15)
    finally:
        producer.close()
    group = f"g-{topic_name}"
    consumer = KafkaConsumer(
        topic_name,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        request_timeout_ms=15_000,
    )
    try:
        assert consumer.config["api_version"] == (2, 8)
        records: list[Any] = []
        wait_until(
            lambda: len(records) >= 5,
            tick=lambda: [
                records.extend(batch) for batch in consumer.poll(timeout_ms=200).values()
            ],
            what="five records",
        )
        consumer.commit()
    finally:
        consumer.close()
    assert [r.value for r in records] == [b"%d" % i for i in range(5)]
    assert broker_committed(brook_broker.port, group) == {(topic_name, 0): (5, "")}


@EMULATE_2_8
def test_aiokafka_produces_and_runs_a_group(brook_broker, topic_name):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    group = f"g-{topic_name}"

    async def run() -> list[Any]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait(topic_name, b"%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            topic_name,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        records: list[Any] = []
        try:
            deadline = time.monotonic() + 30
            while len(records) < 5 and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    records += batch
            await consumer.commit()
        finally:
            await consumer.stop()
        return records

    records = asyncio.run(run())
    assert [r.value for r in records] == [b"%d" % i for i in range(5)]
    assert broker_committed(brook_broker.port, group) == {(topic_name, 0): (5, "")}


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@EMULATE_2_8
def test_kcat_sees_the_release_and_produces_and_consumes(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    kcat_produce(bootstrap, topic_name, [f"line-{i}" for i in range(20)])
    records = kcat_consume(bootstrap, topic_name, "-o", "beginning")
    assert [r["payload"] for r in records] == [f"line-{i}" for i in range(20)]
    listing = kcat(bootstrap, "-L", "-d", "feature").stderr.decode(errors="replace")
    assert "ApiKey Fetch (1) Versions 4..12" in listing
    assert "ApiKey Metadata (3) Versions 0..11" in listing
