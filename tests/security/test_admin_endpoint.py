"""The admin endpoint of a secured broker (SASL listeners, ACLs with
allow.everyone.if.no.acl.found=false), over https with the broker's own key store:

- fault injection and /metrics ask for credentials: a bearer token (admin.auth.token) or
  HTTP basic with a broker user's password (PLAIN from the JAAS config, or SCRAM);
- a user also needs the cluster operation (faults: ALTER, /metrics: DESCRIBE), as a super
  user has it;
- the probes answer everyone, without the reasons of a broker that is not ready;
- a refused request changes nothing: the Kafka listeners keep serving.

And fault injection itself is off unless switched on (admin.fault.injection.enable).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from brook.broker.faults import FaultSpecError
from brook.broker.testing import BrokerThread

from .conftest import PLAIN_USERS, SCRAM_USERS, SecureBroker
from .test_acls import AUTHORIZER

TOKEN = "operator-token-1234"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory, pki: Any) -> Iterator[SecureBroker]:
    broker = SecureBroker(
        tmp_path_factory.mktemp("guarded-admin"),
        pki,
        {
            "authorizer.class.name": AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
            "admin.listener": "https://127.0.0.1:0",
            "admin.fault.injection.enable": "true",
            "admin.auth.token": TOKEN,
        },
    ).start()
    try:
        # bob (SCRAM) may read the metrics, not inject faults.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
        binding = AclBinding(
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
            "User:bob",
            "*",
            AclOperation.DESCRIBE,
            AclPermissionType.ALLOW,
        )
        for future in admin.create_acls([binding]).values():
            future.result(15)
        yield broker
    finally:
        broker.stop()


def _call(
    broker: SecureBroker,
    method: str,
    path: str,
    authorization: str | None = None,
    body: object = None,
) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(broker.pki.ca.cert_path))
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"https://127.0.0.1:{broker.thread.admin_port}{path}", data=data, method=method
    )
    if authorization is not None:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=15, context=context) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    text = raw.decode()
    return status, json.loads(text) if text.startswith(("{", "[")) else text


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


REFUSE_EVERYONE = {"refuse_connections": True}


def test_faults_ask_for_credentials_and_the_cluster_alter_operation(guarded):
    assert _call(guarded, "POST", "/v1/faults", None, REFUSE_EVERYONE)[0] == 401
    assert _call(guarded, "POST", "/v1/faults", "Bearer wrong", REFUSE_EVERYONE)[0] == 401
    wrong = _basic("alice", "not-her-password")
    assert _call(guarded, "POST", "/v1/faults", wrong, REFUSE_EVERYONE)[0] == 401
    # Logged in, but no ALTER on the cluster.
    alice = _basic("alice", PLAIN_USERS["alice"])
    status, answer = _call(guarded, "POST", "/v1/faults", alice, REFUSE_EVERYONE)
    assert status == 403 and "User:alice" in answer["error"]
    bob, bob_password = SCRAM_USERS["SCRAM-SHA-256"]
    assert _call(guarded, "GET", "/v1/faults", _basic(bob, bob_password))[0] == 403
    # Nothing was armed by any of them.
    assert guarded.thread.faults.list()["armed"] == []

    # The super user (PLAIN) and the operator's token may.
    admin = _basic("admin", PLAIN_USERS["admin"])
    status, armed = _call(
        guarded, "POST", "/v1/faults", admin, {"api": "Fetch", "delay_ms": 1, "count": 1}
    )
    assert status == 201 and armed["armed"][0]["api"] == "Fetch"
    assert _call(guarded, "DELETE", "/v1/faults", f"Bearer {TOKEN}") == (200, {"cleared": 1})


def test_metrics_ask_for_credentials_and_the_cluster_describe_operation(guarded):
    assert _call(guarded, "GET", "/metrics")[0] == 401
    carol, carol_password = SCRAM_USERS["SCRAM-SHA-512"]
    assert _call(guarded, "GET", "/metrics", _basic(carol, carol_password))[0] == 403
    bob, bob_password = SCRAM_USERS["SCRAM-SHA-256"]
    status, text = _call(guarded, "GET", "/metrics", _basic(bob, bob_password))
    assert status == 200 and "kafka_server" in text
    assert _call(guarded, "GET", "/metrics", _basic(bob, "wrong"))[0] == 401


def test_the_probes_answer_everyone(guarded):
    status, answer = _call(guarded, "GET", "/v1/health")
    assert status == 200 and answer["live"] is True
    status, answer = _call(guarded, "GET", "/v1/ready")
    assert status == 200 and answer["ready"] is True


def test_fault_injection_is_off_unless_switched_on(tmp_path: Path):
    broker = BrokerThread(
        tmp_path / "data",
        {"admin.listener": "http://127.0.0.1:0", "admin.fault.injection.enable": "false"},
    ).start()
    try:
        with pytest.raises(FaultSpecError, match=r"admin\.fault\.injection\.enable"):
            broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER")
        request = urllib.request.Request(
            f"{broker.admin_url}/v1/faults",
            data=json.dumps(REFUSE_EVERYONE).encode(),
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=15)
        assert refused.value.code == 403
        assert "admin.fault.injection.enable" in json.loads(refused.value.read())["error"]
        assert broker.call(lambda: broker.broker.faults.listing())["armed"] == []
    finally:
        broker.stop()


def test_brook_faults_logs_in_to_a_secured_endpoint(guarded):
    url = f"https://127.0.0.1:{guarded.thread.admin_port}"
    ca = str(guarded.pki.ca.cert_path)

    def brook_faults(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "brook.broker.cli", "faults", *args, "--admin-url", url],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, **env},
        )

    refused = brook_faults("list", "--admin-ca", ca)
    assert refused.returncode == 1 and "Authentication required" in refused.stderr
    armed = brook_faults(
        "add", "--api", "Fetch", "--delay-ms", "1", "--admin-ca", ca, "--admin-token", TOKEN
    )
    assert armed.returncode == 0, armed.stderr
    listed = brook_faults(
        "list", "--admin-ca", ca, "--admin-user", "admin", BROOK_ADMIN_PASSWORD=PLAIN_USERS["admin"]
    )
    assert listed.returncode == 0, listed.stderr
    assert [fault["api"] for fault in json.loads(listed.stdout)["armed"]] == ["Fetch"]
    assert brook_faults("clear", "--admin-ca", ca, BROOK_ADMIN_TOKEN=TOKEN).returncode == 0
