"""Kafka's Rate over a SampledStat: `quota.window.num` samples of
`quota.window.size.seconds` each, the rate being their total over the time they span
(never less than all but one full windows, so that a client's first burst is not
measured over a few milliseconds)."""

from __future__ import annotations


class SampledRate:
    __slots__ = ("_count", "_current", "_last_ms", "_samples", "_window_ms")

    def __init__(self, samples: int, window_ms: float) -> None:
        # Each sample: [start of its window (ms), total recorded in it].
        self._samples: list[list[float]] = []
        self._current = 0
        self._count = samples
        self._window_ms = window_ms
        self._last_ms = 0.0

    def idle_ms(self, now_ms: float) -> float:
        """Time since the last recording."""
        return now_ms - self._last_ms

    def record(self, value: float, now_ms: float) -> None:
        self._last_ms = now_ms
        samples = self._samples
        if not samples:
            samples.append([now_ms, 0.0])
            self._current = 0
        sample = samples[self._current]
        if now_ms - sample[0] >= self._window_ms:
            self._current = (self._current + 1) % self._count
            if self._current >= len(samples):
                samples.append([now_ms, 0.0])
            else:
                samples[self._current][:] = [now_ms, 0.0]
            sample = samples[self._current]
        sample[1] += value

    def window_size_ms(self, now_ms: float) -> float:
        """The time the samples span, as Rate.windowSize counts it."""
        expire = self._count * self._window_ms
        for sample in self._samples:
            if now_ms - sample[0] >= expire:
                sample[:] = [now_ms, 0.0]
        if not self._samples:
            self._samples.append([now_ms, 0.0])
            self._current = 0
        elapsed = now_ms - min(sample[0] for sample in self._samples)
        full_windows = int(elapsed // self._window_ms)
        if full_windows < self._count - 1:
            elapsed += (self._count - 1 - full_windows) * self._window_ms
        return elapsed or 1.0

    def measure(self, now_ms: float) -> float:
        """The rate per second."""
        size = self.window_size_ms(now_ms)
        return sum(sample[1] for sample in self._samples) / (size / 1000)
