"""How opening a partition's log reports itself: one line per partition, and progress.

A broker that restarts after an unclean stop re-validates every partition past its
recovery point, which takes from milliseconds to minutes each. The reader of its log
wants one line per partition saying what was done (Kafka's "Completed load of log ...
(3/50 completed in <dir>)"), and, while a long recovery runs, a sign that it moves: a
line naming the segment it has reached, at most every `interval_s`. Every line goes to
one logger (or to `sink`, which a caller may give to collect them).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger("brook.storage.log")

# Between two "Recovering segment" lines of one partition: a short recovery (the usual
# one segment after a crash) shows only its loaded line.
PROGRESS_INTERVAL_S = 5.0


class LoadProgress:
    def __init__(
        self,
        where: str = "",
        sink: Callable[[str], None] | None = None,
        interval_s: float = PROGRESS_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`where`: the caller's place in its own work, e.g. "3/50 in /var/lib/brook",
        put before each line; `interval_s` 0 reports every segment."""
        self._prefix = f"[{where}] " if where else ""
        self._sink = sink
        self._interval_s = interval_s
        self._clock = clock
        self._last = clock()

    def recovering_segment(self, name: str, number: int, total: int) -> None:
        """Recovery of `name` has reached its `number`th unflushed segment of `total`."""
        now = self._clock()
        if now - self._last < self._interval_s:
            return
        self._last = now
        self._emit(f"Recovering segment {number}/{total} of {name} ({number * 100 // total}%)")

    def loaded(self, message: str) -> None:
        """The partition's one line, once its log is open."""
        self._emit(message)

    def _emit(self, message: str) -> None:
        if self._sink is not None:
            self._sink(self._prefix + message)
        else:
            logger.info("%s%s", self._prefix, message)
