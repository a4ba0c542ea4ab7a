"""The Grafana dashboard against a real Prometheus: Debian's `prometheus` scrapes a live
Brook serving real clients, and every query of deploy/grafana/brook-dashboard.json is
evaluated through Prometheus' HTTP API and must resolve to series with data.

Also: the compose set-up's prometheus.yml passes promtool, and every metric a query names
is one Brook serves."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer

from brook.broker.testing import BrokerThread, free_port, wait_until
from brook.protocol.record_batch import Record, build_batch
from tests.integration.clients import create_topic, poll_until, produce
from tests.integration.raw_client import RawClient, produce_request

from .conftest import Admin

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "brook-dashboard.json"
COMPOSE_DIR = ROOT / "deploy" / "observability"
PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None,
    reason="prometheus is not installed (./test.sh installs Debian's prometheus package"
    " with apt-get; it could not here)",
)
# What Grafana puts in the dashboard's variables: every broker and topic, and a rate
# window that holds several of the test's one-second scrapes.
VARIABLES = {"$instance": ".+", "$topic": ".+", "$__rate_interval": "30s"}


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, the variables as Grafana fills them."""
    dashboard = json.loads(DASHBOARD.read_text())
    queries = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            queries.append((panel["title"], expr))
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            # label_values(METRIC{...}, label): the series of METRIC must exist.
            match = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["definition"])
            assert match, variable["definition"]
            expr = match[1]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            queries.append((f"variable {variable['name']}", expr))
    return queries


def test_every_dashboard_metric_is_one_brook_serves(admin_broker: Admin):
    served = set(admin_broker.metrics().types)
    queries = dashboard_queries()
    assert len(queries) > 30
    for title, expr in queries:
        names = set(re.findall(r"\b((?:kafka|brook|process)_[a-z_]+)\b", expr))
        assert names, (title, expr)
        for name in names:
            family = re.sub(r"_(total|bucket|count|sum)$", "", name)
            assert family in served or name in served, f"{title}: {name} is not served"


@pytest.mark.skipif(PROMTOOL is None, reason="promtool comes with Debian's prometheus package")
def test_the_compose_prometheus_config_is_valid():
    done = subprocess.run(
        [PROMTOOL, "check", "config", str(COMPOSE_DIR / "prometheus.yml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


class PrometheusProcess:
    """Debian's prometheus on a free port of 127.0.0.1, scraping one target every
    second; stopped by its pid."""

    def __init__(self, workdir: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: brook\n    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        assert PROMETHEUS is not None
        self.log = workdir / "prometheus.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={workdir / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
            )

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{self.log.read_text()}")
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=5) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


@pytest.fixture
def traffic_broker(tmp_path: Path) -> Iterator[Admin]:
    """A broker with everything the dashboard shows happening: produce and consume going
    on, a group with lag, a committed transaction, a rejected produce, timed flushes."""
    broker = BrokerThread(
        tmp_path / "data",
        {
            "admin.listener": "http://127.0.0.1:0",
            "log.flush.interval.ms": 500,
            "group.share.min.heartbeat.interval.ms": 500,
            "group.share.heartbeat.interval.ms": 500,
        },
    ).start()
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        bootstrap = broker.bootstrap
        create_topic(bootstrap, "orders")
        produce(bootstrap, "orders", [(None, b"o" * 100)] * 100)
        # A group that read some and stopped: lag.
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "billing", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["orders"])
        poll_until(consumer, lambda out: len(out) >= 100, 30)
        consumer.commit(asynchronous=False)
        consumer.close()
        # A committed transaction.
        transactional = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ledger"})
        transactional.init_transactions(30)
        transactional.begin_transaction()
        transactional.produce("orders", b"t", partition=0)
        transactional.commit_transaction(30)
        # A produce the broker refuses (a timestamp two hours ahead).
        future = int(time.time() * 1000) + 2 * 3600 * 1000
        with RawClient(broker.port) as client:
            client.request(
                produce_request("orders", 0, build_batch([Record(0, future, None, b"v")]))
            )

        def keep_producing() -> None:
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
            while not stop.wait(0.05):
                producer.produce("payments", b"p" * 100, partition=0)
                producer.poll(0)
            producer.flush(10)

        def keep_consuming() -> None:
            reader = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "auditor",
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 100,
                }
            )
            reader.subscribe(["payments"])
            while not stop.is_set():
                reader.poll(0.2)
            reader.close()

        def keep_sharing() -> None:
            # A share group reading the same topic, accepting what it gets (KIP-932).
            worker = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "workers"})
            worker.subscribe(["payments"])
            while not stop.is_set():
                worker.poll(0.2)
            worker.close()

        produce(bootstrap, "payments", [(None, b"p")])  # made before its consumer joins
        threads = [
            threading.Thread(target=keep_producing),
            threading.Thread(target=keep_consuming),
            threading.Thread(target=keep_sharing),
        ]
        for thread in threads:
            thread.start()
        yield Admin(broker)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        broker.stop()


@needs_prometheus
def test_every_dashboard_query_resolves_to_series_with_data(traffic_broker: Admin, tmp_path: Path):
    target = traffic_broker.url.removeprefix("http://")
    prometheus = PrometheusProcess(tmp_path / "prometheus", target)
    try:
        wait_until(prometheus.ready, timeout=60, what="prometheus to be ready")
        wait_until(
            lambda: any(t["health"] == "up" for t in prometheus.api("targets")["activeTargets"]),
            timeout=60,
            what="prometheus to scrape Brook",
        )
        results: dict[str, list[Any]] = {}

        def resolved() -> bool:
            for _, expr in dashboard_queries():
                if results.get(expr):
                    continue
                data = prometheus.api("query", query=expr)
                results[expr] = [
                    series
                    for series in data["result"]
                    if series["value"][1] not in ("NaN", "+Inf", "-Inf")
                ]
            return all(results.values())

        try:
            # Rates need two scrapes in their window, quantiles a request in it.
            wait_until(resolved, timeout=90, what="every dashboard query to resolve")
        except AssertionError:
            missing = [expr for expr, series in results.items() if not series]
            raise AssertionError(f"queries without data: {missing}") from None
        assert len(results) == len(dashboard_queries())
    finally:
        prometheus.stop()
