"""Shared fixtures: a broker per test (from the brook pytest plugin) and client helpers."""

from __future__ import annotations

import os
import uuid

import pytest

# Every JVM the tests start (Spark's driver, executors, master and worker, spark-submit,
# ZooKeeper) lives for seconds and reads little data: the C1 compiler alone and the serial
# collector cut the CPU the suite spends on them by about 40% (a standalone-cluster audit:
# 172 -> 103 CPU seconds), on a 2-core machine where the suite is CPU-bound. A value the
# caller set is kept.
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
