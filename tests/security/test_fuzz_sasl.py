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

EXAMPLES = int(os.environ.get("BROOK_FUZZ_SASL_EXAMPLES", "1000"))
ANSWER_WAIT_S = 0.05


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
        # The frames go to the SASL listener; the checks use the PLAINTEXT one.
        yield Harness(broker, broker.data_dir, sasl_port)
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
