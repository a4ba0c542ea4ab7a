"""`python -m bench.audit`: the wall time of `brook audit` on a few million records.

Builds a log dir through the broker's storage (brook.storage.Log, as a broker appends
as leader: offsets, indexes, snapshots at each roll, the leader-epoch checkpoint): by
default 3,000,000 records of 100 B in 4 partitions, 100 records a batch, one idempotent
producer per partition, keys drawn from 10,000, timestamps rising 1 ms a record.
Then runs `brook audit DIR --out REPORT` (local[*], a fresh Spark session: its start
is part of the time) `--repeat` times and prints the wall time of each run, its stage
times (from the audit's progress lines) and the records audited per second. The data is
kept in `--data` for the next run (it is rebuilt only when missing).

    python -m bench.audit --data /tmp/audit-bench
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import crc32c

from bench.cli import bench_parser
from brook.protocol.record_batch import Record, build_batch
from brook.storage import Log, LogConfig

TOPIC = "audit-bench"
RECORDS_PER_BATCH = 100
KEYS = 10_000
BASE_TIMESTAMP = 1_700_000_000_000
SEGMENT_BYTES = 32 * 1024 * 1024
# Where a v2 batch header keeps what each copy of a template batch changes.
CRC_AT, CRC_FROM = 17, 21
BASE_TIMESTAMP_AT, MAX_TIMESTAMP_AT = 27, 35
PRODUCER_ID_AT, SEQUENCE_AT = 43, 53
STAGE = re.compile(r"audit: \[(\d+)/\d+\] (.+): done in ([\d.]+) s")


def templates(value_size: int) -> list[bytearray]:
    """Batches of distinct keys, each record 1 ms after the one before it; copies get
    their own timestamps, producer and sequence written into the header."""
    built = []
    for t in range(KEYS // RECORDS_PER_BATCH):
        records = [
            Record(
                i, BASE_TIMESTAMP + i, b"key-%05d" % (t * RECORDS_PER_BATCH + i), b"v" * value_size
            )
            for i in range(RECORDS_PER_BATCH)
        ]
        built.append(
            bytearray(build_batch(records, producer_id=0, producer_epoch=0, base_sequence=0))
        )
    return built


def build(data: Path, records: int, partitions: int, value_size: int) -> None:
    batches = templates(value_size)
    per_partition = records // partitions
    for partition in range(partitions):
        log = Log.open(data / f"{TOPIC}-{partition}", LogConfig(segment_bytes=SEGMENT_BYTES))
        sequence = 0
        while sequence < per_partition:
            chunk = bytearray()
            for _ in range(50):  # one producer's requests in flight, appended together
                if sequence >= per_partition:
                    break
                batch = bytearray(batches[(sequence // RECORDS_PER_BATCH) % len(batches)])
                first = BASE_TIMESTAMP + sequence
                struct.pack_into(">q", batch, BASE_TIMESTAMP_AT, first)
                struct.pack_into(">q", batch, MAX_TIMESTAMP_AT, first + RECORDS_PER_BATCH - 1)
                struct.pack_into(">q", batch, PRODUCER_ID_AT, 1000 + partition)
                struct.pack_into(">i", batch, SEQUENCE_AT, sequence)
                struct.pack_into(">I", batch, CRC_AT, crc32c.crc32c(batch[CRC_FROM:]))
                chunk += batch
                sequence += RECORDS_PER_BATCH
            log.append_as_leader(chunk, 0, BASE_TIMESTAMP + sequence)
        log.close()
        print(
            f"  partition {partition}: {sequence:,} records, {log.size_in_bytes / 1e6:.0f} MB",
            file=sys.stderr,
            flush=True,
        )


def audit(data: Path, out: Path) -> tuple[float, list[tuple[str, float]], dict[str, Any]]:
    command = [sys.executable, "-m", "brook.broker.cli", "audit", str(data), "--out", str(out)]
    started = time.monotonic()
    ran = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    elapsed = time.monotonic() - started
    if ran.returncode != 0:
        raise RuntimeError(f"brook audit exited {ran.returncode}:\n{ran.stderr[-3000:]}")
    stages = [(m.group(2), float(m.group(3))) for m in STAGE.finditer(ran.stderr)]
    return elapsed, stages, json.loads((out / "summary.json").read_text())


def main() -> None:
    parser = bench_parser("python -m bench.audit", __doc__)
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(tempfile.gettempdir()) / "brook-audit-bench",
        help="the log dir to audit, built there when missing and kept for the next run",
    )
    parser.add_argument("--records", type=int, default=3_000_000, help="records in the log dir")
    parser.add_argument("--partitions", type=int, default=4, help="partitions they are spread over")
    parser.add_argument("--value-size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument("--repeat", type=int, default=1, help="audits to run and time")
    args = parser.parse_args()
    if not args.data.exists():
        print(
            f"Building {args.records:,} records in {args.partitions} partitions in {args.data}",
            file=sys.stderr,
        )
        started = time.monotonic()
        build(args.data, args.records, args.partitions, args.value_size)
        print(f"  built in {time.monotonic() - started:.1f} s", file=sys.stderr)
    with tempfile.TemporaryDirectory() as reports:
        for run in range(args.repeat):
            elapsed, stages, summary = audit(args.data, Path(reports) / f"run-{run}")
            records = summary["totals"]["records"]
            rate = records / elapsed
            print(
                f"run {run + 1}: {elapsed:.1f} s wall, {records:,} records, {rate:,.0f} records/s"
            )
            for name, seconds in stages:
                print(f"  {seconds:6.1f} s  {name}")
            print(f"  status {summary['status']}, findings {summary['findings_by_severity']}")


if __name__ == "__main__":
    main()
