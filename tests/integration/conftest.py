"""Fixtures of the integration tests that start brokers of their own: `brook serve`
processes, or one in-process broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from brook.broker.testing import BrokerThread

from .processes import Brokers


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    """The broker subprocesses of one test, each stopped (by its pid) at teardown."""
    pool = Brokers(tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerThread]:
    """An in-process broker of the test's own (not the session's shared one), for a test
    that fills it with much or looks at its state from its loop."""
    started = BrokerThread(tmp_path / "data").start()
    try:
        yield started
    finally:
        started.stop()
