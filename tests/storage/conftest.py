"""Fixtures for the storage tests: real files in tmp_path, batches built in memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_helpers import BatchFactory, make_batch

from brook.storage import LogConfig


@pytest.fixture(name="make_batch")
def make_batch_fixture() -> BatchFactory:
    return make_batch


@pytest.fixture
def small_config() -> LogConfig:
    """Small segments and a dense index so a few kilobytes exercise rolls and lookups."""
    return LogConfig(segment_bytes=2048, index_interval_bytes=256, max_index_size=4096)


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    return tmp_path / "topic-0"
