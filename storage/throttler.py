"""A byte-rate limit shared by threads (Kafka's Throttler, which caps the log cleaner's
I/O at `log.cleaner.io.max.bytes.per.second`).

Callers report the bytes they read or wrote; every `check_interval_ms` the rate since
the last check is compared with the desired one, and the caller that finds it too high
sleeps until the bytes of that period fit the rate. The sleep holds the lock, as in
Kafka, so that every thread sharing the throttler waits: the cap is on all of them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# Kafka's default log.cleaner.io.max.bytes.per.second: no limit.
UNLIMITED = 1.7976931348623157e308
CHECK_INTERVAL_MS = 300


class Throttler:
    def __init__(
        self,
        desired_rate_per_sec: float = UNLIMITED,
        check_interval_ms: int = CHECK_INTERVAL_MS,
        *,
        sleep: Callable[[float], object] = time.sleep,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        """`sleep(seconds)` waits; a driver that must stop promptly passes one that
        returns early (e.g. a threading.Event's wait)."""
        self.desired_rate_per_sec = desired_rate_per_sec
        self._check_interval_ns = check_interval_ms * 1_000_000
        self._sleep = sleep
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._period_start_ns = clock_ns()
        self._observed = 0.0
        # Seconds slept so far: what a test or a metric reads.
        self.slept_s = 0.0

    def update_desired_rate(self, desired_rate_per_sec: float) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec

    def maybe_throttle(self, observed: float) -> None:
        if self.desired_rate_per_sec >= UNLIMITED:
            return
        with self._lock:
            self._observed += observed
            now = self._clock_ns()
            elapsed_ns = now - self._period_start_ns
            if elapsed_ns <= self._check_interval_ns or self._observed <= 0:
                return
            rate = self._observed * 1e9 / elapsed_ns
            if rate > self.desired_rate_per_sec:
                # How long the period's bytes should have taken, less what it took.
                sleep_s = self._observed / self.desired_rate_per_sec - elapsed_ns / 1e9
                if sleep_s > 0:
                    self._sleep(sleep_s)
                    self.slept_s += sleep_s
            self._period_start_ns = self._clock_ns()
            self._observed = 0.0
