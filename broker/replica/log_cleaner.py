"""The broker's log cleaner (Kafka's LogCleaner): `log.cleaner.threads` cleaner threads,
each compacting the dirtiest compacted log it can take, again and again, resting
`log.cleaner.backoff.ms` when none needs it.

The choice of a log and the swap run on the event loop (they read and change the log's
segment list between two appends); reading the old segments and writing the cleaned
ones (storage.log_cleaner.clean) runs on a cleaner thread, so serving goes on meanwhile.
Each thread's offset map gets `log.cleaner.dedupe.buffer.size / log.cleaner.threads`
bytes; one throttler caps all their I/O at `log.cleaner.io.max.bytes.per.second`. A
change of any of these keys (AlterConfigs) restarts the threads, as in Kafka: a
cleaning under way stops at its next segment and is done again later.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from brook.protocol.errors import KafkaStorageError
from brook.storage.clock import Clock
from brook.storage.log_cleaner import (
    CleaningAborted,
    CleanResult,
    OffsetMapTooSmallError,
    clean,
)
from brook.storage.log_cleaner_manager import LogCleanerManager
from brook.storage.log_manager import LogManager
from brook.storage.throttler import Throttler

from ..config.broker_config import BrokerConfig
from ..config.dynamic import CLEANER_RECONFIGURABLE
from ..server.crash_points import crash_point

log = logging.getLogger("brook.log_cleaner")

# A rate of 0 bytes a second (or less) parks the cleaner threads, as in Kafka, where they
# never go on until the rate changes; here each wait is this long and ends at a restart.
PARKED_WAIT_S = 3600.0


class LogCleaner:
    def __init__(
        self,
        log_manager: LogManager,
        config: Callable[[], BrokerConfig],
        clock: Clock,
        switch_interval_while_cleaning: float | None = None,
    ) -> None:
        self.manager = LogCleanerManager()
        self._log_manager = log_manager
        self._config = config
        self._clock = clock
        # Set to stop the threads: a cleaning under way stops at its next segment (and
        # a throttled one wakes), leaving no file behind. A new one at each start.
        self._stop = threading.Event()
        self._executor: ThreadPoolExecutor | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._restarting: asyncio.Task[None] | None = None
        self.threads = 0
        # The GIL's switch interval while a cleaning computes, when the process is the
        # broker's own (`brook serve` sets it; None leaves the interpreter alone). The
        # event loop waits for the GIL after each of its system calls, and CPython hands
        # it over only after the switch interval (5 ms by default): a cleaning would hold
        # up every send and receive. Lowered only while cleanings run, because a lower
        # interval for the broker's whole life slowed acks=all producing in the main
        # bench (README, "The log cleaner").
        self.switch_interval_while_cleaning = switch_interval_while_cleaning
        self._cleanings = 0
        self._interval_before = sys.getswitchinterval()
        self.throttler = Throttler(
            config()["log.cleaner.io.max.bytes.per.second"], sleep=self._throttle_wait
        )

    def _throttle_wait(self, seconds: float) -> None:
        # The event of the threads' own start: a restart sets it and wakes them.
        self._stop.wait(min(seconds, PARKED_WAIT_S))

    @property
    def offset_map_memory(self) -> int:
        """Each thread's share of log.cleaner.dedupe.buffer.size."""
        config = self._config()
        return int(config["log.cleaner.dedupe.buffer.size"] // max(self.threads, 1))

    def start(self) -> None:
        config = self._config()
        self.threads = config["log.cleaner.threads"]
        rate = config["log.cleaner.io.max.bytes.per.second"]
        self.throttler.update_desired_rate(rate if rate > 0 else 1e-9)
        self._stop = threading.Event()
        if self.threads < 1:
            log.warning("log.cleaner.threads is %d: no log is cleaned", self.threads)
            return
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="log-cleaner")
        self._tasks = [
            asyncio.create_task(self._clean_loop(self._executor, self._stop))
            for _ in range(self.threads)
        ]
        log.info(
            "Log cleaner started: %d thread(s), %d bytes of offset map each",
            self.threads,
            self.offset_map_memory,
        )

    async def stop(self) -> None:
        if self._restarting is not None:
            self._restarting.cancel()
        await self._stop_threads()

    async def _stop_threads(self) -> None:
        self._stop.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._executor is not None:
            executor, self._executor = self._executor, None
            await asyncio.to_thread(executor.shutdown, True)

    def reconfigure(self, old: BrokerConfig, new: BrokerConfig) -> None:
        """A dynamic config changed: restart the threads when a key of theirs did
        (Kafka's LogCleaner.reconfigure). Called on the event loop."""
        if all(old[name] == new[name] for name in CLEANER_RECONFIGURABLE):
            return
        log.info(
            "Reconfiguring the log cleaner: %s",
            {name: new[name] for name in CLEANER_RECONFIGURABLE if old[name] != new[name]},
        )
        previous = self._restarting

        async def restart() -> None:
            if previous is not None:
                await asyncio.gather(previous, return_exceptions=True)
            await self._stop_threads()
            self.start()

        self._restarting = asyncio.get_running_loop().create_task(restart())

    async def _clean_loop(self, executor: ThreadPoolExecutor, stop: threading.Event) -> None:
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            chosen = self.manager.grab_filthiest_log(self._log_manager.logs, self._clock())
            if chosen is None:
                await asyncio.sleep(self._config()["log.cleaner.backoff.ms"] / 1000)
                continue
            log_, plan = chosen
            try:
                work = functools.partial(
                    clean,
                    plan,
                    stop.is_set,
                    offset_map_memory=self.offset_map_memory,
                    throttler=self.throttler,
                )
                future = loop.run_in_executor(executor, work)
                try:
                    # Shielded: when this task is cancelled, a cleaning that finishes
                    # anyway has its `.cleaned` files discarded, never left behind.
                    self._cleaning_started()
                    try:
                        result = await asyncio.shield(future)
                    finally:
                        self._cleaning_ended()
                except asyncio.CancelledError:
                    future.add_done_callback(_discard_result)
                    raise
                except CleaningAborted:
                    return
                except OffsetMapTooSmallError as exc:
                    # The buffer's size, not the log, is at fault: tried again, and again
                    # after a reconfiguration gives it room.
                    log.error("Cannot clean %s: %s", log_.name, exc)
                    await asyncio.sleep(self._config()["log.cleaner.backoff.ms"] / 1000)
                    continue
                except OSError as exc:
                    # A segment went meanwhile (retention, truncation, a deleted topic),
                    # or the disk failed: the log's own operations report the latter.
                    log.info("Cleaning of %s given up: %s", log_.name, exc)
                    await asyncio.sleep(self._config()["log.cleaner.backoff.ms"] / 1000)
                    continue
                except Exception:
                    log.exception("Cleaning of %s failed; it is not cleaned again", log_.name)
                    self.manager.mark_uncleanable(log_)
                    continue
                current = self._log_manager.get_log(log_.topic, log_.partition)
                if stop.is_set() or current is not log_:
                    result.discard()  # stopping, or deleted or moved meanwhile
                    continue
                try:
                    self.manager.swap_in(
                        log_, result, lambda step: crash_point(f"log-cleaner-{step}")
                    )
                except KafkaStorageError as exc:
                    log.error("Could not swap the cleaned segments into %s: %s", log_.name, exc)
            finally:
                self.manager.done_cleaning(log_)

    def _cleaning_started(self) -> None:
        if self.switch_interval_while_cleaning is None:
            return
        if self._cleanings == 0:
            self._interval_before = sys.getswitchinterval()
            sys.setswitchinterval(self.switch_interval_while_cleaning)
        self._cleanings += 1

    def _cleaning_ended(self) -> None:
        if self.switch_interval_while_cleaning is None or self._cleanings == 0:
            return
        self._cleanings -= 1
        if self._cleanings == 0:
            sys.setswitchinterval(self._interval_before)


def _discard_result(future: asyncio.Future[Any]) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    result: CleanResult = future.result()
    result.discard()
