"""`python -m bench.scale_cluster`: a topic of thousands of partitions on three brokers.

Brook's three brokers (ZooKeeper mode, bench.replication.Cluster) and then a three-node
Apache Kafka 4 cluster in KRaft mode (bench.apache_kafka.KafkaCluster), one after the
other on the same machine. For each count of `--partitions`:

1. one CreateTopics of N partitions, replicated 3 times (min.insync.replicas 2), while a
   bystander produces one record with acks=all every 100 ms to a topic of its own; the
   time until the request is answered and until every partition has a leader and all
   three replicas in its ISR (Metadata); then each broker's CPU over 10 s with only the
   bystander writing (what keeping the topic costs when nothing happens);
2. a controlled shutdown of one broker (SIGTERM; not the controller): the time until the
   controller's Metadata shows it leading none of the topic's partitions (polled every
   0.2 s), the time until its process exits, and how many partitions it still leads after
   (none, when every one was handed over);
3. the bystander's latencies over each (p50, p99, worst) and how many records failed,
   and each live broker's RSS after.

Kafka 4 refuses more than 10,000 partitions in one request, so 9,000 is the largest
count both take. Long: about 4 minutes for Brook at 9,000 on 2 cores.

    python -m bench.scale_cluster                           # 1,000 and 9,000
    python -m bench.scale_cluster --partitions 2000 --skip-kafka
"""

from __future__ import annotations

import functools
import json
import os
import signal
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil  # type: ignore[import-untyped]  # psutil ships no types (types-psutil is no dependency)
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from bench.cli import bench_parser

from .apache_kafka import KafkaCluster, kafka_version
from .kafka_admin import NewTopic
from .machine import file_create_us
from .replication import Cluster
from .report import ratio_parts

TOPIC = "big"
BYSTANDER = "bystander"
TIMEOUT_S = 900.0
PROBE_INTERVAL_S = 0.1
# The idle cost: measured over IDLE_S, once IDLE_SETTLE_S have passed after the topic was
# whole (followers' first rounds of nothing, the last ISR changes).
IDLE_SETTLE_S = 5.0
IDLE_S = 10.0


class ThreeBrokers(Protocol):
    @property
    def bootstrap(self) -> str: ...

    def pids(self) -> dict[int, int]: ...

    def controller(self) -> int: ...

    def address(self, broker_id: int) -> str: ...


class BrookBrokers:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def pids(self) -> dict[int, int]:
        return {i: b.pid for i, b in self.cluster.brokers.items() if b.pid and b.alive()}

    def controller(self) -> int:
        return self.cluster.active_controller()

    def address(self, broker_id: int) -> str:
        return f"127.0.0.1:{self.cluster.ports[broker_id]}"


class KafkaBrokers:
    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def pids(self) -> dict[int, int]:
        return {
            i: node.pid
            for i, node in self.cluster.nodes.items()
            if node.pid and node.process is not None and node.process.poll() is None
        }

    def controller(self) -> int:
        return self.cluster.active_controller()

    def address(self, broker_id: int) -> str:
        return self.cluster.nodes[broker_id].bootstrap


@dataclass
class Round:
    system: str
    partitions: int
    answered_s: float
    ready_s: float
    # From the SIGTERM until the controller shows the stopping broker leading none of the
    # topic's partitions (None: it still led some when it exited), then until it exited.
    leaders_moved_s: float | None
    shutdown_s: float
    still_led_by_stopped: int
    probes: int
    probe_failures: int
    # The bystander's latencies (p50, p99, worst, ms) while the topic is made and until
    # every partition is led with a full ISR, then over the controlled shutdown.
    creation_probe_ms: tuple[float, float, float]
    shutdown_probe_ms: tuple[float, float, float]
    rss_mib: dict[int, float]
    # Each broker's CPU seconds over IDLE_S once every partition is led with a full ISR,
    # with only the bystander writing: what keeping the topic costs when nothing happens.
    idle_cpu_s: dict[int, float]
    # How long creating one file took on the data dirs' filesystem just before the
    # CreateTopics (bench.machine.file_create_us): creation's time depends on it.
    file_create_us: float


class Bystander:
    """One record with acks=all every PROBE_INTERVAL_S, each one's latency kept."""

    def __init__(self, bootstrap: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        # (when sent, latency), seconds of time.perf_counter.
        self.latencies: list[tuple[float, float]] = []
        self.failures = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.perf_counter()
            outcome: list[KafkaError | None] = []
            self.producer.produce(
                BYSTANDER, b"x", on_delivery=functools.partial(_delivered, outcome)
            )
            while not outcome and not self._stop.is_set():
                self.producer.poll(0.01)
            if outcome:
                self.latencies.append((sent, time.perf_counter() - sent))
                self.failures += outcome[0] is not None
            time.sleep(PROBE_INTERVAL_S)

    @contextmanager
    def running(self) -> Iterator[Bystander]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join()
            self.producer.flush(10)


def _delivered(outcome: list[KafkaError | None], error: KafkaError | None, _: Message) -> None:
    outcome.append(error)


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} after {TIMEOUT_S:.0f} s")
        time.sleep(1.0)


def _topic(admin: AdminClient, name: str) -> Any:
    return admin.list_topics(name, timeout=120).topics[name]


class LeadersMoved:
    """When the controller's Metadata first shows `stopped` leading none of TOPIC's
    partitions: asked of the controller alone (the stopping broker answers from its own
    view), every 0.2 s from start() until stop()."""

    def __init__(self, controller_address: str, stopped: int) -> None:
        self._admin = AdminClient({"bootstrap.servers": controller_address})
        self._stopped = stopped
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.started = 0.0
        self.seconds: float | None = None

    def start(self) -> None:
        self.started = time.perf_counter()
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            try:
                led = list(_topic(self._admin, TOPIC).partitions.values())
            except KafkaException:  # a busy controller's timeout: ask again
                led = None
            if led is not None and all(p.leader != self._stopped for p in led):
                self.seconds = time.perf_counter() - self.started
                return
            self._done.wait(0.2)

    def stop(self) -> float | None:
        self._done.set()
        self._thread.join()
        return self.seconds


def measure(
    system: str,
    brokers: ThreeBrokers,
    partitions: int,
    stop: Callable[[int], None],
    probe_dir: Path,
) -> Round:
    # socket.timeout.ms at its most: the request is answered once the topic is made.
    admin = AdminClient({"bootstrap.servers": brokers.bootstrap, "socket.timeout.ms": 300000})
    admin.create_topics([NewTopic(BYSTANDER, 1, 3)])[BYSTANDER].result(120)

    def bystander_ready() -> bool:
        # Kafka's KRaft brokers may list the new topic a moment before its partition.
        found = _topic(admin, BYSTANDER).partitions
        return 0 in found and len(found[0].isrs) == 3

    _wait(bystander_ready, "bystander ISR")
    bystander = Bystander(brokers.bootstrap)
    create_us = file_create_us(probe_dir)
    with bystander.running():
        started = time.perf_counter()
        created = admin.create_topics(
            [NewTopic(TOPIC, partitions, 3, config={"min.insync.replicas": "2"})],
            request_timeout=TIMEOUT_S,
            operation_timeout=TIMEOUT_S,
        )[TOPIC]
        created.result(TIMEOUT_S)
        answered = time.perf_counter() - started

        def ready() -> bool:
            found = _topic(admin, TOPIC).partitions
            return len(found) == partitions and all(
                p.leader >= 0 and len(p.isrs) == 3 for p in found.values()
            )

        _wait(ready, "leader and full ISR for every partition")
        ready_s = time.perf_counter() - started
        print(
            f"  {system} {partitions:,}: answered in {answered:.1f} s,"
            f" every partition led with a full ISR in {ready_s:.1f} s"
            f" (a file took {create_us:.0f} us to create just before)",
            flush=True,
        )
        idle_cpu = _idle_cpu(brokers.pids())
        print(
            f"  {system} {partitions:,}: CPU s over {IDLE_S:.0f} s with only the bystander"
            f" writing: {', '.join(f'{value:.2f}' for value in idle_cpu.values())}",
            flush=True,
        )
        controller = brokers.controller()
        stopped = next(i for i in sorted(brokers.pids()) if i != controller)
        moved = LeadersMoved(brokers.address(controller), stopped)
        stopping = time.perf_counter()
        moved.start()
        stop(stopped)
        shutdown_s = time.perf_counter() - stopping
        leaders_moved_s = moved.stop()
        still_led = sum(1 for p in _topic(admin, TOPIC).partitions.values() if p.leader == stopped)
        print(
            f"  {system} {partitions:,}: broker {stopped} led none of the topic's partitions"
            f" after {_seconds(leaders_moved_s)}, stopped in {shutdown_s:.1f} s,"
            f" {still_led} partitions still led by it",
            flush=True,
        )
    rss = {i: psutil.Process(pid).memory_info().rss / 2**20 for i, pid in brokers.pids().items()}
    return Round(
        system,
        partitions,
        round(answered, 2),
        round(ready_s, 2),
        None if leaders_moved_s is None else round(leaders_moved_s, 2),
        round(shutdown_s, 2),
        still_led,
        len(bystander.latencies),
        bystander.failures,
        _percentiles([lat for sent, lat in bystander.latencies if sent < stopping]),
        _percentiles([lat for sent, lat in bystander.latencies if sent >= stopping]),
        {i: round(value, 1) for i, value in rss.items()},
        idle_cpu,
        round(create_us, 1),
    )


def _idle_cpu(pids: dict[int, int]) -> dict[int, float]:
    """Each broker's CPU seconds (user and system) over IDLE_S, after IDLE_SETTLE_S."""
    time.sleep(IDLE_SETTLE_S)
    processes = {i: psutil.Process(pid) for i, pid in sorted(pids.items())}
    before = {i: sum(p.cpu_times()[:2]) for i, p in processes.items()}
    time.sleep(IDLE_S)
    return {i: round(sum(p.cpu_times()[:2]) - before[i], 2) for i, p in processes.items()}


def _percentiles(latencies: list[float]) -> tuple[float, float, float]:
    """p50, p99 and worst, in ms."""
    ordered = sorted(latencies) or [0.0]
    return (
        round(statistics.median(ordered) * 1000, 1),
        round(ordered[int(len(ordered) * 0.99)] * 1000, 1),
        round(ordered[-1] * 1000, 1),
    )


def brook_round(root: Path, partitions: int) -> Round:
    with Cluster(root, 3, None) as cluster:

        def stop(broker_id: int) -> None:
            broker = cluster.brokers[broker_id]
            assert broker.pid is not None
            os.kill(broker.pid, signal.SIGTERM)
            _wait(lambda: not broker.alive(), f"exit of broker {broker_id}")

        return measure("Brook", BrookBrokers(cluster), partitions, stop, root / "create-probe")


def kafka_round(root: Path, partitions: int) -> Round:
    with KafkaCluster(root) as cluster:

        def stop(node_id: int) -> None:
            cluster.nodes[node_id].stop()

        return measure(
            f"Kafka {kafka_version()}",
            KafkaBrokers(cluster),
            partitions,
            stop,
            root / "create-probe",
        )


def main() -> None:
    parser = bench_parser("python -m bench.scale_cluster", __doc__)
    parser.add_argument(
        "--partitions",
        type=int,
        nargs="+",
        default=[1000, 9000],
        help="partition counts (each replicated to all three brokers), a round each",
    )
    parser.add_argument(
        "--skip-kafka",
        action="store_true",
        help="leave Apache Kafka's cluster out (it needs Java and Kafka's jars)",
    )
    parser.add_argument("--json", type=Path, help="write the rounds to this file")
    parser.add_argument(
        "--chart", type=Path, help="draw how the costs grow with the partitions into this PNG"
    )
    parser.add_argument(
        "--chart-from",
        type=Path,
        nargs="+",
        help="draw --chart from saved --json files (rounds of several runs); measure nothing",
    )
    args = parser.parse_args()
    if args.chart_from:
        if args.chart is None:
            parser.error("--chart-from needs --chart")
        saved = [
            Round(**_round_fields(fields))
            for path in args.chart_from
            for fields in json.loads(path.read_text())
        ]
        print_table(saved)
        print_ratios(saved)
        print(f"chart: {write_chart(saved, args.chart)}")
        return
    rounds: list[Round] = []
    # Every round's files are deleted together at the end, not after the round: deleting
    # a round's tens of thousands of files makes creating files slow for minutes on this
    # machine's filesystem (bench.machine.file_create_us), and the next round, Kafka's or
    # Brook's, would pay for it.
    with tempfile.TemporaryDirectory(prefix="brook-scale-cluster-") as directory:
        root = Path(directory)
        for partitions in args.partitions:
            # The previous round's files written back first: a broker's syncfs(2) of the
            # new logs would otherwise wait for them (Brook made 3,000 x3 in 9.5 s right
            # after Kafka's round, in 4.1 s on its own).
            os.sync()
            rounds.append(brook_round(root / f"brook-{partitions}", partitions))
            if not args.skip_kafka:
                os.sync()
                rounds.append(kafka_round(root / f"kafka-{partitions}", partitions))
    print_table(rounds)
    print_ratios(rounds)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rounds], indent=2) + "\n")
    if args.chart is not None:
        print(f"chart: {write_chart(rounds, args.chart)}")


def print_table(rounds: list[Round]) -> None:
    print(
        f"{'system':12} {'partitions':>10} {'answered s':>10} {'ready s':>8} {'moved s':>8}"
        f" {'shutdown s':>10}"
        f" {'still led':>9} {'creating: probe p50/p99/worst':>30}"
        f" {'shutdown: probe p50/p99/worst':>30} {'failed':>6} {'create us':>9}"
        f" {'idle CPU s':>16}  RSS MiB"
    )
    for r in rounds:
        rss = ", ".join(f"{value:.0f}" for value in r.rss_mib.values())
        idle = ", ".join(f"{value:.1f}" for value in r.idle_cpu_s.values())
        print(
            f"{r.system:12} {r.partitions:>10,} {r.answered_s:>10.1f} {r.ready_s:>8.1f}"
            f" {_seconds(r.leaders_moved_s):>8} {r.shutdown_s:>10.1f} {r.still_led_by_stopped:>9}"
            f" {_ms(r.creation_probe_ms):>30} {_ms(r.shutdown_probe_ms):>30}"
            f" {r.probe_failures:>6} {r.file_create_us:>9.0f} {idle:>16}  {rss}"
        )


def _is_brook(r: Round) -> bool:
    return r.system.startswith("Brook")


def _mean_idle_cpu(r: Round) -> float:
    """A broker's CPU seconds over the idle window, the mean of the three."""
    return statistics.mean(r.idle_cpu_s.values())


def _mean_rss(r: Round) -> float:
    """A live broker's RSS after the shutdown, the mean of the two."""
    return statistics.mean(r.rss_mib.values())


def print_ratios(rounds: list[Round]) -> None:
    """Brook's figures over Kafka's at each partition count both ran (above 1: Brook
    takes more)."""
    kafka = {r.partitions: r for r in rounds if not _is_brook(r)}
    figures: list[tuple[str, Callable[[Round], float | None]]] = [
        ("whole", lambda r: r.ready_s),
        ("leaders moved", lambda r: r.leaders_moved_s),
        ("shutdown", lambda r: r.shutdown_s),
        ("idle CPU", _mean_idle_cpu),
        ("RSS", _mean_rss),
    ]
    for brook in rounds:
        other = kafka.get(brook.partitions)
        if not _is_brook(brook) or other is None:
            continue
        parts = ratio_parts((label, value(brook), value(other)) for label, value in figures)
        print(f"Brook/{other.system} at {brook.partitions:,} partitions x3: {', '.join(parts)}")


def _round_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A saved round's fields as Round takes them (JSON made the tuples lists and the
    broker ids strings)."""
    restored = dict(fields)
    for name in ("creation_probe_ms", "shutdown_probe_ms"):
        restored[name] = tuple(restored[name])
    for name in ("rss_mib", "idle_cpu_s"):
        restored[name] = {int(key): value for key, value in restored[name].items()}
    return restored


def write_chart(rounds: list[Round], path: Path) -> Path:
    """Creation, the controlled shutdown's handover, idle CPU and RSS against the topic's
    partitions, one line per system."""
    from .brokers import BROOK, KAFKA
    from .chart import GrowthPanel, write_growth_chart

    def line(name: str, value: Callable[[Round], float | None]) -> list[tuple[float, float]]:
        points = []
        for r in rounds:
            y = value(r)
            if (BROOK if _is_brook(r) else KAFKA) == name and y is not None:
                points.append((float(r.partitions), y))
        return points

    panels: list[tuple[str, Callable[[Round], float | None]]] = [
        ("a topic made, every partition led with a full ISR (s)", lambda r: r.ready_s),
        ("controlled shutdown: its leaders moved (s)", lambda r: r.leaders_moved_s),
        ("CPU s of a broker over 10 s, idle", _mean_idle_cpu),
        ("RSS of a broker after (MiB)", _mean_rss),
    ]
    return write_growth_chart(
        [
            GrowthPanel(
                title, "partitions x3", {name: line(name, value) for name in (BROOK, KAFKA)}
            )
            for title, value in panels
        ],
        "How a three-broker cluster's cost grows with a topic's partitions (this machine)",
        path,
    )


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def _ms(percentiles: tuple[float, float, float]) -> str:
    return " / ".join(f"{value:,.0f}" for value in percentiles)


if __name__ == "__main__":
    main()
