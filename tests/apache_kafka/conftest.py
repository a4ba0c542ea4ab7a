"""Apache Kafka as a test peer: its jars are fetched once (bench/apache_kafka.py, a cache
later runs reuse), the first time a test of this folder asks for them.

Each module's tests are one xdist group: they share module fixtures (a data set written
once, read by each of Kafka's tools in turn), which --dist loadgroup then builds once,
on one worker, rather than once per worker that happens to run one of them. One group a
module, not one for the folder: one chain of them all, at a third of a core under the
full suite, outlasted the rest of it."""

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
        path = Path(item.path)
        if path.parent == HERE:
            item.add_marker(pytest.mark.xdist_group(f"apache-kafka-{path.stem}"))


@pytest.fixture(scope="session")
def apache_kafka_jars() -> Path:
    return kafka_jars()
