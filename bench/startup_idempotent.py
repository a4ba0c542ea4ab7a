"""Start-up time of a broker holding idempotent producers' data.

Builds a data dir of about `--gigabytes` GB in `--partitions` partitions (one
idempotent producer per partition, batches of 16 records of 256 bytes, written through
the storage API), then times, over `--runs` starts of `brook serve` on it:

- until the port answers an ApiVersions request;
- until one Produce request carrying an idempotent batch (a new producer id, sequence 0)
  for every partition has succeeded: each partition's producer state must be loaded by
  then (from a snapshot and the batches after it, or from the whole log).

Each start ends with a clean stop (SIGTERM), or with `--kill` a SIGKILL after the
recovery point checkpoint has been written. `--brook-path DIR` runs the broker from
another source tree (a directory holding a `brook` package, e.g. an older commit
exported with `git archive`), so that before and after are measured on the same data.
`--drop-snapshots` deletes the `.snapshot` files before each start.

    python -m bench.startup_idempotent --data /tmp/startup-data
"""

from __future__ import annotations

import argparse
import datetime
import os
import signal
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

import crc32c
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v3 import request as api_versions3
from kio.schema.init_producer_id.v4 import request as init4
from kio.schema.produce.v9 import request as produce9
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from bench.cli import bench_parser
from brook.broker.client import BlockingClient
from brook.broker.testing import broker_overrides, free_port
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig

from .kafka_admin import NewTopic

TOPIC = "startup"
RECORDS_PER_BATCH = 16
VALUE_SIZE = 256
SEQUENCE_AT = 53  # base sequence in a v2 batch header
CRC_AT, CRC_FROM = 17, 21


def serve(
    data: Path, port: int, brook_path: str | None, log_file: Path, segment_bytes: int
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "brook.broker.cli", "serve"]
    overrides = broker_overrides(port, data, {"log.segment.bytes": segment_bytes})
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BROOK_")}
    if brook_path:
        env["PYTHONPATH"] = brook_path
    with open(log_file, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)


def answers(port: int, process: subprocess.Popen[bytes]) -> None:
    """Wait until the broker answers ApiVersions."""
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode}")
        try:
            with BlockingClient("127.0.0.1", port, timeout=60) as client:
                client.request(
                    api_versions3.ApiVersionsRequest(
                        client_software_name="bench", client_software_version="1"
                    )
                )
                return
        except OSError:
            time.sleep(0.005)


def produce_everywhere(port: int, partitions: int) -> None:
    with BlockingClient("127.0.0.1", port, timeout=600) as client:
        init = client.request(
            init4.InitProducerIdRequest(
                transactional_id=None,
                transaction_timeout=i32Timedelta.parse(datetime.timedelta(seconds=60)),
                producer_id=ProducerId(-1),
                producer_epoch=i16(-1),
            )
        )
        batch = build_batch(
            [Record(0, int(time.time() * 1000), None, b"probe")],
            producer_id=init.producer_id,
            producer_epoch=init.producer_epoch,
            base_sequence=0,
        )
        response = client.request(
            produce9.ProduceRequest(
                transactional_id=None,
                acks=i16(1),
                timeout=i32Timedelta.parse(datetime.timedelta(seconds=600)),
                topic_data=(
                    produce9.TopicProduceData(
                        name=TopicName(TOPIC),
                        partition_data=tuple(
                            produce9.PartitionProduceData(index=i32(i), records=Records(batch))
                            for i in range(partitions)
                        ),
                    ),
                ),
            )
        )
    errors = [
        p.error_code
        for t in response.responses
        for p in t.partition_responses
        if p.error_code.value != 0
    ]
    if errors:
        raise RuntimeError(f"produce failed: {errors[:3]}")


def build(
    data: Path, partitions: int, gigabytes: float, log_file: Path, segment_bytes: int
) -> None:
    """Create the topic with a broker, stop it, then fill the logs directly."""
    port = free_port()
    process = serve(data, port, None, log_file, segment_bytes)
    try:
        answers(port, process)
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(60)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(120)
    per_partition = int(gigabytes * 1e9 / partitions)
    now = int(time.time() * 1000)
    template = bytearray(
        build_batch(
            [Record(i, now, None, b"v" * VALUE_SIZE) for i in range(RECORDS_PER_BATCH)],
            producer_id=0,
            producer_epoch=0,
            base_sequence=0,
        )
    )
    for p in range(partitions):
        log = Log.open(data / f"{TOPIC}-{p}", LogConfig(segment_bytes=segment_bytes))
        batch = bytearray(template)
        struct.pack_into(">q", batch, 43, 10**12 + p)  # far from the ids the broker hands out
        sequence = 0
        while log.size_in_bytes < per_partition:
            # Many batches per append: one producer's consecutive batches, as a
            # producer with several requests in flight sends them.
            chunk = bytearray()
            for _ in range(64):
                struct.pack_into(">i", batch, SEQUENCE_AT, sequence)
                struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(batch[CRC_FROM:]))
                chunk += batch
                sequence += RECORDS_PER_BATCH
            log.append_as_leader(chunk, 0, now)
        log.close()
        print(f"  partition {p}: {log.size_in_bytes / 1e6:.1f} MB, {sequence} records", flush=True)


def wait_for_checkpoint(data: Path, partitions: int) -> None:
    """Until the recovery-point checkpoint names every partition (the broker's own record
    of what is on disk), so that a SIGKILL leaves the same recovery work each time."""
    path = data / "recovery-point-offset-checkpoint"
    while True:
        try:
            lines = path.read_text().splitlines()
            if int(lines[1]) >= partitions:
                return
        except (OSError, IndexError, ValueError):
            pass
        time.sleep(0.2)


def run(args: argparse.Namespace) -> None:
    data: Path = args.data
    log_file = data.parent / f"{data.name}-broker.log"
    if not (data / f"{TOPIC}-0").exists():
        print(f"Building {args.gigabytes} GB in {args.partitions} partitions in {data}")
        build(data, args.partitions, args.gigabytes, log_file, args.segment_bytes)
    port_times, produce_times = [], []
    for run_number in range(args.runs):
        if args.drop_snapshots:
            for snapshot in data.glob("*/*.snapshot"):
                snapshot.unlink()
        port = free_port()
        started = time.monotonic()
        process = serve(data, port, args.brook_path, log_file, args.segment_bytes)
        try:
            answers(port, process)
            port_time = time.monotonic() - started
            produce_everywhere(port, args.partitions)
            produce_time = time.monotonic() - started
            if args.kill:
                wait_for_checkpoint(data, args.partitions)
        finally:
            process.send_signal(signal.SIGKILL if args.kill else signal.SIGTERM)
            process.wait(300)
        port_times.append(port_time)
        produce_times.append(produce_time)
        print(
            f"  start {run_number + 1}: port answers after {port_time:.2f} s, an idempotent"
            f" produce to every partition succeeded after {produce_time:.2f} s",
            flush=True,
        )
    print(
        f"median of {args.runs}: port {statistics.median(port_times):.2f} s,"
        f" idempotent produce to all {args.partitions} partitions"
        f" {statistics.median(produce_times):.2f} s"
    )


def main() -> None:
    parser = bench_parser("python -m bench.startup_idempotent", __doc__)
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="the data dir, built there when missing and kept for the next run",
    )
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the data dir")
    parser.add_argument("--gigabytes", type=float, default=1.0, help="GB of data over them")
    # Small enough that every partition rolls a few times (and has snapshots to start from).
    parser.add_argument(
        "--segment-bytes", type=int, default=2 * 1024 * 1024, help="where a segment rolls"
    )
    parser.add_argument("--runs", type=int, default=3, help="starts of the broker to time")
    parser.add_argument(
        "--brook-path",
        default=None,
        metavar="DIR",
        help="run the broker from this source tree (a directory holding a brook package)",
    )
    parser.add_argument(
        "--drop-snapshots",
        action="store_true",
        help="delete the producer-state .snapshot files before each start",
    )
    parser.add_argument(
        "--kill",
        action="store_true",
        help="end each start with SIGKILL once the recovery point is checkpointed, not SIGTERM",
    )
    run(parser.parse_args())


if __name__ == "__main__":
    main()
