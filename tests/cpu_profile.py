"""Where the suite's CPU goes: with BROOK_CPU_PROFILE=FILE, each pytest process (each
xdist worker) appends one JSON line per test phase to FILE: the CPU seconds its own
process and every process below it (brokers, JVMs, CLI runs) spent during the phase.

The suite is CPU-bound on a 2-core machine, so wall times under xdist say more about
what ran beside a test than about the test. A process's CPU is read from /proc (its
utime+stime, and its reaped children's) at the phase's start and end; a process that
ends within the phase is counted through its parent's children's times once reaped. A
module fixture's JVM is charged to the phases it works in, its start to the first
test's setup. Work a test leaves running (a broker thread it stopped late) is charged to
whatever phase runs next in that process.

Each line also names the phase's worker and its start and stop (wall clock): a timeline
of the run, which says whether every worker was busy to the end or a few long ones (an
xdist group, a slow fixture) held the run back.

    BROOK_CPU_PROFILE=/tmp/cpu.jsonl .ci/run
    python -m tests.cpu_profile /tmp/cpu.jsonl     # the top modules and tests, the workers
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

TICKS = os.sysconf("SC_CLK_TCK")


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def _cpu(pid: int) -> float:
    """utime + stime of the process and its reaped children, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # Fields after the name: state is [0]; utime, stime, cutime, cstime are [11:15].
    return sum(int(value) for value in fields[11:15]) / TICKS


def _tree_cpu() -> dict[int, float]:
    return {pid: _cpu(pid) for pid in _descendants(os.getpid())}


class CpuProfile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        yield from self._measured(item, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        yield from self._measured(item, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        yield from self._measured(item, "teardown")

    def _measured(self, item: pytest.Item, phase: str) -> Iterator[None]:
        before = _tree_cpu()
        start = time.time()
        yield
        stop = time.time()
        after = _tree_cpu()
        # A process gone by the end was reaped by one in the tree, whose children's times
        # now hold its whole life: less its reading at the start, that is this phase's.
        spent = sum(after.values()) - sum(before.values())
        entry = {
            "test": item.nodeid,
            "phase": phase,
            "cpu_s": round(spent, 2),
            "worker": self.worker,
            "start": round(start, 3),
            "stop": round(stop, 3),
        }
        with open(self.path, "a") as out:
            out.write(json.dumps(entry) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    target = os.environ.get("BROOK_CPU_PROFILE")
    if target:
        config.pluginmanager.register(CpuProfile(Path(target)), "brook-cpu-profile")


def report(path: Path, top: int = 25) -> str:
    by_module: Counter[str] = Counter()
    by_test: Counter[str] = Counter()
    busy: Counter[str] = Counter()
    first, last = float("inf"), 0.0
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        test = entry["test"].split("@")[0]
        by_module[test.split("::")[0]] += entry["cpu_s"]
        by_test[test] += entry["cpu_s"]
        if "start" in entry:  # lines of an older profile have no times
            busy[entry["worker"]] += entry["stop"] - entry["start"]
            first, last = min(first, entry["start"]), max(last, entry["stop"])
    lines = [f"{sum(by_module.values()):.0f} CPU-s in all", "", "modules:"]
    lines += [f"{cpu:8.1f}  {name}" for name, cpu in by_module.most_common(top)]
    lines += ["", "tests (setup + call + teardown):"]
    lines += [f"{cpu:8.1f}  {name}" for name, cpu in by_test.most_common(top)]
    if busy:
        lines += ["", f"workers, busy seconds of the run's {last - first:.0f}:"]
        lines += [f"{seconds:8.0f}  {worker}" for worker, seconds in sorted(busy.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(Path(sys.argv[1])))
