"""`python -m bench.replication`: what replication costs and how fast it fails over.
Brook against itself (the reference broker does not replicate), and its failover against
Apache Kafka's.

1. Replicated produce: `--messages` x 100 B at acks=all to one partition, on a single
   broker (no ZooKeeper), then on three brokers with ZooKeeper, the topic replicated 3
   times with min.insync.replicas=2. The median of `--repeat` rounds each; the ratio is
   three brokers against one. While the three-broker rounds run, the followers' lag behind
   the leader is sampled every 100 ms from the replicas' segment files (bytes the follower
   has still to copy; the brokers expose no metric for it yet): median and maximum.
2. Failover: an idempotent producer sends at `--rate` msgs/s (acks=all) to a partition
   replicated 3 times (min.insync.replicas=2) whose replicas list the active controller
   last, so that its leader is not the controller; the partition's leader is SIGKILLed and
   the time from the kill to the first write acknowledged after it (necessarily by the new
   leader) is taken; the killed broker is started again and the round ends once it is back
   in the ISR. Median and maximum over `--rounds`, on Brook's three brokers, then on three
   Apache Kafka 4 nodes in KRaft mode (each a broker and a controller; `--skip-kafka`
   leaves them out), side by side with their ratio. Each controller learns of the death
   its own way, with its defaults unless told otherwise: Brook's when the broker's
   ZooKeeper session expires (zookeeper.session.timeout.ms, 18000:
   `--session-timeout-ms`), Kafka's when the broker has sent no heartbeat for
   broker.session.timeout.ms (9000: `--kafka-session-timeout-ms`). Each bounds its
   failover from below and is printed beside it, as the broker reports it.

    python -m bench.replication                     # about 7 minutes on 2 cores
    python -m bench.replication --messages 100000 --rounds 3
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message, Producer

# confluent_kafka.admin re-exports ConfigResource without __all__ (see bench/kafka_admin.py).
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from bench.cli import bench_parser
from brook.broker.local_ports import free_port
from brook.broker.zookeeper.server import ZooKeeperServer

from .apache_kafka import KafkaCluster, kafka_version
from .brokers import brook_command, compile_brook_bytecode
from .kafka_admin import NewTopic
from .procs import BrokerProcess
from .workload import produce_throughput

TOPIC = "replicated"
TIMEOUT_S = 300.0
MIB = 1024 * 1024
# Each of the three Kafka JVMs: a small heap (the bench's machine has 2 cores), with the
# collector of Kafka's scripts (G1).
KAFKA_HEAP = "512m"
# ZooKeeper's tick as its sample zoo.cfg (and Debian's) sets it. ZooKeeper grants sessions
# of 2 to 20 ticks: ZooKeeperServer's 500 ms tick for tests would cut Brook's 18 s default
# session to 10 s, and with it the failover measured.
ZOOKEEPER_TICK_MS = 2000


class Cluster:
    """ZooKeeper and `count` brokers (ids 1..count), each on a port of its own; stopped,
    by pid, when the block ends."""

    def __init__(self, root: Path, count: int, session_timeout_ms: int | None) -> None:
        self.root = root
        self.count = count
        self.session_timeout_ms = session_timeout_ms
        self.zookeeper = ZooKeeperServer(root / "zookeeper", tick_ms=_tick_for(session_timeout_ms))
        self.ports = {broker_id: free_port() for broker_id in range(1, count + 1)}
        self.brokers: dict[int, BrokerProcess] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports.values())

    def data_dir(self, broker_id: int) -> Path:
        return self.root / f"broker-{broker_id}"

    def start_broker(self, broker_id: int) -> BrokerProcess:
        port = self.ports[broker_id]
        overrides = {
            "broker.id": broker_id,
            "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": str(self.data_dir(broker_id)),
            "zookeeper.connect": self.zookeeper.connect + "/bench",
            "offsets.topic.replication.factor": min(3, self.count),
            "transaction.state.log.replication.factor": min(3, self.count),
        }
        if self.session_timeout_ms is not None:  # Brook's default otherwise
            overrides["zookeeper.session.timeout.ms"] = self.session_timeout_ms
        argv = [*brook_command(), "serve"]
        for key, value in overrides.items():
            argv += ["--override", f"{key}={value}"]
        broker = BrokerProcess(argv, port, self.root / f"broker-{broker_id}.log")
        broker.start()
        self.brokers[broker_id] = broker
        return broker

    def kill(self, broker_id: int) -> None:
        self.brokers[broker_id].kill()

    def restart(self, broker_id: int) -> None:
        self.start_broker(broker_id)

    def active_controller(self) -> int:
        # Brook's Metadata names the controller ZooKeeper elected (Kafka's KRaft brokers
        # name a random broker there: KafkaCluster asks the quorum).
        controller: int = _metadata(self.bootstrap).controller_id
        return controller

    def __enter__(self) -> Cluster:
        self.zookeeper.start()
        for broker_id in self.ports:
            self.start_broker(broker_id)
        _wait(lambda: len(_metadata(self.bootstrap).brokers) == self.count, "registrations")
        return self

    def __exit__(self, *exc: object) -> None:
        for broker in self.brokers.values():
            broker.stop()
        self.zookeeper.stop()


def _tick_for(session_timeout_ms: int | None) -> int:
    """ZooKeeper's tick: ZOOKEEPER_TICK_MS, unless the session asked for is outside the 2
    to 20 ticks it allows (ZooKeeper would then grant another than the one asked for)."""
    if session_timeout_ms is None:
        return ZOOKEEPER_TICK_MS
    shortest, longest = math.ceil(session_timeout_ms / 20), session_timeout_ms // 2
    return max(shortest, min(ZOOKEEPER_TICK_MS, longest))


def _metadata(bootstrap: str, topic: str | None = None) -> Any:
    # confluent-kafka types list_topics' ClusterMetadata as Any.
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=15)


def _wait(condition: Callable[[], object], what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(Exception):
            if condition():
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _create(bootstrap: str, topic: str, replicas: int | list[int], min_insync: int) -> None:
    """A one-partition topic, with `replicas` replicas placed by the controller, or on
    those brokers, in that order."""
    placement: dict[str, Any] = (
        {"replication_factor": replicas}
        if isinstance(replicas, int)
        else {"replica_assignment": [replicas]}
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while the creation runs
    futures = admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=1,
                config={"min.insync.replicas": str(min_insync)},
                **placement,
            )
        ],
        operation_timeout=30,
    )
    futures[topic].result(60)


def _broker_setting(bootstrap: str, broker_id: int, name: str) -> str:
    """A broker's value for one of its settings, as it describes it (DescribeConfigs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource("broker", str(broker_id))
    described = admin.describe_configs([resource])[resource].result(30)
    value: str = described[name].value
    return value


def _partition(bootstrap: str, topic: str) -> tuple[int, list[int], list[int]]:
    """(leader, replicas, isr) of partition 0."""
    found = _metadata(bootstrap, topic).topics[topic].partitions[0]
    return found.leader, list(found.replicas), list(found.isrs)


# --- 1. throughput and follower lag ---------------------------------------------------------


def _segment_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("*.log"))


@contextlib.contextmanager
def _lag_sampler(cluster: Cluster, topic: str) -> Iterator[list[int]]:
    """Bytes each follower is behind the leader, every 100 ms, while the block runs."""
    samples: list[int] = []
    stop = threading.Event()
    leader, replicas, _ = _partition(cluster.bootstrap, topic)

    def sample() -> None:
        while not stop.wait(0.1):
            with contextlib.suppress(OSError):
                ahead = _segment_bytes(cluster.data_dir(leader) / f"{topic}-0")
                for follower in replicas:
                    if follower != leader:
                        behind = _segment_bytes(cluster.data_dir(follower) / f"{topic}-0")
                        samples.append(max(ahead - behind, 0))

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join()


def _produce_rounds(bootstrap: str, messages: int, repeat: int) -> float:
    """The median acks=all rate over `repeat` rounds, each to a fresh topic (RF 1)."""
    rates = []
    for round_no in range(repeat):
        topic = f"single-{round_no}"
        _create(bootstrap, topic, 1, 1)
        result = produce_throughput(bootstrap, topic, messages, 100, "all", TIMEOUT_S)
        rates.append(result.msgs_per_s)
    return statistics.median(rates)


# --- 2. failover ------------------------------------------------------------------------------


class _AckClock:
    """An idempotent producer at a steady rate that remembers when each ack came."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        # (when the record was produced, when its ack came), per acknowledged record.
        self.acks: list[tuple[float, float]] = []
        self.failures = 0
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
                "message.timeout.ms": 120_000,
            }
        )
        self._topic = topic
        self._interval = 1 / rate
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, produced_at: float, error: KafkaError | None) -> None:
        if error is None:
            self.acks.append((produced_at, time.monotonic()))
        else:
            self.failures += 1

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            produced_at = time.monotonic()

            def delivered(error: KafkaError | None, _: Message, at: float = produced_at) -> None:
                self._delivered(at, error)

            self._producer.produce(
                self._topic, value=b"%d" % sequence, partition=0, on_delivery=delivered
            )
            sequence += 1
            self._producer.poll(self._interval)
        self._producer.flush(120)

    def __enter__(self) -> _AckClock:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def first_ack_after(self, moment: float, timeout_s: float = 120.0) -> float:
        """When the first record produced after `moment` was acknowledged: after a kill,
        necessarily by the new leader (a record the old leader acknowledged just before
        the kill may have its callback run after it, and must not count)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            later = [acked for produced, acked in list(self.acks) if produced > moment]
            if later:
                return min(later)
            time.sleep(0.005)
        raise RuntimeError("no write was acknowledged after the leader's kill")


class FailoverCluster(Protocol):
    """What the failover rounds do to a cluster, Brook's (Cluster) or Apache Kafka's
    (bench.apache_kafka.KafkaCluster)."""

    @property
    def bootstrap(self) -> str: ...

    def kill(self, broker_id: int) -> None: ...

    def restart(self, broker_id: int) -> None: ...

    def active_controller(self) -> int: ...


@dataclass
class FailoverRound:
    killed: int  # the broker id of the leader killed
    killed_controller: bool  # whether it was also the active controller
    stall_ms: float  # from the kill to the first write acknowledged after it


@dataclass
class Failover:
    """One system's failover rounds, with the setting that bounds them."""

    system: str
    session_setting: str  # e.g. "broker.session.timeout.ms=9000"
    rounds: list[FailoverRound]

    @property
    def median_ms(self) -> float:
        return statistics.median(r.stall_ms for r in self.rounds)

    @property
    def max_ms(self) -> float:
        return max(r.stall_ms for r in self.rounds)


def _create_off_controller(cluster: FailoverCluster, topic: str) -> None:
    """The failover topic, replicated on every broker with the active controller last: a
    leader is elected as the first replica in the ISR, so the leader, and each round's
    victim, is never the controller (whose death would add the controller's own failover
    to the partition's) while the other two brokers are in the ISR."""
    controller = cluster.active_controller()
    brokers = sorted(_metadata(cluster.bootstrap).brokers)
    replicas = [*(b for b in brokers if b != controller), controller]
    _create(cluster.bootstrap, topic, replicas, 2)
    _wait(lambda: _partition(cluster.bootstrap, topic)[0] == replicas[0], "the first leader")


def _failover_rounds(cluster: FailoverCluster, rounds: int, rate: float) -> list[FailoverRound]:
    topic = "failover"
    _create_off_controller(cluster, topic)
    done: list[FailoverRound] = []
    with _AckClock(cluster.bootstrap, topic, rate) as clock:
        _wait(lambda: len(clock.acks) > 10, "the first acks")
        for round_no in range(rounds):
            leader, _, _ = _partition(cluster.bootstrap, topic)
            controller = cluster.active_controller()
            killed_at = time.monotonic()
            cluster.kill(leader)
            first = clock.first_ack_after(killed_at)
            done.append(FailoverRound(leader, leader == controller, (first - killed_at) * 1000))
            role = "also the active controller" if leader == controller else "not the controller"
            print(
                f"  round {round_no + 1}: broker {leader} killed ({role}),"
                f" {done[-1].stall_ms:.0f} ms",
                flush=True,
            )
            cluster.restart(leader)
            _wait(lambda: len(_partition(cluster.bootstrap, topic)[2]) == 3, "the full ISR")
    return done


def _print_failover(failover: Failover) -> None:
    print(
        f"failover to the first acknowledged write: median {failover.median_ms:.0f}"
        f" ms, max {failover.max_ms:.0f} ms",
        flush=True,
    )


def _kafka_failover(
    root: Path, rounds: int, rate: float, session_timeout_ms: int | None
) -> Failover:
    """The failover rounds on three Apache Kafka nodes (KRaft, combined mode)."""
    overrides = {}
    if session_timeout_ms is not None:  # Kafka's default otherwise
        overrides["broker.session.timeout.ms"] = str(session_timeout_ms)
    system = f"Apache Kafka {kafka_version()}"
    print(
        f"{system}, 3 nodes in KRaft mode (each a broker and a controller, -Xmx{KAFKA_HEAP} G1):",
        flush=True,
    )
    with KafkaCluster(root, 3, overrides, heap=KAFKA_HEAP) as cluster:
        setting = "broker.session.timeout.ms"
        session = f"{setting}={_broker_setting(cluster.bootstrap, 1, setting)}"
        print(f"failover (SIGKILL of the leader, {rounds} rounds, {session}):", flush=True)
        failover = Failover(system, session, _failover_rounds(cluster, rounds, rate))
    _print_failover(failover)
    return failover


def _compare(brook: Failover, kafka: Failover) -> None:
    print(
        f"failover, Brook ({brook.session_setting}) against"
        f" {kafka.system} ({kafka.session_setting}):",
        flush=True,
    )
    for what, ours, theirs in (
        ("median", brook.median_ms, kafka.median_ms),
        ("max", brook.max_ms, kafka.max_ms),
    ):
        print(f"  {what}: {ours:.0f} ms against {theirs:.0f} ms, {ours / theirs:.2f}x", flush=True)


def main() -> None:
    parser = bench_parser("python -m bench.replication", __doc__)
    parser.add_argument("--messages", type=int, default=300_000, help="per produce round")
    parser.add_argument("--repeat", type=int, default=3, help="produce rounds (the median)")
    parser.add_argument("--rounds", type=int, default=5, help="failover rounds")
    parser.add_argument("--rate", type=float, default=500.0, help="msgs/s while failing over")
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        help="Brook's zookeeper.session.timeout.ms (none: Brook's default, 18000)",
    )
    parser.add_argument(
        "--kafka-session-timeout-ms",
        type=int,
        help="Apache Kafka's broker.session.timeout.ms (none: Kafka's default, 9000)",
    )
    parser.add_argument(
        "--skip-kafka",
        action="store_true",
        help="leave Apache Kafka's failover out (it needs Java and Kafka's jars)",
    )
    parser.add_argument("--json", type=Path, help="write the failover rounds to this file")
    args = parser.parse_args()
    compile_brook_bytecode()
    with tempfile.TemporaryDirectory(prefix="brook-bench-replication-") as tmp:
        root = Path(tmp)
        single_port = free_port()
        single = BrokerProcess(
            [
                *brook_command(),
                "serve",
                "--override",
                f"listeners=PLAINTEXT://127.0.0.1:{single_port}",
                "--override",
                f"log.dirs={root / 'single'}",
            ],
            single_port,
            root / "single.log",
        )
        with single:
            one = _produce_rounds(single.bootstrap, args.messages, args.repeat)
        print(f"acks=all 100 B, one broker: {one:,.0f} msgs/s", flush=True)
        with Cluster(root / "three", 3, args.session_timeout_ms) as cluster:
            rates, lag = [], []
            for round_no in range(args.repeat):
                topic = f"{TOPIC}-{round_no}"
                _create(cluster.bootstrap, topic, 3, 2)
                with _lag_sampler(cluster, topic) as samples:
                    result = produce_throughput(
                        cluster.bootstrap, topic, args.messages, 100, "all", TIMEOUT_S
                    )
                rates.append(result.msgs_per_s)
                lag += samples
            three = statistics.median(rates)
            print(
                f"acks=all 100 B, three brokers (RF 3, min.insync.replicas 2): {three:,.0f}"
                f" msgs/s, {three / one:.2f}x one broker",
                flush=True,
            )
            if lag:
                print(
                    f"follower lag while producing: median {statistics.median(lag) / 1024:.0f}"
                    f" KiB, max {max(lag) / MIB:.1f} MiB ({len(lag)} samples)",
                    flush=True,
                )
            setting = "zookeeper.session.timeout.ms"
            session = f"{setting}={_broker_setting(cluster.bootstrap, 1, setting)}"
            print(f"failover (SIGKILL of the leader, {args.rounds} rounds, {session}):", flush=True)
            brook = Failover("Brook", session, _failover_rounds(cluster, args.rounds, args.rate))
        _print_failover(brook)
        failovers = [brook]
        if not args.skip_kafka:
            # Once Brook's cluster is stopped: the two do not share the machine's cores.
            kafka = _kafka_failover(
                root / "kafka", args.rounds, args.rate, args.kafka_session_timeout_ms
            )
            _compare(brook, kafka)
            failovers.append(kafka)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "rate_msgs_per_s": args.rate,
                    "failovers": [
                        {**asdict(f), "median_ms": f.median_ms, "max_ms": f.max_ms}
                        for f in failovers
                    ],
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
