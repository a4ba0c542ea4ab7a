"""How late the event loop runs what is due: the one number that says whether the
broker keeps up (one loop serves every client, so a slow handler delays them all).

A task sleeps a fixed interval and measures how much later than asked it woke up. Run
only when the admin endpoint is on.
"""

from __future__ import annotations

import asyncio

from brook.storage.time_histogram import TimeHistogram

INTERVAL_S = 0.25


class LoopLagMonitor:
    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.last_s = 0.0
        # The largest lag since /metrics last read it (a spike between two scrapes).
        self.max_s = 0.0
        self.lags_ms = TimeHistogram()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def take_max(self) -> float:
        """The largest lag since the previous call (the current one at least)."""
        worst, self.max_s = max(self.max_s, self.last_s), self.last_s
        return worst

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            lag = max(loop.time() - due, 0.0)
            self.last_s = lag
            self.max_s = max(self.max_s, lag)
            self.lags_ms.observe(lag * 1000)
