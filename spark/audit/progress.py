"""Progress of a long audit on stderr: a line per stage, and Spark's task counts while a
stage runs long.

    audit: [3/9] semantics ...
    audit:   spark stage 14: 37/120 tasks
    audit: [3/9] semantics: done in 8.2 s

The task counts come from Spark's status tracker, polled by a daemon thread; a line is
printed only when they changed and at most every `interval` seconds, so a short audit
prints only its stage lines.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pyspark import StatusTracker

PREFIX = "audit:"


class Progress:
    def __init__(
        self, stages: int, spark: Any = None, stream: TextIO | None = None, interval: float = 5.0
    ):
        self.stages = stages
        self.number = 0
        self.stream = stream or sys.stderr
        self.interval = interval
        self._tracker: StatusTracker | None = (
            spark.sparkContext.statusTracker() if spark is not None else None
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def say(self, text: str) -> None:
        with self._lock:
            print(f"{PREFIX} {text}", file=self.stream, flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.number += 1
        label = f"[{self.number}/{self.stages}] {name}"
        self.say(f"{label} ...")
        started = time.monotonic()
        yield
        self.say(f"{label}: done in {time.monotonic() - started:.1f} s")

    def __enter__(self) -> Progress:
        if self._tracker is not None:
            self._thread = threading.Thread(
                target=self._watch, args=(self._tracker,), name="audit-progress", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 1)

    def _watch(self, tracker: StatusTracker) -> None:
        shown: dict[int, tuple[int, int]] = {}
        while not self._stop.wait(self.interval):
            try:
                stage_ids = tracker.getActiveStageIds()
                infos = [tracker.getStageInfo(stage_id) for stage_id in stage_ids]
            except Exception:  # the context is stopping: nothing more to show
                return
            for info in infos:
                if info is None:
                    continue
                counts = (info.numCompletedTasks, info.numTasks)
                if shown.get(info.stageId) != counts:
                    shown[info.stageId] = counts
                    self.say(
                        f"  spark stage {info.stageId}: {counts[0]}/{counts[1]} tasks"
                        f" ({info.numActiveTasks} running)"
                    )
