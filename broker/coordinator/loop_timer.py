"""Timers fired from the asyncio event loop, on the broker's clock.

The loop sleeps until the earliest deadline, at most MAX_WAIT_MS at a time: a clock
that moves other than with the loop's own (a wall-clock step, a test's manual clock) is
noticed within that bound, and a wake-up before a deadline just sleeps again.
"""

from __future__ import annotations

import asyncio

from brook.storage.clock import Clock

from .timer import TimerQueue

MAX_WAIT_MS = 1000


class LoopTimer(TimerQueue):
    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self._wake: asyncio.TimerHandle | None = None
        self._wake_at: float | None = None

    def close(self) -> None:
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None

    def _changed(self) -> None:
        deadline = self.next_deadline()
        if deadline is None:
            self.close()
            return
        loop = asyncio.get_running_loop()
        wait_s = min(max(deadline - self.clock(), 0), MAX_WAIT_MS) / 1000
        wake_at = loop.time() + wait_s
        if self._wake is not None:
            if self._wake_at is not None and self._wake_at <= wake_at:
                return  # an earlier wake-up is armed already
            self._wake.cancel()
        self._wake_at = wake_at
        self._wake = loop.call_at(wake_at, self._on_wake)

    def _on_wake(self) -> None:
        self._wake = None
        self._wake_at = None
        self.fire_due()
        self._changed()
