"""GET /v1/health (the event loop answers) and GET /v1/ready (the broker serves), as
Docker's HEALTHCHECK and Kubernetes' probes ask them."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from brook.broker.testing import BrokerProcess, free_port, wait_until
from tests.integration.processes import clean_env

from .conftest import Admin


def test_a_running_broker_is_live_and_ready(admin_broker: Admin):
    assert admin_broker.json("/v1/health") == (200, {"live": True, "state": "Running"})
    status, body = admin_broker.json("/v1/ready")
    assert status == 200
    assert body["ready"] is True and body["reasons"] == [] and body["state"] == "Running"


def test_a_held_event_loop_is_not_live_within_the_bound(admin_broker: Admin):
    """The loop is held (as a handler that never returns would hold it): /v1/health
    answers 503 once its bound passes, and 200 again when the loop is free."""
    release = threading.Event()
    loop = admin_broker.broker.loop
    assert loop is not None
    loop.call_soon_threadsafe(release.wait)
    try:
        status, body = admin_broker.json("/v1/health?timeout_ms=200")
        assert status == 503
        assert body == {"live": False, "reason": "the event loop did not answer within 0.2 s"}
    finally:
        release.set()
    assert admin_broker.json("/v1/health") == (200, {"live": True, "state": "Running"})


def test_health_refuses_a_bad_bound(admin_broker: Admin):
    status, body = admin_broker.json("/v1/health?timeout_ms=soon")
    assert status == 400 and "timeout_ms" in body["error"]


def test_brook_serve_turns_ready_and_its_endpoint_goes_with_it(tmp_path: Path):
    """`brook serve` with the admin endpoint: ready once it serves (a probe may come
    before: it gets 503 or no answer, never 200 too early), gone once stopped."""
    admin_port = free_port()
    admin_url = f"http://127.0.0.1:{admin_port}"
    broker = BrokerProcess(tmp_path / "data", {"admin.listener": admin_url}).start()

    def ready() -> int:
        try:
            with urllib.request.urlopen(admin_url + "/v1/ready", timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read())
            assert exc.code == 503 and body["ready"] is False, body
            return exc.code
        except OSError:
            return -1

    try:
        wait_until(lambda: ready() == 200, what="the broker to be ready")
    finally:
        assert broker.stop() == 0
    assert ready() == -1


def test_a_starting_broker_is_live_but_not_ready(tmp_path: Path):
    """A broker waiting for its ZooKeeper (none answers here) has not started: its admin
    endpoint, up first, says live (it is making progress) and not ready, with why."""
    admin_port = free_port()
    admin_url = f"http://127.0.0.1:{admin_port}"
    command = [sys.executable, "-m", "brook.broker.cli", "serve"]
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}",
        "log.dirs": str(tmp_path / "data"),
        "zookeeper.connect": f"127.0.0.1:{free_port()}",  # nothing listens there
        "zookeeper.connection.timeout.ms": 60_000,
        "admin.listener": admin_url,
    }
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    with open(tmp_path / "broker.log", "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=clean_env())
    try:

        def ready() -> tuple[int, dict] | None:
            try:
                with urllib.request.urlopen(admin_url + "/v1/ready", timeout=10) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())
            except OSError:
                assert process.poll() is None, (tmp_path / "broker.log").read_text()
                return None

        status, body = wait_until(ready, what="the admin endpoint to answer")
        assert status == 503
        assert body == {"ready": False, "state": "Starting", "reason": "the broker is Starting"}
        with urllib.request.urlopen(admin_url + "/v1/health", timeout=10) as response:
            assert json.loads(response.read()) == {"live": True, "state": "Starting"}
    finally:
        # A broker still connecting waits for ZooKeeper before it heeds SIGTERM.
        process.kill()
        process.wait(30)
