"""A histogram of durations kept as plain counts, and the log flush times (Kafka's
LogFlushStats: `kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs`).

Recording is a bisect and two additions, cheap enough for a hot path; whoever exports
the numbers (the broker's /metrics) reads `bounds`, `counts` and `sum_ms` when asked.
No lock: each histogram is written from one thread (the broker's event loop) and a
reader that sees a count one ahead of the sum is off by one observation at most.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

# Upper bounds in milliseconds: a request answered from memory takes a fraction of a
# millisecond, a long poll up to fetch.max.wait.ms (500 ms by default), a stalled disk
# or a parked JoinGroup many seconds.
DEFAULT_BOUNDS_MS: tuple[float, ...] = (
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1000.0,
    2500.0,
    5000.0,
    10000.0,
    30000.0,
)


class TimeHistogram:
    """Counts of durations (ms) at or below each bound, the last slot for the rest."""

    __slots__ = ("bounds", "counts", "sum_ms")

    def __init__(self, bounds: Sequence[float] = DEFAULT_BOUNDS_MS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.sum_ms = 0.0

    def observe(self, value_ms: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value_ms)] += 1
        self.sum_ms += value_ms

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, observations at or below it), the last bound infinite."""
        result = []
        total = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            total += count
            result.append((bound, total))
        return result


# Every fsync of a log's segments, whichever log and broker (Kafka's LogFlushStats is
# one timer for the whole process too).
LOG_FLUSH_TIMES = TimeHistogram()
