"""A shard's timers, as Kafka's CoordinatorTimer gives them to a shard.

A timer's operation runs as a write operation of the shard's partition: the records it
returns are written and replayed like those of a request. Keys are the shard's own
(a partition's timers never collide with another's), and unloading the partition
cancels them all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from brook.protocol.errors import KafkaError

from .shard import CoordinatorResult
from .timer import Timer

log = logging.getLogger("brook.coordinator.timer")

TimerOperation = Callable[[], CoordinatorResult[Any]]
# Runs an operation on the partition's shard: the runtime's schedule_write_operation.
RunOperation = Callable[[str, TimerOperation], "asyncio.Future[Any]"]


class CoordinatorTimer:
    def __init__(self, timer: Timer, partition: int, run: RunOperation) -> None:
        self._timer = timer
        self._partition = partition
        self._run = run
        self._keys: set[str] = set()

    def schedule(self, key: str, delay_ms: int, operation: TimerOperation) -> None:
        """Run `operation` after `delay_ms`, replacing the timer `key` had."""
        self._keys.add(key)
        self._timer.schedule((self._partition, key), delay_ms, lambda: self._fire(key, operation))

    def cancel(self, key: str) -> None:
        if key in self._keys:
            self._keys.discard(key)
            self._timer.cancel((self._partition, key))

    def is_scheduled(self, key: str) -> bool:
        return key in self._keys

    def cancel_all(self) -> None:
        for key in list(self._keys):
            self.cancel(key)

    def _fire(self, key: str, operation: TimerOperation) -> None:
        self._keys.discard(key)
        self._run(f"timer {key}", operation).add_done_callback(lambda done: _log_failure(key, done))


def _log_failure(key: str, done: asyncio.Future[Any]) -> None:
    if done.cancelled():
        return
    error = done.exception()
    if isinstance(error, KafkaError):
        log.warning("Timer %s: its write failed: %s", key, error.message or error.error_code.name)
    elif error is not None:
        log.error("Timer %s failed", key, exc_info=error)
