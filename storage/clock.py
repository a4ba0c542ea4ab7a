"""The storage layer's one clock: wall-clock milliseconds, as Kafka's `Time` gives them.

Segments stamp their creation time with it (segment.ms counts from there when they hold
no timestamps yet), logs time their flushes and delayed deletions, and the log manager
passes it down to every log it opens. The broker hands in its own clock, so tests that
hold the broker's time still hold the storage's too; tools and Spark executors use the
system clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def system_clock() -> int:
    """Milliseconds since the epoch (Kafka's Time.SYSTEM.milliseconds())."""
    return time.time_ns() // 1_000_000
