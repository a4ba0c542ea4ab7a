"""Shared fixtures: a broker per test (from the brook pytest plugin) and client helpers."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
