"""Consume throughput of read_committed against read_uncommitted, on the same data.

Starts `brook serve`, writes `--messages` records of `--size` bytes into one partition
with a transactional producer (transactions of `--per-txn` records; every
`--abort-every`-th transaction aborted, 0 for none), then reads the partition from the
start to its end with confluent-kafka under each isolation level, alternating, `--repeat`
times each; reports the median time to the end and the rates. read_committed returns
fewer records when some were aborted, so the time to read the same log is the fair
comparison; records/s counts what the consumer was given.

    python -m bench.read_committed --messages 500000 --abort-every 10
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from bench.cli import bench_parser
from brook.broker.local_ports import free_port

from .brokers import brook_spec
from .kafka_admin import NewTopic
from .procs import BrokerProcess
from .workload import read_partition_to_end

TOPIC = "read-committed-bench"


def write(bootstrap: str, messages: int, size: int, per_txn: int, abort_every: int) -> int:
    """Write the transactions; returns how many records were committed."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "bench",
            "linger.ms": 5,
            "batch.size": 1_000_000,
        }
    )
    producer.init_transactions(30)
    payload = b"x" * size
    committed = 0
    for number, start in enumerate(range(0, messages, per_txn), start=1):
        count = min(per_txn, messages - start)
        producer.begin_transaction()
        for _ in range(count):
            while True:
                try:
                    producer.produce(TOPIC, payload, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        if abort_every and number % abort_every == 0:
            assert producer.flush(60) == 0
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            committed += count
    return committed


def read_to_end(bootstrap: str, level: str) -> tuple[float, int]:
    """Seconds from assign() to the end of the partition, and records received."""
    return read_partition_to_end({"bootstrap.servers": bootstrap, "isolation.level": level}, TOPIC)


def main() -> None:
    parser = bench_parser("python -m bench.read_committed", __doc__)
    parser.add_argument("--messages", type=int, default=300_000, help="records written")
    parser.add_argument("--size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--per-txn", type=int, default=1000, help="records a transaction")
    parser.add_argument(
        "--abort-every",
        type=int,
        default=10,
        help="abort every Nth transaction (0: commit them all)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="reads under each isolation level (the median)"
    )
    args = parser.parse_args()
    spec = brook_spec()
    with tempfile.TemporaryDirectory() as data:
        port = free_port()
        log_path = Path(data) / "broker.log"
        with BrokerProcess(
            spec.build_argv(port, Path(data) / "logs"), port, log_path, spec.env
        ) as b:
            committed = write(b.bootstrap, args.messages, args.size, args.per_txn, args.abort_every)
            times: dict[str, list[float]] = {"read_uncommitted": [], "read_committed": []}
            counts: dict[str, int] = {}
            for _ in range(args.repeat):
                for level in times:
                    elapsed, received = read_to_end(b.bootstrap, level)
                    times[level].append(elapsed)
                    counts[level] = received
    assert counts["read_committed"] == committed, (counts, committed)
    assert counts["read_uncommitted"] == args.messages, counts
    print(
        f"{args.messages} records of {args.size} B, transactions of {args.per_txn},"
        f" every {args.abort_every or 'no'}th aborted; median of {args.repeat}"
    )
    for level, samples in times.items():
        median = statistics.median(samples)
        print(
            f"{level:17s} {median:6.2f} s to the end  {counts[level] / median:10.0f} records/s"
            f"  {args.messages * args.size / median / 1e6:6.1f} MB/s of log"
            f"  (runs: {', '.join(f'{t:.2f}' for t in samples)})"
        )
    ratio = statistics.median(times["read_committed"]) / statistics.median(
        times["read_uncommitted"]
    )
    print(f"read_committed / read_uncommitted time: {ratio:.2f}")


if __name__ == "__main__":
    main()
