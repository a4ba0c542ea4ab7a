"""A job run again whenever asked, never two runs at once: what a watch asks for while a
run is under way makes one more run after it, so no change is missed and reads of
ZooKeeper never interleave."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger("brook.zookeeper")


class SerialJob:
    def __init__(self, name: str, job: Callable[[], Awaitable[None]]) -> None:
        self._name = name
        self._job = job
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._closed = False

    def schedule(self) -> None:
        if self._closed:
            return
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            self._again = False
            try:
                await self._job()
            except asyncio.CancelledError:
                raise
            except Exception:
                # The next watch or session change runs it again.
                log.exception("ZooKeeper: %s failed", self._name)
            if not self._again or self._closed:
                return

    @property
    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    async def idle(self) -> None:
        """Wait for the runs asked for so far (tests and start-up)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait([self._task])

    def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
