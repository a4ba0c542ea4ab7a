"""The loopback proxy of the network-partition tests, in front of a real Brook broker with
real clients: it forwards, cut() resets and refuses, stall() holds bytes on open
connections, heal() restores, and its counts say what happened."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode

from brook.broker.client import BlockingClient
from brook.broker.testing import BrokerThread, free_port

from .netproxy import Direction, NetProxy

# Quick reconnects, so a client finds a healed link without waiting out librdkafka's
# default backoff of up to 10 s.
FAST_RECONNECT = {"reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100}


@pytest.fixture
def netproxy_port(request: pytest.FixtureRequest) -> int:
    """The proxy's port, chosen before the broker starts so the broker can advertise it:
    clients that bootstrap through the proxy must keep using it after Metadata."""
    port = free_port()
    request.node.add_marker(
        pytest.mark.brook_config(advertised_listeners=f"PLAINTEXT://127.0.0.1:{port}")
    )
    return port


@pytest.fixture
def netproxy(netproxy_port: int, brook_broker: BrokerThread) -> Iterator[NetProxy]:
    """A proxy in front of brook_broker, which advertises the proxy's address."""
    with NetProxy("127.0.0.1", brook_broker.port, port=netproxy_port) as proxy:
        yield proxy


class Deliveries:
    """Delivery reports of a producer: the error (None when acknowledged) per value."""

    def __init__(self) -> None:
        self.reports: dict[bytes, KafkaError | None] = {}

    def __call__(self, error: KafkaError | None, message: Any) -> None:
        self.reports[message.value()] = error


def producer(proxy: NetProxy, **config: Any) -> Producer:
    return Producer({"bootstrap.servers": proxy.address, **FAST_RECONNECT, **config})


def api_versions(port: int) -> ApiVersionsResponse:
    with BlockingClient("127.0.0.1", port, "netproxy-test", timeout=15) as client:
        return client.request(
            ApiVersionsRequest(client_software_name="netproxy-test", client_software_version="1")
        )


def test_a_client_talks_to_the_broker_through_the_proxy(netproxy, brook_broker, brook_topic):
    deliveries = Deliveries()
    client = producer(netproxy)
    client.produce(brook_topic, b"through", on_delivery=deliveries)
    assert client.flush(30) == 0
    assert deliveries.reports == {b"through": None}
    assert netproxy.accepted >= 1
    assert netproxy.forwarded(Direction.TO_TARGET) > 0
    assert netproxy.forwarded(Direction.TO_CLIENT) > 0
    assert [record.value for record in brook_broker.records(brook_topic)] == [b"through"]


def test_cut_resets_open_connections_and_refuses_new_ones_until_healed(netproxy):
    assert api_versions(netproxy.port).error_code == ErrorCode.none
    with socket.create_connection(("127.0.0.1", netproxy.port)) as held:
        # The first connection is over and the held one forwarded.
        netproxy.wait_until(lambda proxy: proxy.accepted == 2 and proxy.open_connections == 1)
        assert netproxy.resets == 0, "a connection the client closed is no reset"
        netproxy.cut()
        assert netproxy.open_connections == 0
        assert netproxy.resets == 1
        with pytest.raises(ConnectionResetError):
            held.recv(1)
    with pytest.raises(ConnectionError):
        api_versions(netproxy.port)
    assert netproxy.refused == 1
    netproxy.heal()
    assert api_versions(netproxy.port).error_code == ErrorCode.none
    assert netproxy.refused == 1


def test_a_producer_fails_while_cut_and_recovers_after_heal(netproxy, brook_broker, brook_topic):
    survivor, survivor_deliveries = producer(netproxy), Deliveries()
    survivor.produce(brook_topic, b"before", on_delivery=survivor_deliveries)
    assert survivor.flush(30) == 0

    netproxy.cut()
    accepted = netproxy.accepted
    doomed, doomed_deliveries = producer(netproxy, **{"message.timeout.ms": 1500}), Deliveries()
    doomed.produce(brook_topic, b"during", on_delivery=doomed_deliveries)
    netproxy.wait_until(lambda proxy: proxy.refused >= 1)
    doomed.flush(30)
    error = doomed_deliveries.reports[b"during"]
    assert error is not None and error.code() == KafkaError._MSG_TIMED_OUT
    assert netproxy.accepted == accepted, "no connection got through while cut"

    netproxy.heal()
    survivor.produce(brook_topic, b"after", on_delivery=survivor_deliveries)
    assert survivor.flush(30) == 0
    assert survivor_deliveries.reports == {b"before": None, b"after": None}
    assert netproxy.accepted > accepted
    # What was produced while cut never reached the broker.
    values = [record.value for record in brook_broker.records(brook_topic)]
    assert values == [b"before", b"after"]


def test_stall_holds_the_bytes_while_connections_stay_open(netproxy, brook_broker, brook_topic):
    client, deliveries = producer(netproxy), Deliveries()
    client.produce(brook_topic, b"first", on_delivery=deliveries)
    assert client.flush(30) == 0
    accepted = netproxy.accepted

    netproxy.stall()
    assert netproxy.stalled(Direction.TO_TARGET) and netproxy.stalled(Direction.TO_CLIENT)
    to_target = netproxy.forwarded(Direction.TO_TARGET)
    to_client = netproxy.forwarded(Direction.TO_CLIENT)
    client.produce(brook_topic, b"held", on_delivery=deliveries)
    client.poll(0)
    # The produce request reached the proxy and stays there.
    netproxy.wait_until(lambda proxy: proxy.pending(Direction.TO_TARGET) > 0)
    assert netproxy.forwarded(Direction.TO_TARGET) == to_target
    assert netproxy.forwarded(Direction.TO_CLIENT) == to_client
    # The proxy reset nothing and the client needed no new connection. (librdkafka may
    # drop its bootstrap connection meanwhile, even with a reset: that is the client's
    # doing, so the count of open connections is not the stall's to keep.)
    assert netproxy.resets == 0
    assert netproxy.accepted == accepted
    assert netproxy.refused == 0
    client.poll(0)
    assert b"held" not in deliveries.reports
    # The connection holding the request is still open: a closed one lets its bytes go.
    assert netproxy.pending(Direction.TO_TARGET) > 0 and netproxy.open_connections >= 1

    netproxy.heal()
    assert client.flush(30) == 0
    assert deliveries.reports == {b"first": None, b"held": None}
    assert netproxy.forwarded(Direction.TO_TARGET) > to_target
    assert netproxy.pending(Direction.TO_TARGET) == 0
    assert [record.value for record in brook_broker.records(brook_topic)] == [b"first", b"held"]


def test_a_one_way_stall_lets_the_request_in_and_holds_the_answer(netproxy, brook_topic):
    client, deliveries = producer(netproxy), Deliveries()
    client.produce(brook_topic, b"first", on_delivery=deliveries)
    assert client.flush(30) == 0

    netproxy.stall(Direction.TO_CLIENT)
    assert not netproxy.stalled(Direction.TO_TARGET)
    to_target = netproxy.forwarded(Direction.TO_TARGET)
    to_client = netproxy.forwarded(Direction.TO_CLIENT)
    client.produce(brook_topic, b"unanswered", on_delivery=deliveries)
    client.poll(0)
    # The broker took the request (it went through) and its answer waits in the proxy.
    netproxy.wait_until(
        lambda proxy: (
            proxy.forwarded(Direction.TO_TARGET) > to_target
            and proxy.pending(Direction.TO_CLIENT) > 0
        )
    )
    assert netproxy.forwarded(Direction.TO_CLIENT) == to_client
    client.poll(0)
    assert b"unanswered" not in deliveries.reports

    netproxy.heal()
    assert client.flush(30) == 0
    assert deliveries.reports[b"unanswered"] is None


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_a_client_that_goes_away_ends_its_link(netproxy, reset):
    """A client that closes (FIN) or resets (RST) its side: the proxy ends the link to the
    broker too, instead of keeping a half-dead connection."""
    client = socket.create_connection(("127.0.0.1", netproxy.port))
    netproxy.wait_until(lambda proxy: proxy.accepted == 1 and proxy.open_connections == 1)
    if reset:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    netproxy.wait_until(lambda proxy: proxy.open_connections == 0)
    assert api_versions(netproxy.port).error_code == ErrorCode.none


def test_an_unreachable_target_resets_the_client_and_is_counted():
    nobody = free_port()
    with NetProxy("127.0.0.1", nobody) as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port)) as client:
            proxy.wait_until(lambda p: p.upstream_failures == 1)
            with pytest.raises(ConnectionResetError):
                client.recv(1)
        assert proxy.accepted == 0
        assert proxy.open_connections == 0


def test_a_port_in_use_fails_the_start_and_control_needs_a_running_proxy():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proxy = NetProxy("127.0.0.1", 9, port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match="could not listen"):
            proxy.start()
    idle = NetProxy("127.0.0.1", 9)
    with pytest.raises(RuntimeError, match="not running"):
        idle.cut()
    idle.stop()  # stopping what never started is harmless


def test_stop_closes_the_listener_and_every_connection(brook_broker):
    proxy = NetProxy("127.0.0.1", brook_broker.port).start()
    port = proxy.port
    held = socket.create_connection(("127.0.0.1", port))
    try:
        proxy.wait_until(lambda p: p.accepted == 1)
        proxy.stop()
        with pytest.raises(ConnectionResetError):
            held.recv(1)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        held.close()
    # The broker kept serving on its own port.
    assert api_versions(brook_broker.port).error_code == ErrorCode.none
