"""Time that moves only when a test says so, and timers that follow it.

Like Kafka's MockTime: `sleep(ms)` moves the clock forward and, on the way, fires every
timer of the MockTimers that follow it at its deadline, in deadline order, with the
clock showing that deadline. A coordinator's session, rebalance and expiry timers can be
driven through hours in a test that takes milliseconds.
"""

from __future__ import annotations

from .timer import TimerQueue


class MockTime:
    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = start_ms
        self._timers: list[MockTimer] = []

    def __call__(self) -> int:
        return self.now_ms

    def milliseconds(self) -> int:
        return self.now_ms

    def sleep(self, ms: int) -> None:
        target = self.now_ms + ms
        while True:
            due = [
                (deadline, timer)
                for timer in self._timers
                if (deadline := timer.next_deadline()) is not None and deadline <= target
            ]
            if not due:
                break
            deadline, timer = min(due, key=lambda item: item[0])
            self.now_ms = max(self.now_ms, deadline)
            timer.fire_due()
        self.now_ms = target


class MockTimer(TimerQueue):
    def __init__(self, time: MockTime) -> None:
        super().__init__(time)
        self.time = time
        time._timers.append(self)
