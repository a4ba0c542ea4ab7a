"""Timers keyed by name on an injected clock, as a coordinator's shards schedule them.

Scheduling a key again replaces its timer (a member's session timer restarts with every
heartbeat); cancelling a key that has no timer does nothing. Deadlines are in the
clock's milliseconds, so a test that holds the clock holds the timers too. TimerQueue
is the bookkeeping; LoopTimer (loop_timer.py) fires it from the event loop and
MockTimer (mock_time.py) when a test moves its MockTime.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

from brook.storage.clock import Clock

log = logging.getLogger("brook.coordinator.timer")

TimerCallback = Callable[[], None]


class Timer(Protocol):
    def schedule(self, key: Hashable, delay_ms: int, callback: TimerCallback) -> None: ...

    def cancel(self, key: Hashable) -> None: ...

    def is_scheduled(self, key: Hashable) -> bool: ...


@dataclass(order=True)
class _Entry:
    deadline_ms: int
    sequence: int
    key: Hashable = field(compare=False)
    callback: TimerCallback = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class TimerQueue:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._by_key: dict[Hashable, _Entry] = {}
        self._heap: list[_Entry] = []
        self._sequence = itertools.count()

    def schedule(self, key: Hashable, delay_ms: int, callback: TimerCallback) -> None:
        self._drop(key)
        entry = _Entry(self.clock() + max(delay_ms, 0), next(self._sequence), key, callback)
        self._by_key[key] = entry
        heapq.heappush(self._heap, entry)
        self._changed()

    def cancel(self, key: Hashable) -> None:
        if self._drop(key):
            self._changed()

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._by_key

    def deadline_of(self, key: Hashable) -> int | None:
        entry = self._by_key.get(key)
        return entry.deadline_ms if entry is not None else None

    def __len__(self) -> int:
        return len(self._by_key)

    def next_deadline(self) -> int | None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].deadline_ms if self._heap else None

    def fire_due(self) -> int:
        """Run every timer whose deadline has come, earliest first (ties in the order
        they were scheduled); returns how many ran."""
        now = self.clock()
        fired = 0
        while (deadline := self.next_deadline()) is not None and deadline <= now:
            entry = heapq.heappop(self._heap)
            del self._by_key[entry.key]
            fired += 1
            try:
                entry.callback()
            except Exception:
                # One timer's bug must not stop the others (nor the loop that fires them).
                log.exception("Timer %s failed", entry.key)
        return fired

    def _drop(self, key: Hashable) -> bool:
        entry = self._by_key.pop(key, None)
        if entry is None:
            return False
        entry.cancelled = True
        return True

    def _changed(self) -> None:
        """The earliest deadline may have moved: a driver re-arms its wake-up here."""
