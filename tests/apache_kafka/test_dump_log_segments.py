"""Kafka's own DumpLogSegments (kafka-dump-log.sh) reads every file Brook writes and finds
nothing wrong: segments of plain, compressed, idempotent and transactional batches, a
compacted and cleaned log, logs recovered after a SIGKILL; their offset and time indexes
(verified against the log, and through the sanity check Kafka runs at start), producer-state
snapshots and aborted-transaction indexes.

One Brook broker writes the topics, then stops; DumpLogSegments runs once per mode over all
the files (a JVM each), and its complaints, which it prints to stderr, are collected."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Producer

from bench.apache_kafka import dump_log_segments
from brook.broker.testing import BrokerProcess, BrokerThread, wait_until

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SMALL_SEGMENTS = {"segment.bytes": "20000", "index.interval.bytes": "400"}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4000",
    "min.cleanable.dirty.ratio": "0.01",
}
KEYS = 30
ROUNDS = 6  # of every key, about 2.7 KB each: segments of 4 KB roll
# What DumpLogSegments writes to stderr when a file is wrong (the tool's own wording).
COMPLAINTS = (
    "Mismatches in :",
    "Found timestamp mismatch",
    "Found out of order timestamp",
    "indexed offsets are not found",
    "Exception",
    "Error",
)
# Small batches, so that a segment holds many and the indexes have entries.
SMALL_BATCHES = {"batch.size": 3000, "linger.ms": 0}


@dataclass
class WrittenLogs:
    data_dirs: list[Path]
    # Records produced per topic (as the log must hold them), markers aside.
    produced: dict[str, int]


def _files(data_dirs: list[Path], *suffixes: str) -> list[Path]:
    return sorted(
        path
        for data_dir in data_dirs
        for partition in data_dir.iterdir()
        if partition.is_dir() and not partition.name.startswith("__")
        for path in partition.iterdir()
        if path.suffix in suffixes
    )


def _transactions(bootstrap: str, topic: str) -> None:
    """A committed and an aborted transaction of 50 records each."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "dump-log-tx", **SMALL_BATCHES}
    )
    producer.init_transactions(30)
    for commit in (True, False):
        producer.begin_transaction()
        for number in range(50):
            producer.produce(topic, value=b"t" * 60, key=b"%d" % number, partition=0)
        # In the log before the transaction ends: librdkafka drops what it has not sent
        # when it aborts, and a transaction that wrote nothing leaves no marker.
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)


def _write_with_a_thread_broker(data_dir: Path) -> dict[str, int]:
    broker = BrokerThread(data_dir, {"log.cleaner.backoff.ms": 20}).start()
    produced: dict[str, int] = {}
    try:
        for codec in CODECS:
            topic = f"codec-{codec}"
            broker.create_topic(topic, 1, SMALL_SEGMENTS)
            records = [
                {"key": b"k%d" % n, "value": b"v" * 100, "headers": [("h", b"%d" % n)]}
                for n in range(600)
            ]
            broker.produce(
                topic, records, partition=0, config={**SMALL_BATCHES, "compression.type": codec}
            )
            produced[topic] = len(records)
        broker.create_topic("transactions", 1, SMALL_SEGMENTS)
        _transactions(broker.bootstrap, "transactions")
        produced["transactions"] = 100
        broker.create_topic("compacted", 1, COMPACTED)
        for round_ in range(ROUNDS):
            broker.produce(
                "compacted",
                [(b"key-%02d" % key, b"round %02d " % round_ + b"x" * 60) for key in range(KEYS)],
                partition=0,
                config=SMALL_BATCHES,
            )

        def cleaned() -> bool:
            def read() -> bool:
                log = broker.broker.log_manager.get_log("compacted", 0)
                checkpoints = broker.broker.log_cleaner.checkpoints(log.dir.parent)
                return checkpoints.get("compacted", 0) == log.active_segment.base_offset

            return bool(broker.call(read))

        wait_until(cleaned, "the compacted topic cleaned to its active segment", 60)
    finally:
        broker.stop()
    return produced


def _write_through_a_crash(data_dir: Path) -> dict[str, int]:
    """Records acknowledged, the broker SIGKILLed (no clean shutdown marker, indexes left
    as they were), started again (recovery), more records, a clean stop."""
    broker = BrokerProcess(data_dir).start()
    try:
        broker.create_topic("recovered", 1, SMALL_SEGMENTS)
        broker.produce("recovered", [b"before %d" % n for n in range(400)], 0, SMALL_BATCHES)
        broker.kill()
        broker = BrokerProcess(data_dir).start()
        broker.produce("recovered", [b"after %d" % n for n in range(400)], 0, SMALL_BATCHES)
    finally:
        assert broker.stop() == 0
    return {"recovered": 800}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, apache_kafka_jars: Path) -> WrittenLogs:
    root = tmp_path_factory.mktemp("dump-log")
    produced = _write_with_a_thread_broker(root / "thread")
    produced.update(_write_through_a_crash(root / "process"))
    return WrittenLogs([root / "thread", root / "process"], produced)


def _topic_of(path: str) -> str:
    return Path(path).parent.name.rsplit("-", 1)[0]


def _complaints(done: subprocess.CompletedProcess[str], compacted: set[str]) -> list[str]:
    """DumpLogSegments' complaints, but the ones it makes of every healthy log:

    - it starts each file's run of offsets at -1, so a segment after the first is "-1
      followed by its base offset", and a compacted log has gaps by design;
    - a cleaned log keeps the last batch of each producer, emptied, for its sequence
      numbers; Kafka's cleaner counts such a batch's header timestamp among the retained
      ones (MemoryRecords.FilterResult), so the time index may point at it, where the tool
      finds no record and reads the log's timestamp as -1."""
    lines = done.stderr.splitlines()
    complaints = []
    current = ""
    for line in lines:
        if line.startswith(("Non-consecutive offsets in ", "Found timestamp mismatch in :")):
            current = line.split(" in ", 1)[1].removeprefix(":")
            continue
        empty_batch = re.fullmatch(r"\s+Index timestamp: \d+, log timestamp: -1", line)
        if empty_batch is not None and _topic_of(current) in compacted:
            continue
        pair = re.fullmatch(r"\s+(-?\d+) is followed by (\d+)", line)
        if pair is not None and current:
            base = int(Path(current).stem)
            if (int(pair.group(1)), int(pair.group(2))) == (-1, base):
                continue
            if _topic_of(current) in compacted:
                continue
            complaints.append(f"{current}: {line.strip()}")
            continue
        if line.strip():
            complaints.append(line)
    return complaints


def test_every_segment_reads_back_as_written_record_by_record(written: WrittenLogs) -> None:
    logs = _files(written.data_dirs, ".log")
    done = dump_log_segments(logs, "--deep-iteration")
    assert done.returncode == 0, done.stderr
    assert _complaints(done, {"compacted"}) == []
    assert "isvalid: false" not in done.stdout
    assert "invalid bytes at the end" not in done.stdout
    # Every record, per topic, with its codec named on its batch.
    records: dict[str, int] = {}
    topic = ""
    for line in done.stdout.splitlines():
        if line.startswith("Dumping "):
            topic = Path(line.removeprefix("Dumping ")).parent.name.rsplit("-", 1)[0]
        elif line.startswith("| offset: ") and "endTxnMarker" not in line:
            records[topic] = records.get(topic, 0) + 1
    for name, count in written.produced.items():
        assert records.get(name) == count, name
    for codec in CODECS:
        assert f"compresscodec: {codec}" in done.stdout
    assert "endTxnMarker: COMMIT" in done.stdout and "endTxnMarker: ABORT" in done.stdout
    assert records["compacted"] < ROUNDS * KEYS  # the cleaner removed superseded records


def test_indexes_match_their_logs(written: WrittenLogs) -> None:
    indexes = _files(written.data_dirs, ".index", ".timeindex")
    assert len(indexes) > 20
    done = dump_log_segments(indexes, "--verify-index-only")
    assert done.returncode == 0, done.stderr
    assert _complaints(done, {"compacted"}) == []


def test_indexes_pass_the_sanity_check_kafka_runs_at_start(written: WrittenLogs) -> None:
    indexes = _files(written.data_dirs, ".index", ".timeindex")
    done = dump_log_segments(indexes, "--index-sanity-check")
    assert done.returncode == 0, done.stderr
    assert _complaints(done, set()) == []
    passed = set(re.findall(r"^(\S+) passed sanity check\.$", done.stdout, re.M))
    empty = set(re.findall(r"^(\S+) is empty\.$", done.stdout, re.M))
    assert {str(path) for path in indexes} == passed | empty


def test_producer_snapshots_and_aborted_transactions(written: WrittenLogs) -> None:
    snapshots = _files(written.data_dirs, ".snapshot")
    txn_indexes = _files(written.data_dirs, ".txnindex")
    assert snapshots and txn_indexes
    done = dump_log_segments([*snapshots, *txn_indexes])
    assert done.returncode == 0, done.stderr
    assert _complaints(done, set()) == []
    # The idempotent producers' state, as Kafka reads it back.
    assert re.search(r"^producerId: \d+ producerEpoch: \d+ ", done.stdout, re.M)
    # The aborted transaction, 50 records from its first offset, in the txn index.
    aborted = re.findall(
        r"^version: \d+ producerId: (\d+) firstOffset: (\d+) lastOffset: (\d+)", done.stdout, re.M
    )
    assert len(aborted) == 1
    _, first, last = (int(value) for value in aborted[0])
    assert last - first == 50  # 50 records and the ABORT marker
