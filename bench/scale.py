"""`python -m bench.scale`: how a broker's costs grow with its partitions, Brook beside Apache
Kafka and Tansu in one run.

For each count of `--partitions` (default 100, 1,000 and 9,000: Apache Kafka 4 refuses 10,000
in one request), each broker is started on
an empty data dir, and then:

1. Creation while serving. A bystander keeps working while one CreateTopics makes a topic
   of that many partitions (replication factor 1): a producer sends 100 B to its own
   topic every 20 ms (acks=1) and a second client asks for its topic's metadata every
   20 ms; each answer's latency is kept. Reported: the CreateTopics time, the time until
   Metadata shows a leader for every partition, partitions a second over the latter, and
   the bystander's p50, p99 and worst latency while the CreateTopics is answered (a
   request never answered within 10 s counts 10 s).
2. Holding them. Open file descriptors of the broker (and its children) before and after,
   per partition; RSS; the time of a Metadata request for every topic and of ListOffsets
   (latest) for every partition.
3. Restart. A clean stop (SIGTERM), a start on the same data dir: seconds to accepting
   connections, and to answering ListOffsets for every partition again; then the same after
   a SIGKILL (a crash: what was not flushed is recovered). Tansu keeps its data in memory
   only (this build has no disk storage), so it is not restarted.

Before each round, the time to create one empty file in the work dir is taken and reported
(`create us`): this machine's filesystem creates files up to 50 times slower for minutes after
many were deleted, so every round's files stay until the run ends.

A chart (`--out`, scale.png) draws creation time, restart time, a Metadata request of every
partition and RSS against the partition count, one line per broker.

    python -m bench.scale                                 # about 10 minutes on 2 cores
    python -m bench.scale --partitions 100 1000 --only brook
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil  # type: ignore[import-untyped]  # psutil ships no types
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from bench.cli import add_broker_selection, bench_parser
from brook.broker.local_ports import free_port

from .brokers import BROKER_NAMES, BROOK, KAFKA, REFERENCE, SPECS, BrokerSpec, brook_spec
from .kafka_admin import NewTopic, OffsetSpec
from .machine import file_create_us
from .procs import BrokerProcess
from .report import ratio_parts

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TOPIC = "scale"
BYSTANDER_TOPIC = "bystander"
# The bystander's pace: one produce and one Metadata request per interval.
BYSTANDER_INTERVAL_S = 0.02
UNANSWERED_S = 10.0
TIMEOUT_S = 900.0
START_TIMEOUT_S = 600.0


@dataclass
class Latencies:
    """Latencies (seconds) of one kind of bystander request, kept thread-safely."""

    values: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float) -> None:
        with self.lock:
            self.values.append(seconds)

    def clear(self) -> None:
        with self.lock:
            self.values.clear()

    def summary(self) -> dict[str, float | int]:
        with self.lock:
            values = sorted(self.values)
        if not values:
            return {"count": 0}
        return {
            "count": len(values),
            "p50_ms": 1000 * values[len(values) // 2],
            "p99_ms": 1000 * values[min(len(values) - 1, int(len(values) * 0.99))],
            "max_ms": 1000 * values[-1],
        }


class Bystander:
    """A client that keeps producing and asking for metadata while the broker does
    something else, timing each answer."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.produce = Latencies()
        self.metadata = Latencies()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> Bystander:
        self._threads = [
            threading.Thread(target=self._producing, daemon=True),
            threading.Thread(target=self._asking, daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(UNANSWERED_S + 5)

    def _producing(self) -> None:
        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "acks": 1, "linger.ms": 0, "logger": _quiet()}
        )
        pending: dict[int, float] = {}

        def delivered(sent: float) -> Callable[[object, object], None]:
            def report(error: object, _message: object) -> None:
                pending.pop(id(report), None)
                self.produce.add(UNANSWERED_S if error else time.perf_counter() - sent)

            pending[id(report)] = sent
            return report

        while not self._stop.is_set():
            producer.produce(BYSTANDER_TOPIC, b"x" * 100, callback=delivered(time.perf_counter()))
            producer.poll(BYSTANDER_INTERVAL_S)
        producer.flush(UNANSWERED_S)
        now = time.perf_counter()
        for sent in pending.values():  # never answered
            self.produce.add(max(now - sent, UNANSWERED_S))

    def _asking(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "logger": _quiet()})
        while not self._stop.is_set():
            started = time.perf_counter()
            try:
                producer.list_topics(BYSTANDER_TOPIC, timeout=UNANSWERED_S)
                self.metadata.add(time.perf_counter() - started)
            except Exception:
                self.metadata.add(UNANSWERED_S)
            self._stop.wait(BYSTANDER_INTERVAL_S)


def _quiet() -> logging.Logger:
    """A logger for librdkafka that drops its lines (a broker busy for seconds makes it
    complain; the latencies say it better)."""
    quiet = logging.getLogger("bench.scale.librdkafka")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    return quiet


@dataclass
class ScaleRun:
    broker: str
    partitions: int
    create_response_s: float | None = None
    create_ready_s: float | None = None
    partitions_per_s: float | None = None
    bystander_produce: dict[str, float | int] = field(default_factory=dict)
    bystander_metadata: dict[str, float | int] = field(default_factory=dict)
    fds_before: int | None = None
    fds_after: int | None = None
    fds_per_partition: float | None = None
    rss_mib: float | None = None
    metadata_all_ms: float | None = None
    list_offsets_all_ms: float | None = None
    restart_listening_s: float | None = None
    restart_serving_s: float | None = None
    rss_after_restart_mib: float | None = None
    crash_listening_s: float | None = None
    crash_serving_s: float | None = None
    # Microseconds to create one empty file just before the round
    # (bench.machine.file_create_us): creation's time depends on it on this machine.
    file_create_us: float | None = None
    error: str | None = None


def quiet_admin(bootstrap: str) -> AdminClient:
    config = {"bootstrap.servers": bootstrap, "logger": _quiet()}
    return AdminClient(config)  # type: ignore[arg-type]  # typed without "logger"


def _fds(process: BrokerProcess) -> int | None:
    if process.pid is None:
        return None
    total = 0
    try:
        root = psutil.Process(process.pid)
        for proc in [root, *root.children(recursive=True)]:
            with contextlib.suppress(psutil.NoSuchProcess):
                total += proc.num_fds()
    except psutil.NoSuchProcess:
        return None
    return total


def rss_mib(process: BrokerProcess) -> float | None:
    rss = process.rss_bytes()
    return None if rss is None else rss / 2**20


def _all_led(admin: AdminClient, partitions: int, deadline: float) -> None:
    """Wait until Metadata shows the topic with a leader for each of its partitions."""
    while True:
        try:
            topic = admin.list_topics(TOPIC, timeout=30).topics.get(TOPIC)
            if (
                topic is not None
                and topic.error is None
                and len(topic.partitions) == partitions
                and all(p.leader >= 0 for p in topic.partitions.values())
            ):
                return
        except Exception:
            pass
        if time.perf_counter() > deadline:
            raise TimeoutError(f"{TOPIC} not led in full after {TIMEOUT_S:.0f} s")
        time.sleep(0.05)


def _list_offsets_all(admin: AdminClient, partitions: int) -> None:
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # untyped in confluent-kafka
    request = {TopicPartition(TOPIC, p): latest for p in range(partitions)}
    for future in admin.list_offsets(request, request_timeout=TIMEOUT_S).values():
        future.result(TIMEOUT_S)


def _timed_until_ok(action: Callable[[], object]) -> float:
    """The time of the first call of `action` that succeeds (a broker may answer a
    retriable error for a moment after its Metadata shows the leaders, as Kafka's does)."""
    deadline = time.perf_counter() + TIMEOUT_S
    while True:
        started = time.perf_counter()
        try:
            action()
            return time.perf_counter() - started
        except Exception:
            if time.perf_counter() > deadline:
                raise
            time.sleep(0.1)


def _restart(
    spec: BrokerSpec, port: int, data: Path, log_path: Path, partitions: int
) -> tuple[BrokerProcess, float, float]:
    """A start on the data dir left behind: the broker, seconds to accepting connections
    and to answering ListOffsets for every partition."""
    broker = BrokerProcess(spec.build_argv(port, data), port, log_path, spec.env)
    started = time.perf_counter()
    broker.start(START_TIMEOUT_S)
    listening = time.perf_counter() - started
    admin = quiet_admin(broker.bootstrap)
    deadline = time.perf_counter() + TIMEOUT_S
    while True:
        try:
            _list_offsets_all(admin, partitions)
            return broker, listening, time.perf_counter() - started
        except Exception:
            if time.perf_counter() > deadline:
                broker.stop(TIMEOUT_S)
                raise
            time.sleep(0.1)


def create_bystander_topic(admin: AdminClient) -> None:
    admin.create_topics([NewTopic(BYSTANDER_TOPIC, 1, 1)])[BYSTANDER_TOPIC].result(60)


def measure(spec: BrokerSpec, partitions: int, work: Path, log_path: Path) -> ScaleRun:
    run = ScaleRun(spec.name, partitions)
    # The previous run's files written back first, so that they do not slow this one.
    os.sync()
    data = work / f"{spec.name}-{partitions}"
    run.file_create_us = round(file_create_us(work / f"probe-{spec.name}-{partitions}"), 1)
    port = free_port()
    broker = BrokerProcess(spec.build_argv(port, data), port, log_path, spec.env)
    try:
        broker.start(START_TIMEOUT_S)
        admin = quiet_admin(broker.bootstrap)
        create_bystander_topic(admin)
        # The bystander warms up (connections, metadata) before the window opens.
        with Bystander(broker.bootstrap) as bystander:
            time.sleep(1.0)
            run.fds_before = _fds(broker)
            bystander.produce.clear()
            bystander.metadata.clear()
            started = time.perf_counter()
            future = admin.create_topics(
                [NewTopic(TOPIC, partitions, 1)],
                request_timeout=TIMEOUT_S,
                operation_timeout=TIMEOUT_S,
            )[TOPIC]
            future.result(TIMEOUT_S)
            run.create_response_s = time.perf_counter() - started
        run.bystander_produce = bystander.produce.summary()
        run.bystander_metadata = bystander.metadata.summary()
        # Ready: Metadata (one request of all the partitions) shows each one led.
        _all_led(admin, partitions, started + TIMEOUT_S)
        run.create_ready_s = time.perf_counter() - started
        run.partitions_per_s = partitions / run.create_ready_s
        run.fds_after = _fds(broker)
        if run.fds_before is not None and run.fds_after is not None:
            run.fds_per_partition = (run.fds_after - run.fds_before) / partitions
        run.rss_mib = rss_mib(broker)
        run.metadata_all_ms = 1000 * _timed_until_ok(lambda: admin.list_topics(timeout=TIMEOUT_S))
        run.list_offsets_all_ms = 1000 * _timed_until_ok(
            lambda: _list_offsets_all(admin, partitions)
        )
        if spec.name == REFERENCE:
            return run  # in memory only: nothing to restart from
        broker.stop(TIMEOUT_S)
        broker, run.restart_listening_s, run.restart_serving_s = _restart(
            spec, port, data, log_path, partitions
        )
        run.rss_after_restart_mib = rss_mib(broker)
        # Then a crash: SIGKILL, and a start that recovers what was not flushed.
        broker.kill()
        broker, run.crash_listening_s, run.crash_serving_s = _restart(
            spec, port, data, log_path, partitions
        )
    except Exception as exc:
        run.error = f"{type(exc).__name__}: {exc}"
    finally:
        broker.stop(TIMEOUT_S)
    return run


def _fmt(value: float | int | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def print_table(runs: list[ScaleRun]) -> None:
    columns: list[tuple[str, Callable[[ScaleRun], str]]] = [
        ("broker", lambda r: r.broker),
        ("partitions", lambda r: f"{r.partitions:,}"),
        ("create s", lambda r: _fmt(r.create_ready_s, 2)),
        ("parts/s", lambda r: _fmt(r.partitions_per_s, 0)),
        ("produce p99 ms", lambda r: _fmt(r.bystander_produce.get("p99_ms"), 0)),
        ("produce max ms", lambda r: _fmt(r.bystander_produce.get("max_ms"), 0)),
        ("metadata p99 ms", lambda r: _fmt(r.bystander_metadata.get("p99_ms"), 0)),
        ("fds/partition", lambda r: _fmt(r.fds_per_partition, 2)),
        ("RSS MiB", lambda r: _fmt(r.rss_mib, 0)),
        ("Metadata ms", lambda r: _fmt(r.metadata_all_ms, 0)),
        ("ListOffsets ms", lambda r: _fmt(r.list_offsets_all_ms, 0)),
        ("restart s", lambda r: _fmt(r.restart_listening_s, 2)),
        ("serving s", lambda r: _fmt(r.restart_serving_s, 2)),
        ("after kill s", lambda r: _fmt(r.crash_listening_s, 2)),
        ("serving s", lambda r: _fmt(r.crash_serving_s, 2)),
        ("create us", lambda r: _fmt(r.file_create_us, 0)),
    ]
    rows = [[get(run) for _, get in columns] for run in runs]
    widths = [max(len(name), *(len(row[i]) for row in rows)) for i, (name, _) in enumerate(columns)]
    print("  ".join(name.rjust(width) for (name, _), width in zip(columns, widths, strict=True)))
    for row in rows:
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
    for run in runs:
        if run.error:
            print(f"{run.broker} at {run.partitions:,} partitions failed: {run.error}")


def print_ratios(runs: list[ScaleRun]) -> None:
    """Brook's figures over each peer's, where both have them (above 1: Brook takes more)."""
    by_key = {(run.broker, run.partitions): run for run in runs}
    for peer in (KAFKA, REFERENCE):
        for run in runs:
            other = by_key.get((peer, run.partitions))
            if run.broker != BROOK or other is None:
                continue
            parts = ratio_parts(
                (label, getattr(run, name), getattr(other, name))
                for label, name in (
                    ("create", "create_ready_s"),
                    ("RSS", "rss_mib"),
                    ("restart", "restart_listening_s"),
                    ("Metadata", "metadata_all_ms"),
                )
            )
            if parts:
                print(f"Brook/{peer} at {run.partitions:,} partitions: {', '.join(parts)}")


def write_chart(runs: list[ScaleRun], path: Path) -> Path:
    from .chart import GrowthPanel, write_growth_chart

    panels = [
        ("create_ready_s", "creating one topic (s)"),
        ("restart_serving_s", "restart to serving all (s)"),
        ("metadata_all_ms", "one Metadata of every partition (ms)"),
        ("rss_mib", "RSS after creation (MiB)"),
    ]
    return write_growth_chart(
        [
            GrowthPanel(
                title,
                "partitions",
                {
                    broker: [
                        (run.partitions, getattr(run, name))
                        for run in runs
                        if run.broker == broker and getattr(run, name) is not None
                    ]
                    for broker in BROKER_NAMES
                },
            )
            for name, title in panels
        ],
        "How cost grows with partitions (one broker, this machine)",
        path,
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser("python -m bench.scale", __doc__)
    # Kafka 4 refuses a topic of 10,000 partitions in one request (10,001 metadata records,
    # over its 10,000 a user operation): 9,000 is the largest point all three can do.
    parser.add_argument(
        "--partitions",
        type=int,
        nargs="+",
        default=[100, 1000, 9000],
        help="partition counts, a round each",
    )
    add_broker_selection(parser, RESULTS_DIR)
    parser.add_argument(
        "--chart-from", type=Path, help="draw the chart of a saved scale.json; measure nothing"
    )
    args = parser.parse_args(argv)
    if args.chart_from is not None:
        saved = [ScaleRun(**run) for run in json.loads(args.chart_from.read_text())]
        args.out.mkdir(parents=True, exist_ok=True)
        print(f"chart: {write_chart(saved, args.out / 'scale.png')}")
        return 0
    names = args.only or list(BROKER_NAMES)
    runs: list[ScaleRun] = []
    args.out.mkdir(parents=True, exist_ok=True)
    # Every round's files are deleted together at the end, not after the round: deleting
    # a round's tens of thousands of files makes creating files slow for minutes on this
    # machine's filesystem (bench.machine.file_create_us), and the next round would pay.
    with tempfile.TemporaryDirectory(prefix="brook-bench-scale-") as tmp:
        for name in names:
            try:
                spec = brook_spec() if name == BROOK else SPECS[name]()
            except Exception as exc:  # a peer that cannot run here is reported, not fatal
                print(f"{name}: cannot start: {exc}", file=sys.stderr)
                continue
            for count in args.partitions:
                print(f"{name}: {count:,} partitions ...", file=sys.stderr, flush=True)
                runs.append(
                    measure(spec, count, Path(tmp), args.out / "logs" / f"scale-{name}.log")
                )
    print_table(runs)
    print_ratios(runs)
    (args.out / "scale.json").write_text(json.dumps([asdict(run) for run in runs], indent=2))
    chart = write_chart(runs, args.out / "scale.png")
    print(f"chart: {chart}")
    return 0 if all(run.error is None for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
