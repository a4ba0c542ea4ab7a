"""Drive one broker through every measurement phase, recording a failure instead of stopping."""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.brokers import BROOK, BrokerSpec, hypothesis_installed, without_hypothesis
from bench.metrics import (
    ACKS,
    CPU_PHASE,
    LATENCY_PHASE,
    METRICS,
    RSS_AFTER_PHASE,
    RSS_IDLE_PHASE,
    SIZES,
    STARTUP_HYPOTHESIS_PHASE,
    STARTUP_PHASE,
    TXN_CONSUME_PHASE,
    TXN_PRODUCE_PHASE,
    TXN_SIZE,
    BrokerResult,
    consume_phase,
    produce_phase,
)
from bench.procs import BrokerProcess, BrokerStartError
from bench.workload import (
    Throughput,
    consume_throughput,
    create_topic,
    produce_latency,
    produce_throughput,
    produce_transactional_throughput,
)
from brook.broker.local_ports import free_port

MIB = 1024 * 1024
# Pause between "accepts connections" and the idle RSS sample, so lazily finished start-up work
# (imports, first allocations after bind) is counted as idle footprint rather than missed.
IDLE_SETTLE_S = 0.5
_SAMPLING_PHASES = frozenset({RSS_IDLE_PHASE, RSS_AFTER_PHASE, CPU_PHASE})


@dataclass(frozen=True)
class Plan:
    """The workload, identical for every broker in a run."""

    counts: dict[str, int]
    # Messages per round of the transactional phases, a whole number of transactions.
    txn_count: int
    txn_records: int
    # Each throughput phase runs this many times on fresh topics; the median round is reported.
    repeat: int
    partitions: int
    startup_runs: int
    latency_rate: int
    latency_seconds: float
    latency_size: int
    phase_timeout_s: float


def plan_for(
    scale: float,
    partitions: int,
    repeat: int = 3,
    startup_runs: int = 3,
    latency_rate: int = 2000,
    latency_seconds: float = 5.0,
    phase_timeout_s: float = 120.0,
) -> Plan:
    # With 3 rounds, 2M x 100 B and 500k x 1 KiB (and the transactions below) keep a default run
    # of both brokers at about 2-2.5 minutes on 2 cores, with rounds of 1-4 s: long enough that
    # the median round is steady.
    base = {"100B": 2_000_000, "1KiB": 500_000}
    counts = {size: max(1_000, int(n * scale)) for size, n in base.items()}
    # Every transaction adds AddPartitionsToTxn, EndTxn and a marker write to its records' cost,
    # so fewer messages fill a round: 1,000 transactions of 1,000 make produce rounds of 3-4 s at
    # scale 1, and read_committed rounds, which read all of them back, of about 1 s.
    txn_records = 1_000
    txn_count = max(1, round(1_000 * scale)) * txn_records
    return Plan(
        counts=counts,
        txn_count=txn_count,
        txn_records=txn_records,
        repeat=repeat,
        partitions=partitions,
        startup_runs=startup_runs,
        latency_rate=latency_rate,
        latency_seconds=latency_seconds,
        latency_size=100,
        phase_timeout_s=phase_timeout_s,
    )


def _say(broker: str, text: str) -> None:
    print(f"  [{broker}] {text}", file=sys.stderr, flush=True)


class _Run:
    """One broker's pass: owns the result and runs each phase behind a failure guard."""

    def __init__(self, spec: BrokerSpec, plan: Plan, log_path: Path, scratch: Path) -> None:
        self.spec = spec
        self.plan = plan
        self.log_path = log_path
        self.scratch = scratch
        self.result = BrokerResult(spec.name, spec.describe)
        self._dirs = 0
        # Brook runs as a user's install has it, without hypothesis, even where the bench's
        # environment holds it; STARTUP_HYPOTHESIS_PHASE measures its start with it as well.
        self.env = spec.env
        if spec.name == BROOK and hypothesis_installed():
            self.env = without_hypothesis(spec.env, scratch)

    def fresh_dir(self) -> Path:
        self._dirs += 1
        path = self.scratch / f"{self.spec.name}-data-{self._dirs}"
        path.mkdir()
        return path

    def broker(self, env: dict[str, str] | None = None) -> BrokerProcess:
        port = free_port()
        return BrokerProcess(
            self.spec.build_argv(port, self.fresh_dir()), port, self.log_path, env or self.env
        )

    def phase(self, name: str, body: Callable[[], str], proc: BrokerProcess | None = None) -> bool:
        """Run one phase; on any error record why and carry on with the next one."""
        if proc is not None and not proc.alive():
            reason = f"skipped: the broker {proc.exit_status()} earlier"
            self.result.failures[name] = reason
            _say(self.spec.name, f"{name}: {reason}")
            return False
        # The samples themselves cost nothing worth reporting; the workload phases do.
        track_cpu = proc is not None and name not in _SAMPLING_PHASES
        cpu_before = proc.cpu_seconds() if track_cpu and proc is not None else None
        try:
            summary = body()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            if proc is not None and not proc.alive():
                reason += f"\nthe broker {proc.exit_status()}; log tail:\n{proc.log_tail()}"
            self.result.failures[name] = reason
            _say(self.spec.name, f"{name}: FAILED: {reason.splitlines()[0]}")
            return False
        cpu_after = proc.cpu_seconds() if track_cpu and proc is not None else None
        if cpu_before is not None and cpu_after is not None:
            by_phase = self.result.details.setdefault("broker_cpu_s_by_phase", {})
            assert isinstance(by_phase, dict)
            by_phase[name] = cpu_after - cpu_before
            summary += f" [broker CPU {cpu_after - cpu_before:.2f}s]"
            self._cpu_per_mb(name, cpu_after - cpu_before)
        _say(self.spec.name, f"{name}: {summary}")
        return True

    def _cpu_per_mb(self, phase: str, cpu_s: float) -> None:
        """A throughput phase's broker CPU over the MB of values its rounds carried."""
        rounds = self.result.details.get(phase)
        if not isinstance(rounds, list):
            return  # not a throughput phase
        payload = sum(r["payload_bytes"] for r in rounds)
        if payload:
            self.result.values[f"{phase}|cpu_per_mb"] = cpu_s * 1e3 / (payload / 1e6)

    def startup(self, env: dict[str, str] | None = None, key: str = "startup") -> str:
        times: list[float] = []
        for _ in range(self.plan.startup_runs):
            with self.broker(env) as proc:
                assert proc.startup_s is not None
                times.append(proc.startup_s * 1e3)
        self.result.details[f"{key}_ms"] = times
        self.result.values[f"{key}|median"] = statistics.median(times)
        return f"median {statistics.median(times):.1f} ms of {_ms_list(times)}"

    def startup_with_hypothesis(self) -> str:
        """Start-up and idle memory again, hypothesis importable (the bench's own env)."""
        if not hypothesis_installed():
            raise RuntimeError(
                "hypothesis is not installed beside the bench (the bench extra brings it)"
            )
        summary = self.startup(self.spec.env, "startup hypothesis")
        with self.broker(self.spec.env) as proc:
            time.sleep(IDLE_SETTLE_S)
            rss = self.rss(proc, "rss hypothesis|idle")
        return f"{summary}; RSS idle {rss}"

    def cpu(self, proc: BrokerProcess, since: float | None) -> str:
        now = proc.cpu_seconds()
        if now is None or since is None:
            raise RuntimeError("broker process is gone")
        self.result.values["cpu|run"] = now - since
        return f"{now - since:.2f} s of CPU since the idle sample"

    def rss(self, proc: BrokerProcess, key: str) -> str:
        rss = proc.rss_bytes()
        if rss is None:
            raise RuntimeError("broker process is gone")
        self.result.values[key] = rss / MIB
        return f"{rss / MIB:.1f} MiB"

    def produce(self, proc: BrokerProcess, size: str, acks: str) -> str:
        return self._produce_rounds(
            proc,
            produce_phase(size, acks),
            lambda round_no: _topic(size, acks, round_no),
            lambda topic: produce_throughput(
                proc.bootstrap,
                topic,
                self.plan.counts[size],
                SIZES[size],
                ACKS[acks],
                self.plan.phase_timeout_s,
                alive=proc.alive,
            ),
        )

    def produce_transactional(self, proc: BrokerProcess) -> str:
        return self._produce_rounds(
            proc,
            TXN_PRODUCE_PHASE,
            _txn_topic,
            lambda topic: produce_transactional_throughput(
                proc.bootstrap,
                topic,
                self.plan.txn_count,
                SIZES[TXN_SIZE],
                self.plan.txn_records,
                self.plan.phase_timeout_s,
                alive=proc.alive,
            ),
        )

    def consume(self, proc: BrokerProcess, size: str) -> str:
        return self._consume_rounds(
            proc,
            consume_phase(size),
            produce_phase(size, "acks1"),
            lambda round_no: _topic(size, "acks1", round_no),
            self.plan.counts[size],
            size,
        )

    def consume_transactional(self, proc: BrokerProcess) -> str:
        return self._consume_rounds(
            proc, TXN_CONSUME_PHASE, TXN_PRODUCE_PHASE, _txn_topic, self.plan.txn_count, TXN_SIZE
        )

    def _produce_rounds(
        self,
        proc: BrokerProcess,
        phase: str,
        topic_of: Callable[[int], str],
        send: Callable[[str], Throughput],
    ) -> str:
        rounds = []
        for round_no in range(self.plan.repeat):
            # A fresh topic per round, so every round appends to an empty log.
            topic = topic_of(round_no)
            create_topic(proc.bootstrap, topic, self.plan.partitions)
            rounds.append(send(topic))
        return self._record_throughput(phase, rounds)

    def _consume_rounds(
        self,
        proc: BrokerProcess,
        phase: str,
        produced_by: str,
        topic_of: Callable[[int], str],
        count: int,
        size: str,
    ) -> str:
        """Read back every round's topic of the produce phase `produced_by`, read_committed."""
        if produced_by in self.result.failures:
            raise RuntimeError(f"nothing to read: the {produced_by} phase failed")
        rounds = [
            consume_throughput(
                proc.bootstrap,
                topic_of(round_no),
                self.plan.partitions,
                count,
                SIZES[size],
                self.plan.phase_timeout_s,
                isolation_level="read_committed",
                alive=proc.alive,
            )
            for round_no in range(self.plan.repeat)
        ]
        return self._record_throughput(phase, rounds)

    def latency(self, proc: BrokerProcess) -> str:
        bootstrap = proc.bootstrap
        topic = "bench-latency"
        create_topic(bootstrap, topic, self.plan.partitions)
        result = produce_latency(
            bootstrap,
            topic,
            self.plan.latency_rate,
            self.plan.latency_seconds,
            self.plan.latency_size,
            self.plan.phase_timeout_s,
            alive=proc.alive,
        )
        self.result.values["latency|p50"] = result.p50_ms
        self.result.values["latency|p99"] = result.p99_ms
        self.result.details[LATENCY_PHASE] = {
            "messages": result.messages,
            "achieved_rate": result.achieved_rate,
            "max_ms": result.max_ms,
        }
        return (
            f"p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms "
            f"({result.messages} msgs at {result.achieved_rate:.0f}/s)"
        )

    def _record_throughput(self, phase: str, rounds: list[Throughput]) -> str:
        """Report the median round (the lower middle one for an even count); keep all rounds."""
        ordered = sorted(rounds, key=lambda r: r.msgs_per_s)
        median = ordered[(len(ordered) - 1) // 2]
        self.result.values[f"{phase}|msgs"] = median.msgs_per_s
        self.result.values[f"{phase}|mb"] = median.mb_per_s
        self.result.details[phase] = [
            {"messages": r.messages, "payload_bytes": r.payload_bytes, "seconds": r.seconds}
            for r in rounds
        ]
        every = ", ".join(f"{r.msgs_per_s:,.0f}" for r in rounds)
        return (
            f"{median.msgs_per_s:,.0f} msgs/s, {median.mb_per_s:.1f} MB/s "
            f"({median.messages} in {median.seconds:.2f}s"
            + (f"; median of rounds {every} msgs/s)" if len(rounds) > 1 else ")")
        )

    def fail_remaining(self, reason: str) -> None:
        for metric in METRICS:
            if metric.key not in self.result.values:
                self.result.failures.setdefault(metric.phase, reason)


def run_broker(spec: BrokerSpec, plan: Plan, log_path: Path) -> BrokerResult:
    """Measure one broker. Every process started here is stopped before this returns."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_bytes(b"")
    _say(spec.name, f"{spec.describe}; broker output in {log_path}")
    with tempfile.TemporaryDirectory(prefix=f"brook-bench-{spec.name}-") as scratch:
        run = _Run(spec, plan, log_path, Path(scratch))
        run.phase(STARTUP_PHASE, run.startup)
        if spec.name == BROOK:
            run.phase(STARTUP_HYPOTHESIS_PHASE, run.startup_with_hypothesis)
        proc = run.broker()
        try:
            proc.start()
        except BrokerStartError as exc:
            run.fail_remaining(f"broker did not start: {exc}")
            _say(spec.name, f"FAILED to start: {str(exc).splitlines()[0]}")
            return run.result
        with proc:  # already started: leaving the block stops it, whatever happens inside
            time.sleep(IDLE_SETTLE_S)
            run.phase(RSS_IDLE_PHASE, lambda: run.rss(proc, "rss|idle"), proc)
            cpu_start = proc.cpu_seconds()
            for size in SIZES:
                for acks in ACKS:
                    run.phase(
                        produce_phase(size, acks),
                        functools.partial(run.produce, proc, size, acks),
                        proc,
                    )
            for size in SIZES:
                run.phase(consume_phase(size), functools.partial(run.consume, proc, size), proc)
            run.phase(TXN_PRODUCE_PHASE, lambda: run.produce_transactional(proc), proc)
            run.phase(TXN_CONSUME_PHASE, lambda: run.consume_transactional(proc), proc)
            run.phase(LATENCY_PHASE, lambda: run.latency(proc), proc)
            run.phase(RSS_AFTER_PHASE, lambda: run.rss(proc, "rss|after"), proc)
            run.phase(CPU_PHASE, lambda: run.cpu(proc, cpu_start), proc)
    return run.result


def _topic(size: str, acks: str, round_no: int) -> str:
    return f"bench-{size}-{acks}-r{round_no}"


def _txn_topic(round_no: int) -> str:
    return f"bench-txn-{TXN_SIZE}-r{round_no}"


def _ms_list(times: list[float]) -> str:
    return "[" + ", ".join(f"{t:.1f}" for t in times) + "] ms"
