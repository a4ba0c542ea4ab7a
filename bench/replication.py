"""`python -m bench.replication`: what replication costs and how fast it fails over.
Brook against itself (the reference broker does not replicate).

1. Replicated produce: `--messages` x 100 B at acks=all to one partition, on a single
   broker (no ZooKeeper), then on three brokers with ZooKeeper, the topic replicated 3
   times with min.insync.replicas=2. The median of `--repeat` rounds each; the ratio is
   three brokers against one. While the three-broker rounds run, the followers' lag behind
   the leader is sampled every 100 ms from the replicas' segment files (bytes the follower
   has still to copy; the brokers expose no metric for it yet): median and maximum.
2. Failover: an idempotent producer sends at `--rate` msgs/s (acks=all) to a partition
   replicated 3 times; the partition's leader is SIGKILLed and the time from the kill to
   the first write acknowledged after it (necessarily by the new leader) is taken; the
   killed broker is started again and the round ends once it is back in the ISR. Median
   and maximum over `--rounds`. The controller learns of the death when the broker's
   ZooKeeper session expires: `--session-timeout-ms` (Kafka's default is 18000) bounds the
   failover from below, and is printed beside it.

    python -m bench.replication                     # about 3 minutes on 2 cores
    python -m bench.replication --messages 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient

from brook.broker.local_ports import free_port
from brook.broker.zookeeper.server import ZooKeeperServer

from .brokers import brook_command, compile_brook_bytecode
from .kafka_admin import NewTopic
from .procs import BrokerProcess
from .workload import produce_throughput

TOPIC = "replicated"
TIMEOUT_S = 300.0
MIB = 1024 * 1024


class Cluster:
    """ZooKeeper and `count` brokers (ids 1..count), each on a port of its own; stopped,
    by pid, when the block ends."""

    def __init__(self, root: Path, count: int, session_timeout_ms: int) -> None:
        self.root = root
        self.count = count
        self.session_timeout_ms = session_timeout_ms
        self.zookeeper = ZooKeeperServer(root / "zookeeper")
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
            "zookeeper.session.timeout.ms": self.session_timeout_ms,
            "offsets.topic.replication.factor": min(3, self.count),
            "transaction.state.log.replication.factor": min(3, self.count),
        }
        argv = [*brook_command(), "serve"]
        for key, value in overrides.items():
            argv += ["--override", f"{key}={value}"]
        broker = BrokerProcess(argv, port, self.root / f"broker-{broker_id}.log")
        broker.start()
        self.brokers[broker_id] = broker
        return broker

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


def _create(bootstrap: str, topic: str, replication_factor: int, min_insync: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept while the creation runs
    futures = admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=1,
                replication_factor=replication_factor,
                config={"min.insync.replicas": str(min_insync)},
            )
        ],
        operation_timeout=30,
    )
    futures[topic].result(60)


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


def _failover_rounds(cluster: Cluster, rounds: int, rate: float) -> list[float]:
    topic = "failover"
    _create(cluster.bootstrap, topic, 3, 2)
    times = []
    with _AckClock(cluster.bootstrap, topic, rate) as clock:
        _wait(lambda: len(clock.acks) > 10, "the first acks")
        for round_no in range(rounds):
            leader, _, _ = _partition(cluster.bootstrap, topic)
            killed_at = time.monotonic()
            cluster.brokers[leader].kill()
            first = clock.first_ack_after(killed_at)
            times.append((first - killed_at) * 1000)
            print(f"  round {round_no + 1}: broker {leader} killed, {times[-1]:.0f} ms", flush=True)
            cluster.start_broker(leader)
            _wait(lambda: len(_partition(cluster.bootstrap, topic)[2]) == 3, "the full ISR")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replication",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--messages", type=int, default=300_000, help="per produce round")
    parser.add_argument("--repeat", type=int, default=3, help="produce rounds (the median)")
    parser.add_argument("--rounds", type=int, default=5, help="failover rounds")
    parser.add_argument("--rate", type=float, default=500.0, help="msgs/s while failing over")
    parser.add_argument("--session-timeout-ms", type=int, default=6000)
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
            print(
                f"failover (SIGKILL of the leader, {args.rounds} rounds,"
                f" zookeeper.session.timeout.ms={args.session_timeout_ms}):",
                flush=True,
            )
            times = _failover_rounds(cluster, args.rounds, args.rate)
            print(
                f"failover to the first acknowledged write: median {statistics.median(times):.0f}"
                f" ms, max {max(times):.0f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
