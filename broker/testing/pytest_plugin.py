"""A pytest plugin: Brook brokers for tests, installed with the package (entry point
`pytest11`), so any project can write:

    def test_produce(brook_broker):
        producer = Producer({"bootstrap.servers": brook_broker.bootstrap})

Fixtures:
    brook_broker          a fresh broker for each test, on a free port with its own data
    brook_session_broker  one broker for the whole session (each xdist worker has its own):
                          starts once; pair it with brook_topic so tests do not meet
    brook_topic           a topic name no other test uses (not created: a producer's first
                          use creates it as Kafka does, or create_topic makes it)
    brook_async_broker    brook_broker for pytest-asyncio tests, with awaitable helpers

Each broker seeds and reads topics through a real client, `produce(topic, records)` and
`records(topic)` (a record it does not take raises `brook.broker.testing.ProduceError`),
makes topics with `create_topic`, and injects faults (`faults`). That client,
confluent-kafka, is the `testing` extra (`pip install 'brook-broker[testing]'`): without it
the fixtures start brokers all the same, and the three helpers say what to install.
With the admin endpoint on (`admin_listener="http://127.0.0.1:0"`), `admin_url` and
`admin_port` say where it listens.

Broker configs for brook_broker and brook_async_broker come from the `brook_config`
marker, `@pytest.mark.brook_config(num_partitions=3)`; for brook_session_broker from
the `brook_session_config` ini option, one `key=value` a line.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from . import AsyncBroker, BrokerThread

try:  # the async fixture needs pytest-asyncio; the others do not
    import pytest_asyncio
except ImportError:  # pragma: no cover - depends on the user's environment
    _HAS_PYTEST_ASYNCIO = False
else:
    _HAS_PYTEST_ASYNCIO = True

# Kafka's legal topic characters, and a length that leaves room for the suffix.
_TOPIC_UNSAFE = re.compile(r"[^a-zA-Z0-9._-]+")
_TOPIC_PREFIX_LENGTH = 200


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "brook_session_config",
        type="linelist",
        default=[],
        help="broker configs of brook_session_broker, one key=value a line",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "brook_config(**configs): broker configs for the brook_broker and brook_async_broker"
        " fixtures (underscores stand for dots: num_partitions=3)",
    )


def _marker_configs(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("brook_config")
    if marker is None:
        return {}
    return {key.replace("_", "."): value for key, value in marker.kwargs.items()}


@pytest.fixture
def brook_broker(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerThread]:
    """A running Brook broker on a free port of 127.0.0.1 with its own data directory."""
    broker = BrokerThread(tmp_path / "brook-data", _marker_configs(request)).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def brook_session_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerThread]:
    """One broker for every test of the session that asks for it (started once)."""
    overrides = {}
    for line in request.config.getini("brook_session_config"):
        key, separator, value = line.partition("=")
        if not separator:
            raise pytest.UsageError(f"brook_session_config takes key=value lines, got {line!r}")
        overrides[key.strip()] = value.strip()
    data_dir = tmp_path_factory.mktemp("brook-session") / "brook-data"
    broker = BrokerThread(data_dir, overrides).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def brook_topic(request: pytest.FixtureRequest) -> str:
    """A topic name of this test's own: the test's name and a random suffix."""
    prefix = _TOPIC_UNSAFE.sub("-", request.node.name).strip("-.")[:_TOPIC_PREFIX_LENGTH]
    return f"{prefix or 'topic'}-{uuid.uuid4().hex[:10]}"


if _HAS_PYTEST_ASYNCIO:

    @pytest_asyncio.fixture
    async def brook_async_broker(
        request: pytest.FixtureRequest, tmp_path: Path
    ) -> AsyncIterator[AsyncBroker]:
        """brook_broker for asyncio tests: started and stopped without blocking the test's
        event loop; `await broker.produce(...)`, `await broker.records(...)`."""
        broker = await AsyncBroker(tmp_path / "brook-data", _marker_configs(request)).start()
        try:
            yield broker
        finally:
            await broker.stop()

else:  # pragma: no cover - depends on the user's environment

    @pytest.fixture
    def brook_async_broker() -> None:
        pytest.fail("brook_async_broker needs pytest-asyncio: pip install pytest-asyncio")
