"""Fixtures of the observability tests: a broker with the admin endpoint on, and its
/metrics read the way Prometheus reads it (the client library's own text parser)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from brook.broker.testing import BrokerThread

TIMEOUT_S = 20
ADMIN = {"admin.listener": "http://127.0.0.1:0"}


class Admin:
    """The admin endpoint of a broker thread."""

    def __init__(self, broker: BrokerThread, token: str | None = None) -> None:
        """`token`: the broker's admin.auth.token (a secured broker's endpoint asks)."""
        self.broker = broker
        self.url = f"http://127.0.0.1:{broker.broker.admin.port}"
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def get(self, path: str) -> tuple[int, str, str]:
        """(status, content type, body) of a GET."""
        request = urllib.request.Request(self.url + path, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return response.status, response.headers["Content-Type"], response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers["Content-Type"], exc.read().decode()

    def json(self, path: str) -> tuple[int, Any]:
        status, _, body = self.get(path)
        return status, json.loads(body)

    def metrics(self) -> Samples:
        status, content_type, body = self.get("/metrics")
        assert status == 200, body
        assert content_type.startswith("text/plain; version=0.0.4")
        return Samples(body)


class Samples:
    """The samples of one scrape, by name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        self.types: dict[str, str] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for sample in family.samples:
                self.samples[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def get(self, name: str, **labels: Any) -> float | None:
        return self.samples.get((name, frozenset((k, str(v)) for k, v in labels.items())))

    def value(self, name: str, **labels: Any) -> float:
        found = self.get(name, **labels)
        assert found is not None, f"no sample {name}{labels}"
        return found

    def labelled(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for (sample, labels) in self.samples if sample == name]


@pytest.fixture
def admin_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Admin]:
    marker = request.node.get_closest_marker("brook_config")
    extra = {k.replace("_", "."): v for k, v in (marker.kwargs if marker else {}).items()}
    broker = BrokerThread(tmp_path / "data", {**ADMIN, **extra}).start()
    try:
        yield Admin(broker)
    finally:
        broker.stop()
