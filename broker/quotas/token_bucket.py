"""Kafka's TokenBucket stat (KIP-599), which the controller mutation quota is measured by:
credits refill at the quota's rate up to a burst of quota x samples x window; a change
spends its partitions' worth, and the quota is exhausted while the credits are below
zero. Unlike a sampled rate, one big burst is paid back in exactly the time it takes."""

from __future__ import annotations


class TokenBucket:
    __slots__ = ("_last_ms", "_tokens")

    def __init__(self) -> None:
        self._tokens = 0.0
        self._last_ms: float | None = None  # never refilled: full at the first look

    def measure(self, rate: float, burst: float, now_ms: float) -> float:
        """The credits left (negative: exhausted)."""
        self._refill(rate, burst, now_ms)
        return self._tokens

    def record(self, value: float, rate: float, burst: float, now_ms: float) -> None:
        self._refill(rate, burst, now_ms)
        self._tokens = min(burst, self._tokens - value)

    def idle_ms(self, now_ms: float) -> float:
        return now_ms - (self._last_ms or 0.0)

    def _refill(self, rate: float, burst: float, now_ms: float) -> None:
        if self._last_ms is None:
            self._tokens = burst
        else:
            self._tokens = min(burst, self._tokens + rate * (now_ms - self._last_ms) / 1000)
        self._last_ms = now_ms
