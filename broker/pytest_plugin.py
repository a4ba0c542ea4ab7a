"""A pytest plugin: the `brook_broker` fixture gives each test a fresh broker.

Installed with the package (entry point `pytest11`), so any project can write:

    def test_produce(brook_broker):
        producer = Producer({"bootstrap.servers": brook_broker.bootstrap})

Broker configs for a test come from the `brook_config` marker:

    @pytest.mark.brook_config(num_partitions=3)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .testing import BrokerThread


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "brook_config(**configs): broker configs for the brook_broker fixture "
        "(underscores stand for dots: num_partitions=3)",
    )


@pytest.fixture
def brook_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerThread]:
    """A running Brook broker on a free port of 127.0.0.1 with its own data directory."""
    overrides = {}
    marker = request.node.get_closest_marker("brook_config")
    if marker is not None:
        overrides = {key.replace("_", "."): value for key, value in marker.kwargs.items()}
    broker = BrokerThread(tmp_path / "brook-data", overrides).start()
    try:
        yield broker
    finally:
        broker.stop()
