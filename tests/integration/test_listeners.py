"""Listeners as Kafka has them: every endpoint a broker hands out is that of the listener
the request came in on (the INTERNAL/EXTERNAL set-up of docker-compose files), Kafka's
checks of listener configs, listeners changed on a running broker, and the warning when
clients reach a listener by an address it does not advertise."""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
)
from kafka import KafkaConsumer
from kio.index import load_request_schema
from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
from kio.schema.metadata.v4.request import MetadataRequest

from brook.broker.config.broker_config import BrokerConfig, ConfigError
from brook.broker.testing import BrokerThread, free_port, wait_until
from brook.protocol.api_table import ApiKey

from .clients import create_topic, kafka_python_producer
from .raw_client import RawClient, make, nested

TIMEOUT_S = 20


def _two_listener_broker(tmp_path, **extra) -> tuple[BrokerThread, int, int]:
    """INTERNAL advertised as 127.0.0.1, EXTERNAL as localhost: one broker, two names."""
    broker = BrokerThread(tmp_path / "data")
    internal, external = broker.port, free_port()
    overrides = {
        "listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://127.0.0.1:{external}",
        "advertised.listeners": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://localhost:{external}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "log.dirs": str(tmp_path / "data"),
        **extra,
    }
    broker.config = BrokerConfig.build({}, {}, overrides)
    return broker.start(), internal, external


def _metadata_brokers(port: int) -> list[tuple[str, int]]:
    with RawClient(port) as client:
        response = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return [(broker.host, broker.port) for broker in response.brokers]


def _coordinator(port: int) -> tuple[str, int]:
    with RawClient(port) as client:
        response = client.request(FindCoordinatorRequest(key="g", key_type=0))
    assert response.error_code.name == "none"
    return response.host, response.port


def test_each_listener_hands_out_its_own_endpoint(tmp_path):
    broker, internal, external = _two_listener_broker(tmp_path)
    try:
        assert _metadata_brokers(internal) == [("127.0.0.1", internal)]
        assert _metadata_brokers(external) == [("localhost", external)]
        assert _coordinator(internal) == ("127.0.0.1", internal)
        assert _coordinator(external) == ("localhost", external)
        # kcat shows the broker as each listener advertises it.
        for port, host in ((internal, "127.0.0.1"), (external, "localhost")):
            listing = subprocess.run(
                ["kcat", "-L", "-b", f"127.0.0.1:{port}", "-J"],
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                check=True,
            )
            assert f'"name":"{host}:{port}"' in listing.stdout
    finally:
        broker.stop()


def test_clients_produce_and_consume_through_either_listener(tmp_path):
    broker, internal, external = _two_listener_broker(tmp_path)
    try:
        inside, outside = f"127.0.0.1:{internal}", f"localhost:{external}"
        create_topic(outside, "orders")
        producer = Producer({"bootstrap.servers": outside, "linger.ms": 0})
        producer.produce("orders", b"from-outside")
        assert producer.flush(TIMEOUT_S) == 0
        kafka_python = kafka_python_producer(inside)
        kafka_python.send("orders", b"from-inside").get(TIMEOUT_S)
        kafka_python.close()

        async def aiokafka_round_trip() -> list[bytes]:
            aio_producer = AIOKafkaProducer(bootstrap_servers=outside)
            await aio_producer.start()
            await aio_producer.send_and_wait("orders", b"from-aiokafka")
            await aio_producer.stop()
            consumer = AIOKafkaConsumer(
                "orders", bootstrap_servers=inside, auto_offset_reset="earliest"
            )
            await consumer.start()
            values = []
            while len(values) < 3:
                batch = await consumer.getmany(timeout_ms=1000)
                values += [m.value for messages in batch.values() for m in messages]
            await consumer.stop()
            return values

        expected = [b"from-outside", b"from-inside", b"from-aiokafka"]
        assert asyncio.run(aiokafka_round_trip()) == expected
        confluent = Consumer(
            {"bootstrap.servers": outside, "group.id": "readers", "auto.offset.reset": "earliest"}
        )
        confluent.subscribe(["orders"])
        values = []
        while len(values) < 3:
            message = confluent.poll(1)
            if message is not None and message.error() is None:
                values.append(message.value())
        confluent.close()
        assert values == expected
        kafka_python_consumer = KafkaConsumer(
            "orders",
            bootstrap_servers=inside,
            auto_offset_reset="earliest",
            consumer_timeout_ms=5000,
        )
        assert [m.value for m in kafka_python_consumer] == expected
        kafka_python_consumer.close()
        kcat = subprocess.run(
            ["kcat", "-C", "-b", outside, "-t", "orders", "-e", "-q", "-f", "%s\\n"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=True,
        )
        assert kcat.stdout.split() == [value.decode() for value in expected]
    finally:
        broker.stop()


def test_a_listener_that_is_not_advertised_hands_out_no_leader(tmp_path):
    broker, internal, hidden = _two_listener_broker(
        tmp_path, **{"advertised.listeners": "INTERNAL://127.0.0.1:0"}
    )
    try:
        create_topic(f"127.0.0.1:{internal}", "orders")
        with RawClient(hidden) as client:
            response = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
            coordinator = client.request(FindCoordinatorRequest(key="g", key_type=0))
        assert response.brokers == ()
        partition = response.topics[0].partitions[0]
        assert (partition.error_code.name, partition.leader_id) == ("leader_not_available", -1)
        assert coordinator.error_code.name == "coordinator_not_available"
        # From Metadata v6 the error says why: no endpoint on this listener.
        with RawClient(hidden) as client:
            v12 = client.request(
                load_request_schema(ApiKey.METADATA, 12)(
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
        assert v12.topics[0].partitions[0].error_code.name == "listener_not_found"
        # The advertised listener resolves its port 0 to the bound one.
        assert _metadata_brokers(internal) == [("127.0.0.1", internal)]
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"},
            "Each listener must have a different name",
        ),
        (
            {"listeners": "PLAINTEXT://:9092,OTHER://:9092"},
            "Each listener must have a different port",
        ),
        ({"listeners": "CLIENTS://:9092"}, "No security protocol defined for listener CLIENTS"),
        (
            {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "OUTSIDE://host:9092"},
            "advertised.listeners listener names must be equal to or a subset",
        ),
        (
            {"advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
            "cannot use the nonroutable meta-address 0.0.0.0",
        ),
        (
            {"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL"},
            "Listener SSL uses TLS but has no key store",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:TLS"},
            "Invalid value 'PLAINTEXT:TLS' for configuration listener.security.protocol.map",
        ),
        (
            {
                "inter.broker.listener.name": "PLAINTEXT",
                "security.inter.broker.protocol": "PLAINTEXT",
            },
            "Only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        (
            {"inter.broker.listener.name": "REPLICATION"},
            "inter.broker.listener.name must be a listener name defined in advertised.listeners",
        ),
    ],
)
def test_listener_configs_are_checked_as_kafka_checks_them(overrides, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.build({}, {}, overrides)


def _alter_broker(bootstrap: str, resource_name: str, **values: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(
        ConfigResource.Type.BROKER,
        resource_name,
        incremental_configs=[
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in values.items()
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_listeners_change_on_a_running_broker(brook_broker, tmp_path):
    bootstrap, port = brook_broker.bootstrap, brook_broker.port
    added = free_port()
    _alter_broker(
        bootstrap,
        "0",
        **{
            "listeners": f"PLAINTEXT://127.0.0.1:{port},DOCKER://127.0.0.1:{added}",
            "advertised.listeners": (f"PLAINTEXT://127.0.0.1:{port},DOCKER://localhost:{added}"),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,DOCKER:PLAINTEXT",
        },
    )
    listeners = brook_broker.broker.listeners
    wait_until(lambda: listeners.is_open("DOCKER"), what="the DOCKER listener to open")
    assert _metadata_brokers(added) == [("localhost", added)]
    assert _metadata_brokers(port) == [("127.0.0.1", port)]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    described = admin.describe_configs([resource])[resource].result(TIMEOUT_S)
    for name in ("listeners", "advertised.listeners"):
        assert not described[name].is_read_only
        assert described[name].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert described["advertised.listeners"].value == (
        f"PLAINTEXT://127.0.0.1:{port},DOCKER://localhost:{added}"
    )
    # Removed again: the listener closes.
    _alter_broker(
        bootstrap,
        "0",
        **{
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        },
    )
    wait_until(lambda: not listeners.is_open("DOCKER"), what="the DOCKER listener to close")
    assert not _connects(added)
    assert _metadata_brokers(port) == [("127.0.0.1", port)]


def _alter_raw(port: int, resource_name: str, values: dict[str, str]) -> tuple[str, str]:
    """IncrementalAlterConfigs over a raw socket (librdkafka refuses to name the
    cluster-wide resource ""): the resource's error name and message."""
    request_type = load_request_schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    configs = tuple(
        make(nested(request_type, "AlterableConfig"), name=name, config_operation=0, value=value)
        for name, value in values.items()
    )
    resource = make(
        nested(request_type, "AlterConfigsResource"),
        resource_type=4,  # BROKER
        resource_name=resource_name,
        configs=configs,
    )
    with RawClient(port) as client:
        [response] = client.request(
            make(request_type, resources=(resource,), validate_only=False)
        ).responses
    return response.error_code.name, response.error_message or ""


def test_listener_changes_that_kafka_refuses(brook_broker):
    port = brook_broker.port
    # A broker's own addresses are no cluster-wide default.
    error, message = _alter_raw(port, "", {"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    assert error == "invalid_request"
    assert "broker id must be specified: [listeners]" in message
    # The inter-broker listener must stay.
    error, message = _alter_raw(
        port,
        "0",
        {
            "listeners": f"OTHER://127.0.0.1:{port}",
            "advertised.listeners": f"OTHER://127.0.0.1:{port}",
            "listener.security.protocol.map": "OTHER:PLAINTEXT",
        },
    )
    assert error == "invalid_request"
    assert "inter.broker.listener.name must be a listener name" in message
    # A listener may not change its security protocol.
    error, message = _alter_raw(port, "0", {"listener.security.protocol.map": "PLAINTEXT:SSL"})
    assert error == "invalid_request"
    assert "Security protocol cannot be updated for existing listener PLAINTEXT" in message
    assert brook_broker.broker.listeners.is_open("PLAINTEXT")
    assert not brook_broker.broker.listeners.is_open("OTHER")
    assert _metadata_brokers(port) == [("127.0.0.1", port)]


def test_a_listener_added_at_runtime_survives_a_restart(tmp_path):
    broker = BrokerThread(tmp_path / "data").start()
    port, added = broker.port, free_port()
    try:
        _alter_broker(
            broker.bootstrap,
            "0",
            **{
                "listeners": f"PLAINTEXT://127.0.0.1:{port},EXTRA://127.0.0.1:{added}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},EXTRA://localhost:{added}",
            },
        )
    finally:
        broker.stop()
    restarted = BrokerThread(tmp_path / "data")
    restarted.port = port
    restarted.config = broker.config
    restarted.start()
    try:
        assert _metadata_brokers(added) == [("localhost", added)]
    finally:
        restarted.stop()


def test_a_client_reaching_a_listener_by_another_address_is_warned_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="brook.listeners")
    broker = BrokerThread(tmp_path / "data")
    port = broker.port
    broker.config = BrokerConfig.build(
        {},
        {},
        {
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            # What a container would advertise for a mapped port: not this address.
            "advertised.listeners": f"PLAINTEXT://127.0.0.2:{port + 1}",
            "log.dirs": str(tmp_path / "data"),
        },
    )
    broker.start()
    try:
        # A bare TCP probe (a health check) is no client: no warning.
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            wait_until(
                lambda: broker.call(lambda: len(broker.broker.connections)) == 1,
                what="the broker to take the probe's connection",
            )
            assert [r for r in caplog.records if r.name == "brook.listeners"] == []
        for _ in range(3):
            assert _metadata_brokers(port) == [("127.0.0.2", port + 1)]
        warnings = [r for r in caplog.records if r.name == "brook.listeners"]
        assert len(warnings) == 1
        assert f"127.0.0.1:{port}" in warnings[0].getMessage()
        assert "advertised.listeners" in warnings[0].getMessage()
    finally:
        broker.stop()


def _broker_advertising(tmp_path, listener: str, advertised: str) -> BrokerThread:
    broker = BrokerThread(tmp_path / "data")
    broker.config = BrokerConfig.build(
        {},
        {},
        {
            "listeners": listener.format(port=broker.port),
            "advertised.listeners": advertised.format(port=broker.port),
            "log.dirs": str(tmp_path / "data"),
        },
    )
    return broker.start()


def _listener_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "brook.listeners"]


def _metadata_brokers_via(host: str, port: int) -> list[tuple[str, int]]:
    from brook.broker.client import BlockingClient

    with BlockingClient(host, port, "dialled-address-test", timeout=15) as client:
        response = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
    return [(broker.host, broker.port) for broker in response.brokers]


def _this_machines_address() -> str | None:
    """A non-loopback address of this machine (the one its default route leaves by)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent for a UDP connect
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") else address


def test_an_address_of_another_host_is_not_warned_about(tmp_path, caplog):
    """What a NAT, a load balancer or a published port advertises: an address this broker
    does not own, which its clients reach from where they are. Nothing to warn about."""
    caplog.set_level(logging.WARNING, logger="brook.listeners")
    broker = _broker_advertising(
        tmp_path, "PLAINTEXT://127.0.0.1:{port}", "PLAINTEXT://203.0.113.7:19092"
    )
    try:
        assert _metadata_brokers(broker.port) == [("203.0.113.7", 19092)]
        assert _listener_warnings(caplog) == []
    finally:
        broker.stop()


def test_an_advertised_name_nobody_can_resolve_is_warned_about(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="brook.listeners")
    name = "no-such-host.invalid"  # RFC 2606: never resolves
    broker = _broker_advertising(
        tmp_path, "PLAINTEXT://127.0.0.1:{port}", f"PLAINTEXT://{name}:{{port}}"
    )
    try:
        assert _metadata_brokers(broker.port) == [(name, broker.port)]
        (warning,) = _listener_warnings(caplog)
        assert f"advertises {name}:{broker.port}, a name this broker cannot resolve" in warning
    finally:
        broker.stop()


def test_localhost_advertised_to_a_client_of_this_machine_by_another_address_is_right(
    tmp_path, caplog
):
    """Kafka's default set-up: listening on every interface, advertised as localhost. A
    client on this machine that dialled its network address is sent to localhost, which
    is this broker for it: no warning."""
    address = _this_machines_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    caplog.set_level(logging.WARNING, logger="brook.listeners")
    broker = _broker_advertising(
        tmp_path, "PLAINTEXT://0.0.0.0:{port}", "PLAINTEXT://localhost:{port}"
    )
    try:
        assert _metadata_brokers_via(address, broker.port) == [("localhost", broker.port)]
        assert _listener_warnings(caplog) == []
    finally:
        broker.stop()


def test_a_client_reaching_the_advertised_address_gets_no_warning(brook_broker, caplog):
    caplog.set_level(logging.WARNING, logger="brook.listeners")
    for _ in range(2):
        assert _metadata_brokers(brook_broker.port) == [("127.0.0.1", brook_broker.port)]
    assert [r for r in caplog.records if r.name == "brook.listeners"] == []


@pytest.mark.brook_config(broker_id=4, broker_rack="rack-a")
def test_a_single_broker_is_its_own_cluster(brook_broker):
    """No zookeeper.connect: the broker registers itself in its own metadata cache, the
    one path Metadata reads with or without ZooKeeper, and is the controller."""
    with RawClient(brook_broker.port) as client:
        response = client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False))
    assert [(b.node_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (4, "127.0.0.1", brook_broker.port, "rack-a")
    ]
    assert response.controller_id == 4
    assert brook_broker.call(lambda: brook_broker.broker.is_controller)
    assert brook_broker.call(lambda: brook_broker.broker.controller_id) == 4
