"""Clocks a test hands to a broker (BrokerThread(clock=...)) to move its time on at will."""

from __future__ import annotations

import time


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class ManualClock:
    """Stands still until the test sets `now`."""

    def __init__(self) -> None:
        self.now = wall_clock_ms()

    def __call__(self) -> int:
        return self.now


class ShiftedClock:
    """Runs with the wall clock, `shift_ms` ahead of it: a jump forward without waiting."""

    def __init__(self) -> None:
        self.shift_ms = 0

    def __call__(self) -> int:
        return wall_clock_ms() + self.shift_ms
