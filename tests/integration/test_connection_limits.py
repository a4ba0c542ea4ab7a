"""max.connections.per.ip and its overrides, as Kafka's ConnectionQuotas counts them: a
connection over its address's limit is closed at once (with Kafka's log line), one
closing frees its place, and both keys change on a running broker (AlterConfigs).
Every test connection comes from 127.0.0.1, so each test has a broker of its own."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.incremental_alter_configs.v1 import request as alter1
from kio.static.primitive import i8

from brook.broker.client import BlockingClient, ConnectionClosedError
from brook.broker.config.broker_config import BrokerConfig, ConfigError
from brook.broker.testing import BrokerThread
from brook.protocol.errors import ErrorCode

BROKER_RESOURCE = 4
SET = 0


def _open(port: int) -> BlockingClient | None:
    """A connection the broker answers (kept open), or None when it closes it unanswered."""
    client = BlockingClient("127.0.0.1", port, "limits")
    try:
        request = ApiVersionsRequest(client_software_name="test", client_software_version="1")
        assert client.request(request).error_code == ErrorCode.none
    except (ConnectionClosedError, ConnectionError):
        client.close()
        return None
    return client


def _set_broker_default(client: BlockingClient, name: str, value: str) -> None:
    request = alter1.IncrementalAlterConfigsRequest(
        resources=(
            alter1.AlterConfigsResource(
                resource_type=i8(BROKER_RESOURCE),
                resource_name="",
                configs=(alter1.AlterableConfig(name=name, config_operation=i8(SET), value=value),),
            ),
        ),
        validate_only=False,
    )
    (response,) = client.request(request).responses
    assert response.error_code == ErrorCode.none, response.error_message


def test_connections_over_the_per_ip_limit_are_closed(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="brook.connection")
    broker = BrokerThread(tmp_path, {"max.connections.per.ip": 3}).start()
    held: list[Any] = []
    try:
        held = [_open(broker.port) for _ in range(3)]
        assert all(held)
        assert _open(broker.port) is None  # the fourth
        assert (
            "Rejected connection from 127.0.0.1, address already has the configured maximum"
            " of 3 connections." in caplog.text
        )
        counts = broker.broker.services.listeners.connection_limits.counts
        assert broker.call(lambda: dict(counts)) == {"127.0.0.1": 3}
        # One closes: its place is free.
        held.pop().close()
        admin = None
        for _ in range(100):  # the broker sees the close a moment later
            admin = _open(broker.port)
            if admin is not None:
                break
        assert admin is not None
        # An override for this address, changed on the running broker.
        _set_broker_default(admin, "max.connections.per.ip.overrides", "127.0.0.1:5")
        held.append(admin)
        more = [_open(broker.port) for _ in range(3)]
        assert more[:2] != [None, None] and None not in more[:2]
        assert more[2] is None  # 3 held + 2 more = 5
        held += [c for c in more if c is not None]
    finally:
        for client in held:
            if client is not None:
                client.close()
        broker.stop()


@pytest.mark.parametrize(
    ("configs", "words"),
    [
        (
            {"max.connections.per.ip": "0"},
            "max.connections.per.ip can be set to zero only if max.connections.per.ip"
            ".overrides property is set.",
        ),
        ({"max.connections.per.ip.overrides": "127.0.0.1=4"}, "address:count"),
        ({"max.connections.per.ip.overrides": "no.such.host.invalid:4"}, "does not resolve"),
        ({"max.connections.per.ip": "-1"}, "max.connections.per.ip"),
    ],
)
def test_bad_limits_stop_start_up(configs, words):
    with pytest.raises(ConfigError) as refused:
        BrokerConfig.build(configs, {}, [])
    assert words in str(refused.value)


def test_zero_with_overrides_admits_only_the_overridden(tmp_path):
    config = BrokerConfig.build(
        {"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.1:1"}, {}, []
    )
    assert config["max.connections.per.ip"] == 0
    broker = BrokerThread(
        tmp_path,
        {"max.connections.per.ip": 0, "max.connections.per.ip.overrides": "localhost:1"},
    ).start()
    try:
        first = _open(broker.port)  # localhost resolves to 127.0.0.1: its own limit, 1
        assert first is not None
        assert _open(broker.port) is None
        first.close()
    finally:
        broker.stop()
