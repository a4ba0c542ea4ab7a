"""Apache Kafka as a test peer: its jars are fetched once (bench/apache_kafka.py, a cache
later runs reuse), the first time a test of this folder asks for them.

The folder's tests are one xdist group: they share module fixtures (a data set written
once, read by each of Kafka's tools in turn), which --dist loadgroup then builds once,
on one worker, rather than once per worker that happens to run one of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.apache_kafka import kafka_jars

HERE = Path(__file__).parent


# First among the hooks, as tests/spark/conftest.py explains: xdist reads the marker in
# its own pytest_collection_modifyitems.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.xdist_group("apache-kafka"))


@pytest.fixture(scope="session")
def apache_kafka_jars() -> Path:
    return kafka_jars()
