"""The fuzzer of the hardening work against a SASL listener, before authentication:
valid and damaged requests of every served API as the first frame of a connection. The
broker must stay up and answer, and no pre-authentication request may reach a handler:
none of the creating, producing or group requests among them leaves a trace (no topic,
no group, not a byte more in any log), only the exchange's own APIs are answered.

    BROOK_FUZZ_SASL_EXAMPLES=20000 .venv/bin/python -m pytest -s tests/security/test_fuzz_sasl.py
"""

from __future__ import annotations

import os
import resource
import socket

import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import HealthCheck, Phase, given, settings

from brook.broker.testing import free_port
from tests.integration.clients import create_topic, produce
from tests.integration.fuzz_requests import (
    POOL,
    PROTECTED,
    PROTECTED_CONFIGS,
    FuzzFrame,
    fuzz_frames,
)
from tests.integration.processes import Brokers
from tests.integration.test_fuzz import ADDRESS_SPACE, OPEN_FILES, Harness

from .conftest import plain_jaas

EXAMPLES = int(os.environ.get("BROOK_FUZZ_SASL_EXAMPLES", "2000"))
ANSWER_WAIT_S = 0.05


class SaslHarness(Harness):
    """The fuzz harness aimed at the SASL listener (its checks use the PLAINTEXT one)."""

    def __init__(self, broker, data_dir, sasl_port: int) -> None:
        super().__init__(broker, data_dir)
        self.sasl_port = sasl_port

    def send(self, frame: FuzzFrame) -> None:
        self.batch.append(frame)
        try:
            sock = socket.create_connection(("127.0.0.1", self.sasl_port), timeout=5)
        except OSError as exc:
            self._down(f"a new connection failed ({exc!r})")
        with sock:
            sock.settimeout(ANSWER_WAIT_S)
            try:
                sock.sendall(frame.wire)
                answer = sock.recv(4)
            except TimeoutError:
                self.outcomes["no answer yet"] += 1
            except ConnectionError:
                self.outcomes["closed"] += 1
            else:
                self.outcomes["answered" if answer else "closed"] += 1
        self.sent += 1
        if self.broker.process.poll() is not None:
            self._down("it is not running")
        if len(self.batch) >= 100:
            self.check()


@pytest.fixture
def harness(tmp_path):
    pool = Brokers(tmp_path)
    plain_port, sasl_port = free_port(), free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
    try:
        broker = pool.start(
            {
                "listeners": listeners,
                "advertised.listeners": listeners,
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                "sasl.jaas.config": plain_jaas({"alice": "alice-secret"}),
                "auto.create.topics.enable": "true",
            },
            port=plain_port,
            limits={
                resource.RLIMIT_NOFILE: (OPEN_FILES, OPEN_FILES),
                resource.RLIMIT_AS: (ADDRESS_SPACE, ADDRESS_SPACE),
            },
        )
        create_topic(broker.bootstrap, PROTECTED, partitions=2, config=PROTECTED_CONFIGS)
        for partition in (0, 1):
            produce(broker.bootstrap, PROTECTED, [(b"k", b"protected")], partition=partition)
        for name in POOL:
            create_topic(broker.bootstrap, name)
            produce(broker.bootstrap, name, [(b"k", b"pool")])
        yield SaslHarness(broker, broker.data_dir, sasl_port)
    finally:
        pool.stop_all()


def _log_sizes(data_dir) -> dict[str, int]:
    return {
        str(path.relative_to(data_dir)): path.stat().st_size
        for path in sorted(data_dir.glob("*/*.log"))
    }


def test_fuzz_before_sasl_authentication(harness, capsys):
    admin = AdminClient({"bootstrap.servers": harness.broker.bootstrap})
    topics_before = set(admin.list_topics(timeout=15).topics)
    sizes_before = _log_sizes(harness.data_dir)

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(fuzz_frames())
    def send_one(frame: FuzzFrame) -> None:
        harness.send(frame)

    send_one()
    harness.check()
    # Nothing sent before authentication reached a handler that changes state.
    assert set(admin.list_topics(timeout=15).topics) == topics_before
    assert admin.list_consumer_groups().result(15).valid == []
    assert _log_sizes(harness.data_dir) == sizes_before
    log = harness.broker.log_text()
    assert "Traceback" not in log
    with capsys.disabled():
        print(f"\nSASL fuzz: {harness.sent} requests ({dict(harness.outcomes)})")
    assert harness.sent >= EXAMPLES
    # Most frames name an API other than the exchange's: each closed the connection.
    assert harness.outcomes["closed"] > harness.sent // 2
