"""Fixtures of the integration tests that start `brook serve` processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .processes import Brokers


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[Brokers]:
    """The broker subprocesses of one test, each stopped (by its pid) at teardown."""
    pool = Brokers(tmp_path)
    try:
        yield pool
    finally:
        pool.stop_all()
