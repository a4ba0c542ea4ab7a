"""Authentications counted per listener on /metrics, as Kafka's socket-server-metrics count
them: a SASL login that fails, one that succeeds, a TLS client certificate the broker
does not trust (its handshake fails) and one it maps to a principal."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Producer

from tests.observability.conftest import Admin

from .conftest import PLAIN_USERS, SecureBroker
from .modes import MODES, librdkafka_config

FAILED = "kafka_server_socket_server_metrics_failed_authentication_total"
SUCCEEDED = "kafka_server_socket_server_metrics_successful_authentication_total"


def _try_produce(config: dict[str, Any]) -> None:
    producer = Producer({**config, "message.timeout.ms": 3000, "socket.timeout.ms": 3000})
    producer.produce("auth-metrics", b"x")
    producer.flush(5)


def _count(admin: Admin, name: str, listener: str) -> float:
    return admin.metrics().get(name, listener=listener, networkProcessor=0) or 0.0


def _until(read: Any, done: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def test_authentications_are_counted_per_listener(tmp_path, pki):
    broker = SecureBroker(
        tmp_path, pki, {"admin.listener": "http://127.0.0.1:0", "admin.auth.token": "metrics"}
    ).start()
    try:
        admin = Admin(broker.thread, token="metrics")
        sasl = {
            "bootstrap.servers": broker.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
        }
        _try_produce({**sasl, "sasl.password": "not-" + PLAIN_USERS["alice"]})
        failed = _until(lambda: _count(admin, FAILED, "SASL_PLAINTEXT"), lambda n: n >= 1)
        assert failed >= 1
        assert _count(admin, SUCCEEDED, "SASL_PLAINTEXT") == 0
        _try_produce({**sasl, "sasl.password": PLAIN_USERS["alice"]})
        assert _until(lambda: _count(admin, SUCCEEDED, "SASL_PLAINTEXT"), lambda n: n >= 1) >= 1
        # mTLS: an untrusted certificate fails its handshake; the trusted one is mapped.
        mtls = next(mode for mode in MODES if mode.name == "mtls")
        untrusted = mtls.__class__(**{**mtls.__dict__, "client_identity": "untrusted"})
        _try_produce(
            {"bootstrap.servers": broker.bootstrap("MTLS"), **librdkafka_config(pki, untrusted)}
        )
        assert _until(lambda: _count(admin, FAILED, "MTLS"), lambda n: n >= 1) >= 1
        _try_produce(
            {"bootstrap.servers": broker.bootstrap("MTLS"), **librdkafka_config(pki, mtls)}
        )
        assert _until(lambda: _count(admin, SUCCEEDED, "MTLS"), lambda n: n >= 1) >= 1
    finally:
        broker.stop()
