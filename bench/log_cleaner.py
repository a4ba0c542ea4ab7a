"""`python -m bench.log_cleaner`: the broker's log cleaner, its speed and what it costs
serving while it runs. Brook against itself (there is no cleaner in the reference).

1. Cleaner MB/s, no broker: a compacted log of `--records` records (`--keys` distinct
   keys, values of each `--value-sizes`, 100 records a batch, uncompressed and lz4) is
   built with brook.storage's Log, then one cleaning of it all (storage.log_cleaner's
   plan_cleaning and clean, as the broker's cleaner thread runs them) is timed: MB of log
   a second (the bytes it rewrote, as Kafka's cleaner reports them; the offset map's pass
   over the same bytes is inside the time), records a second, what was kept. Best of
   `--repeat`.
2. Serving while the cleaner runs: `brook serve` on copies of a log dir holding
   `--dirty-mb` of a compacted topic never cleaned, started three times: with the cleaner
   off (the baseline), on (it takes the topic at once), and on with
   log.cleaner.io.max.bytes.per.second at `--throttle-mb`. Each time, `--rounds` rounds:
   a producer sends `--messages` x 100 B to a fresh topic (acks=1) and a consumer reads
   them back; the median round's rates are compared with the baseline's. A run counts only
   if the cleaning was still under way when its last round ended (the cleaner checkpoint
   file says so). On a shared machine the rounds wobble: read the medians.

    python -m bench.log_cleaner                      # about 2 minutes on 2 cores
    python -m bench.log_cleaner --dirty-mb 100 --records 300000   # a quicker run
"""

from __future__ import annotations

import random
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from bench.cli import bench_parser
from brook.broker.local_ports import free_port
from brook.protocol.compression import Codec
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig
from brook.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT_FILE, clean, plan_cleaning

from .brokers import brook_spec
from .kafka_admin import NewTopic
from .procs import BrokerProcess
from .workload import consume_throughput, create_topic, produce_throughput

BASE_TS = 1_700_000_000_000
RECORDS_PER_BATCH = 100
DIRTY_TOPIC = "dirty"
DIRTY_SEGMENT_BYTES = 32 * 1024 * 1024
TIMEOUT_S = 600.0


# --- 1. the cleaner alone ------------------------------------------------------------------


@dataclass(frozen=True)
class CleanerRun:
    codec: str
    value_size: int
    records: int
    log_mb: float
    seconds: float
    kept: int
    map_utilization: float

    @property
    def mb_per_s(self) -> float:
        return self.log_mb / self.seconds

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds


def build_log(directory: Path, records: int, keys: int, value_size: int, codec: int) -> Log:
    config = LogConfig(
        segment_bytes=DIRTY_SEGMENT_BYTES, cleanup_policy=("compact",), file_delete_delay_ms=0
    )
    log = Log.open(directory, config)
    rng = random.Random(7)
    value = bytes(rng.getrandbits(8) for _ in range(value_size))
    for first in range(0, records, RECORDS_PER_BATCH):
        batch = [
            Record(i, BASE_TS + offset, b"key-%08d" % rng.randrange(keys), value)
            for i, offset in enumerate(range(first, min(first + RECORDS_PER_BATCH, records)))
        ]
        log.append_as_leader(build_batch(batch, codec=codec), 0)
    log.roll()
    log.high_watermark = log.log_end_offset
    return log


def time_cleaner(
    work: Path, records: int, keys: int, value_size: int, codec: str, repeat: int
) -> CleanerRun:
    best: CleanerRun | None = None
    for attempt in range(repeat):
        directory = work / f"clean-{codec}-{value_size}-{attempt}" / f"{DIRTY_TOPIC}-0"
        log = build_log(directory, records, keys, value_size, Codec[codec.upper()])
        plan = plan_cleaning(log, None, BASE_TS, force=True)
        assert plan is not None
        started = time.perf_counter()
        result = clean(plan)
        seconds = time.perf_counter() - started
        result.discard()
        log.close()
        shutil.rmtree(directory.parent)
        run = CleanerRun(
            codec,
            value_size,
            result.stats.records_read,
            result.stats.bytes_read / 1e6,
            seconds,
            result.stats.records_kept,
            result.stats.buffer_utilization,
        )
        if best is None or run.seconds < best.seconds:
            best = run
    assert best is not None
    return best


# --- 2. serving while it cleans -------------------------------------------------------------


@dataclass(frozen=True)
class ServingRun:
    name: str
    produce_msgs_per_s: float
    consume_msgs_per_s: float
    cleaning_under_way: bool
    cleaner_line: str


def fill_dirty(data: Path, dirty_mb: int, keys: int, log_path: Path) -> None:
    """A compacted topic written with the cleaner off, then the broker stopped cleanly."""
    spec = brook_spec()
    port = free_port()
    argv = [*spec.build_argv(port, data), "--override", "log.cleaner.enable=false"]
    with BrokerProcess(argv, port, log_path, spec.env) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        config = {"cleanup.policy": "compact", "segment.bytes": str(DIRTY_SEGMENT_BYTES)}
        admin.create_topics([NewTopic(DIRTY_TOPIC, 1, 1, config=config)])[DIRTY_TOPIC].result(30)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "linger.ms": 5,
                "batch.size": 1_000_000,
                "log_level": 0,
            }
        )
        value = b"v" * 100
        rng = random.Random(11)
        for _ in range(dirty_mb * 1_000_000 // (len(value) + 20)):
            while True:
                try:
                    producer.produce(
                        DIRTY_TOPIC, value, key=b"key-%08d" % rng.randrange(keys), partition=0
                    )
                    break
                except BufferError:
                    producer.poll(0.01)
        assert producer.flush(120) == 0
        del producer  # closed before the broker stops: no reconnection noise


def cleaning_done(data: Path) -> bool:
    checkpoint = data / CLEANER_OFFSET_CHECKPOINT_FILE
    return checkpoint.exists() and f"{DIRTY_TOPIC} 0 " in checkpoint.read_text()


def serve_while(
    name: str, dirty: Path, work: Path, overrides: list[str], messages: int, rounds: int
) -> ServingRun:
    data = work / name
    shutil.copytree(dirty, data)
    spec = brook_spec()
    port = free_port()
    log_path = work / f"{name}.log"
    argv = spec.build_argv(port, data)
    for override in overrides:
        argv += ["--override", override]
    produced: list[float] = []
    consumed: list[float] = []
    with BrokerProcess(argv, port, log_path, spec.env) as broker:
        for number in range(rounds):
            topic = f"serve-{name}-{number}"
            create_topic(broker.bootstrap, topic, 1)
            bootstrap = broker.bootstrap
            produce = produce_throughput(bootstrap, topic, messages, 100, "1", TIMEOUT_S)
            consume = consume_throughput(bootstrap, topic, 1, messages, 100, TIMEOUT_S)
            produced.append(produce.msgs_per_s)
            consumed.append(consume.msgs_per_s)
        under_way = not cleaning_done(data)
        line = ""
        if "log.cleaner.enable=false" not in overrides:
            deadline = time.monotonic() + TIMEOUT_S
            while not cleaning_done(data) and time.monotonic() < deadline:
                time.sleep(0.2)
            found = re.findall(r"Cleaned dirty-0 .*", log_path.read_text())
            line = found[0] if found else "(no cleaning logged)"
    shutil.rmtree(data)
    return ServingRun(
        name, statistics.median(produced), statistics.median(consumed), under_way, line
    )


def main() -> None:
    parser = bench_parser("python -m bench.log_cleaner", __doc__)
    parser.add_argument(
        "--records", type=int, default=1_000_000, help="records of the log cleaned without a broker"
    )
    parser.add_argument("--keys", type=int, default=10_000, help="distinct keys among them")
    parser.add_argument(
        "--value-sizes",
        type=int,
        nargs="+",
        default=[100, 1000],
        help="value bytes; each size is a log of its own",
    )
    parser.add_argument("--repeat", type=int, default=2, help="cleanings of each log (the best)")
    parser.add_argument(
        "--dirty-mb",
        type=int,
        default=300,
        help="MB of never-cleaned compacted topic the serving broker starts with",
    )
    parser.add_argument(
        "--dirty-keys", type=int, default=100_000, help="distinct keys in that topic"
    )
    parser.add_argument(
        "--messages", type=int, default=500_000, help="100 B records produced and consumed a round"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="produce and consume rounds per start (the median)"
    )
    parser.add_argument(
        "--throttle-mb",
        type=float,
        default=5.0,
        help="log.cleaner.io.max.bytes.per.second of the throttled start, in MB",
    )
    parser.add_argument(
        "--skip-serving",
        action="store_true",
        help="time the cleaner alone, not the broker serving while it cleans",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="brook-bench-cleaner-") as tmp:
        work = Path(tmp)
        print("1. The cleaner alone (one cleaning of the whole log, best of --repeat)")
        print(
            f"{'codec':6s} {'value':>6s} {'records':>9s} {'log MB':>8s} {'s':>6s}"
            f" {'MB/s':>6s} {'records/s':>10s} {'kept':>7s}"
        )
        for size in args.value_sizes:
            records = args.records if size <= 100 else args.records // 5
            for codec in ("none", "lz4"):
                run = time_cleaner(work, records, args.keys, size, codec, args.repeat)
                print(
                    f"{run.codec:6s} {run.value_size:6d} {run.records:9d} {run.log_mb:8.1f}"
                    f" {run.seconds:6.2f} {run.mb_per_s:6.1f} {run.records_per_s:10.0f}"
                    f" {run.kept:7d}"
                )
        if args.skip_serving:
            return
        print(
            f"\n2. Serving while the cleaner runs ({args.dirty_mb} MB dirty, {args.messages} x"
            f" 100 B produced with acks=1, then consumed; median of {args.rounds} rounds)"
        )
        dirty = work / "dirty"
        fill_dirty(dirty, args.dirty_mb, args.dirty_keys, work / "fill.log")
        throttle = f"log.cleaner.io.max.bytes.per.second={args.throttle_mb * 1e6}"
        runs = [
            serve_while(name, dirty, work, overrides, args.messages, args.rounds)
            for name, overrides in (
                ("off", ["log.cleaner.enable=false"]),
                ("on", []),
                ("throttled", [throttle]),
            )
        ]
        base = runs[0]
        for serving in runs:
            print(
                f"cleaner {serving.name:9s} produce {serving.produce_msgs_per_s:9.0f} msgs/s"
                f" ({serving.produce_msgs_per_s / base.produce_msgs_per_s:4.2f}x)"
                f"  consume {serving.consume_msgs_per_s:9.0f} msgs/s"
                f" ({serving.consume_msgs_per_s / base.consume_msgs_per_s:4.2f}x)"
                + ("" if serving is base else f"  cleaning under way: {serving.cleaning_under_way}")
            )
            if serving.cleaner_line:
                print(f"    {serving.cleaner_line}")


if __name__ == "__main__":
    main()
