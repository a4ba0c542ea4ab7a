"""The metrics the bench reports, in table order, and the per-broker results that hold them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Better = Literal["higher", "lower"]


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    better: Better
    # The measurement phase that produces this metric; a failed phase marks all its metrics failed.
    phase: str


SIZES: dict[str, int] = {"100B": 100, "1KiB": 1024}
ACKS: dict[str, str] = {"acks1": "1", "acksall": "all"}


def produce_phase(size: str, acks: str) -> str:
    return f"produce {size} {acks}"


def consume_phase(size: str) -> str:
    return f"consume {size}"


# The transactional phases: 100 B values in transactions, then read back with read_committed.
TXN_SIZE = "100B"
TXN_PRODUCE_PHASE = f"produce txn {TXN_SIZE}"
TXN_CONSUME_PHASE = f"consume txn {TXN_SIZE} read_committed"
LATENCY_PHASE = "produce latency"
STARTUP_PHASE = "startup"
# Brook's start again with hypothesis importable, as in a test environment: kio registers a
# hypothesis strategy for each of its types whenever it finds hypothesis, a cost Brook's
# command line keeps out of its start (protocol/kio_loading.py). Brook only.
STARTUP_HYPOTHESIS_PHASE = "startup, hypothesis installed"
RSS_IDLE_PHASE = "rss idle"
RSS_AFTER_PHASE = "rss after run"
CPU_PHASE = "cpu"


def _throughput(phase: str, label: str) -> list[Metric]:
    return [
        Metric(f"{phase}|msgs", label, "msgs/s", "higher", phase),
        Metric(f"{phase}|mb", label, "MB/s", "higher", phase),
        # What the broker spent on each MB of the phase's values (all its rounds): the
        # cost of the work, apart from how fast one Python client can drive it.
        Metric(f"{phase}|cpu_per_mb", label, "broker CPU ms/MB", "lower", phase),
    ]


def _all_metrics() -> list[Metric]:
    metrics: list[Metric] = []
    for size in SIZES:
        for acks, acks_value in ACKS.items():
            metrics += _throughput(produce_phase(size, acks), f"produce {size} acks={acks_value}")
    for size in SIZES:
        metrics += _throughput(consume_phase(size), f"consume {size}")
    metrics += _throughput(TXN_PRODUCE_PHASE, f"produce {TXN_SIZE} transactional")
    metrics += _throughput(TXN_CONSUME_PHASE, f"consume {TXN_SIZE} txn read_committed")
    metrics += [
        Metric("latency|p50", "produce latency p50", "ms", "lower", LATENCY_PHASE),
        Metric("latency|p99", "produce latency p99", "ms", "lower", LATENCY_PHASE),
        Metric("startup|median", "start to accepting TCP", "ms", "lower", STARTUP_PHASE),
        Metric("rss|idle", "RSS idle after start", "MiB", "lower", RSS_IDLE_PHASE),
        Metric(
            "startup hypothesis|median",
            "start, hypothesis installed",
            "ms",
            "lower",
            STARTUP_HYPOTHESIS_PHASE,
        ),
        Metric(
            "rss hypothesis|idle",
            "RSS idle, hypothesis installed",
            "MiB",
            "lower",
            STARTUP_HYPOTHESIS_PHASE,
        ),
        Metric("rss|after", "RSS after the run", "MiB", "lower", RSS_AFTER_PHASE),
        # The Python client often caps produce throughput on a small machine; the broker's CPU
        # for the same work still shows which broker is cheaper to run.
        Metric("cpu|run", "broker CPU, all phases", "s", "lower", CPU_PHASE),
    ]
    return metrics


METRICS: list[Metric] = _all_metrics()


@dataclass
class BrokerResult:
    """What one broker scored: metric values, plus the reason for every phase that failed."""

    name: str
    describe: str
    values: dict[str, float] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    # Raw observations behind the headline numbers (counts, durations, every start time).
    details: dict[str, object] = field(default_factory=dict)

    def value(self, metric: Metric) -> float | None:
        return self.values.get(metric.key)

    def failure(self, metric: Metric) -> str | None:
        return self.failures.get(metric.phase)
