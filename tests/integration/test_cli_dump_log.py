"""`brook dump-log` on files a real broker wrote and on files built by code no one here
wrote (kafka-python's MemoryRecordsBuilder), run as the real console script: the dump
must show what was produced, index checks must pass on good files and name what is
wrong in damaged ones, and a bad file must be one error line and a non-zero exit."""

from __future__ import annotations

import os
import re
import struct
import time
from dataclasses import dataclass
from pathlib import Path

import crc32c
import pytest
from confluent_kafka import Producer
from kafka.record import MemoryRecords, MemoryRecordsBuilder

from brook.broker.testing import BrokerThread
from brook.protocol.record_batch import Record, build_batch

from .cli import assert_one_line_error, brook
from .clients import create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000
FIELD = re.compile(r"(\w+): (\S*)")


def fields(line: str) -> dict[str, str]:
    """`name: value` pairs of a batch or record line (values without spaces)."""
    return dict(FIELD.findall(line))


def batch_lines(output: str) -> list[dict[str, str]]:
    return [fields(line) for line in output.splitlines() if line.startswith("baseOffset:")]


@dataclass
class Produced:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]


# --- what Brook writes ----------------------------------------------------------------------


def produce_with_headers(
    bootstrap: str, topic: str, messages: list[tuple[bytes, bytes]], headers: list
) -> list:
    """Produce in one burst (so several records share a batch); the delivered messages."""
    delivered: list = []
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"}
    )
    for key, value in messages:
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=headers,
            on_delivery=lambda e, m: delivered.append(m),
        )
    assert producer.flush(30) == 0
    assert all(message.error() is None for message in delivered)
    return delivered


@pytest.fixture
def written(tmp_path: Path):
    """A partition Brook wrote: several segments with indexes, every batch lz4."""
    broker = BrokerThread(tmp_path / "data").start()
    try:
        create_topic(
            broker.bootstrap,
            "written",
            config={"segment.bytes": "4000", "index.interval.bytes": "300"},
        )
        produced: dict[int, Produced] = {}
        for round_ in range(12):
            # Random hex: compressible only so far, so that the segments do roll.
            messages = [
                (b"key-%d-%d" % (round_, n), b"payload %d: %s" % (n, os.urandom(60).hex().encode()))
                for n in range(8)
            ]
            headers = [("round", b"%d" % round_), ("origin", b"test")]
            for message in produce_with_headers(broker.bootstrap, "written", messages, headers):
                produced[message.offset()] = Produced(message.key(), message.value(), headers)
        yield broker, tmp_path / "data" / "written-0", produced
    finally:
        broker.stop()


def test_dump_of_a_partition_brook_wrote(written):
    broker, partition_dir, produced = written
    broker.stop()  # a clean stop: indexes trimmed to their entries
    assert len(list(partition_dir.glob("*.log"))) > 2
    ran = brook("dump-log", "--print-data-log", str(partition_dir))
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr

    dumped = [line[len("Dumping ") :] for line in ran.lines if line.startswith("Dumping ")]
    assert [Path(name).name for name in dumped] == sorted(
        p.name for p in partition_dir.iterdir() if p.name != "partition.metadata"
    )
    batches = batch_lines(ran.stdout)
    assert all(batch["isvalid"] == "true" and batch["magic"] == "2" for batch in batches)
    assert {batch["compresscodec"] for batch in batches} == {"lz4"}
    next_offset = 0
    for batch in batches:  # offsets run without gaps across segments
        assert int(batch["baseOffset"]) == next_offset
        next_offset = int(batch["lastOffset"]) + 1
    assert next_offset == len(produced)

    records = [line for line in ran.lines if line.startswith("| offset:")]
    assert len(records) == len(produced)
    for line in records:
        offset = int(fields(line)["offset"])
        expected = produced[offset]
        round_ = expected.headers[0][1].decode()
        assert f" key: {expected.key.decode()} payload: {expected.value.decode()}" in line
        assert line.endswith(f" headers: [round={round_}, origin=test]"), line
        assert "headerKeys: [round, origin]" in line
    assert "epoch: 0 startOffset: 0" in ran.lines  # leader-epoch-checkpoint
    index_entries = [line for line in ran.lines if line.startswith("offset: ")]
    time_entries = [line for line in ran.lines if line.startswith("timestamp: ")]
    assert index_entries and time_entries

    verified = brook("dump-log", "--verify-index-only", str(partition_dir))
    assert (verified.returncode, verified.stderr) == (0, "")
    # One line per index, saying what was checked against which segment.
    segments = sorted(partition_dir.glob("*.log"))
    assert len(verified.lines) == 2 * len(segments), verified.lines
    for segment in segments:
        for suffix in (".index", ".timeindex"):
            index = segment.with_suffix(suffix)
            line = next(line for line in verified.lines if line.startswith(f"{index}: "))
            assert re.fullmatch(
                rf"{re.escape(str(index))}: \d+ entries verified against {segment.name}"
                r" \(\d+ batches\): no mismatch",
                line,
            ), line
    assert re.search(r": [1-9]\d* entries verified", verified.stdout)
    sanity = brook("dump-log", "--index-sanity-check", str(partition_dir))
    assert sanity.returncode == 0
    assert all(line.endswith("passed sanity check.") for line in sanity.lines)
    assert len(sanity.lines) == 2 * len(list(partition_dir.glob("*.log")))


def test_dump_while_the_broker_runs(written):
    """The active segment's indexes are preallocated (a tail of zeros): not entries."""
    _, partition_dir, produced = written
    active = sorted(partition_dir.glob("*.index"))[-1]
    assert active.stat().st_size == 10 * 1024 * 1024
    ran = brook("dump-log", "--deep-iteration", str(partition_dir))
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    assert sum(line.startswith("| offset:") for line in ran.lines) == len(produced)
    assert " payload: " not in ran.stdout  # --deep-iteration alone leaves the data out
    assert "offset: 0 position: 0" not in ran.stdout  # zeros are free space
    assert brook("dump-log", "--verify-index-only", str(partition_dir)).returncode == 0


# --- what kafka-python builds ---------------------------------------------------------------


@dataclass
class Built:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    crc: int
    codec: str
    records: list[tuple[int, int, bytes | None, bytes, list[tuple[str, bytes]]]]


def build_segment(directory: Path, base_offset: int = 100) -> list[Built]:
    """Ten batches built by kafka-python (one codec each, timestamps that go back inside
    a batch), with an offset index and a time index computed here from the bytes, the
    way Kafka indexes: one entry per batch after the first."""
    directory.mkdir(parents=True, exist_ok=True)
    data = bytearray()
    built: list[Built] = []
    offset = base_offset
    for number in range(10):
        builder = MemoryRecordsBuilder(
            magic=2, compression_type=number % len(CODECS), batch_size=1 << 20
        )
        records = []
        for delta in range(number % 3 + 2):
            timestamp = BASE_TS + number * 1000 - delta * 10  # backwards inside the batch
            key = None if delta == 0 else b"key-%d" % (offset + delta)
            value = b"kafka-python value %d; " % (offset + delta) * 8  # worth compressing
            headers = [("n", b"%d" % delta)] if delta % 2 else []
            assert builder.append(timestamp, key, value, headers) is not None
            records.append((offset + delta, timestamp, key, value, headers))
        builder.close()
        # A producer's batch has base offset 0; the broker sets it (outside the CRC).
        buffer = bytearray(builder.buffer())
        struct.pack_into(">q", buffer, 0, offset)
        batch = MemoryRecords(bytes(buffer)).next_batch()
        built.append(
            Built(
                position=len(data),
                base_offset=batch.base_offset,
                last_offset=batch.last_offset,
                max_timestamp=batch.max_timestamp,
                size=len(buffer),
                crc=batch.crc,
                codec=CODECS[batch.compression_type],
                records=records,
            )
        )
        data += buffer
        offset = batch.last_offset + 1
    name = f"{base_offset:020d}"
    (directory / f"{name}.log").write_bytes(data)
    index = b"".join(struct.pack(">ii", b.last_offset - base_offset, b.position) for b in built[1:])
    (directory / f"{name}.index").write_bytes(index)
    time_index = b"".join(
        struct.pack(">qi", b.max_timestamp, b.last_offset - base_offset) for b in built[1:]
    )
    (directory / f"{name}.timeindex").write_bytes(time_index)
    return built


def test_dump_of_a_segment_kafka_python_built(tmp_path):
    built = build_segment(tmp_path / "legacy-0")
    log = tmp_path / "legacy-0" / f"{100:020d}.log"
    ran = brook("dump-log", "--print-data-log", str(log))
    assert (ran.returncode, ran.stderr) == (0, ""), ran.stderr
    assert ran.lines[:2] == [f"Dumping {log}", "Log starting offset: 100"]
    batches = batch_lines(ran.stdout)
    assert len(batches) == len(built)
    assert {batch.codec for batch in built} == set(CODECS)
    for dumped, expected in zip(batches, built, strict=True):
        assert dumped == dumped | {
            "baseOffset": str(expected.base_offset),
            "lastOffset": str(expected.last_offset),
            "count": str(len(expected.records)),
            "position": str(expected.position),
            "CreateTime": str(expected.max_timestamp),
            "size": str(expected.size),
            "magic": "2",
            "compresscodec": expected.codec,
            "crc": str(expected.crc),
            "isvalid": "true",
            "producerId": "-1",
            "isTransactional": "false",
            "isControl": "false",
        }
    records = [line for line in ran.lines if line.startswith("| ")]
    expected_records = [record for batch in built for record in batch.records]
    assert len(records) == len(expected_records)
    for line, (offset, timestamp, key, value, headers) in zip(
        records, expected_records, strict=True
    ):
        header_text = ", ".join(f"{name}={data.decode()}" for name, data in headers)
        assert line == (
            f"| offset: {offset} CreateTime: {timestamp}"
            f" keySize: {-1 if key is None else len(key)} valueSize: {len(value)}"
            f" sequence: -1 headerKeys: [{', '.join(name for name, _ in headers)}]"
            f" key: {'null' if key is None else key.decode()} payload: {value.decode()}"
            f" headers: [{header_text}]"
        )

    # --files, comma-separated, as DumpLogSegments takes them.
    both = brook("dump-log", "--files", f"{log},{log.with_suffix('.timeindex')}")
    assert both.returncode == 0, both
    assert [line for line in both.lines if line.startswith("Dumping ")] == [
        f"Dumping {log}",
        f"Dumping {log.with_suffix('.timeindex')}",
    ]

    index = brook("dump-log", str(log.with_suffix(".index")))
    assert index.returncode == 0, index
    assert index.lines[1:] == [f"offset: {b.last_offset} position: {b.position}" for b in built[1:]]
    time_index = brook("dump-log", str(log.with_suffix(".timeindex")))
    assert time_index.returncode == 0, time_index
    assert time_index.lines[1:] == [
        f"timestamp: {b.max_timestamp} offset: {b.last_offset}" for b in built[1:]
    ]


def test_idempotent_and_transactional_batches(tmp_path):
    directory = tmp_path / "txn-0"
    directory.mkdir()
    builder = MemoryRecordsBuilder(
        magic=2,
        compression_type=0,
        batch_size=1 << 20,
        transactional=True,
        producer_id=4242,
        producer_epoch=3,
        base_sequence=17,
    )
    for n in range(3):
        builder.append(BASE_TS + n, b"k%d" % n, b"v%d" % n, [])
    builder.close()
    # A commit marker as a coordinator writes it: key (version 0, type 1 = COMMIT),
    # value (version 0, coordinator epoch 9).
    marker = build_batch(
        [Record(3, BASE_TS + 5, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 9))],
        base_offset=3,
        producer_id=4242,
        producer_epoch=3,
        transactional=True,
        control=True,
    )
    log = directory / f"{0:020d}.log"
    log.write_bytes(bytes(builder.buffer()) + marker)
    ran = brook("dump-log", "--deep-iteration", str(log))
    assert ran.returncode == 0, ran
    data_batch, marker_batch = batch_lines(ran.stdout)
    assert data_batch == data_batch | {
        "producerId": "4242",
        "producerEpoch": "3",
        "baseSequence": "17",
        "lastSequence": "19",
        "isTransactional": "true",
        "isControl": "false",
    }
    assert marker_batch == marker_batch | {"isTransactional": "true", "isControl": "true"}
    records = [line for line in ran.lines if line.startswith("| ")]
    assert [fields(line)["sequence"] for line in records[:3]] == ["17", "18", "19"]
    assert records[3].endswith("endTxnMarker: COMMIT coordinatorEpoch: 9")


# --- damage ---------------------------------------------------------------------------------


def test_corrupt_offset_index_is_detected(tmp_path):
    built = build_segment(tmp_path / "p-0")
    index = tmp_path / "p-0" / f"{100:020d}.index"
    entries = [(b.last_offset - 100, b.position) for b in built[1:]]
    entries[2] = (entries[2][0] - 1, entries[2][1])  # names the wrong offset
    entries[4] = (entries[4][0], entries[4][1] + 5)  # points inside a batch
    entries[6], entries[7] = entries[7], entries[6]  # out of order
    index.write_bytes(b"".join(struct.pack(">ii", *entry) for entry in entries))

    ran = brook("dump-log", "--verify-index-only", str(index))
    assert ran.returncode == 1
    assert ran.lines[0] == f"Mismatches in {index}:"
    problems = ran.lines[1:]
    wrong = built[3]
    assert any(
        f"index offset {wrong.last_offset - 1}, but the batch there ends at log offset"
        f" {wrong.last_offset}" in line
        for line in problems
    ), problems
    assert any("points inside a batch" in line for line in problems), problems
    assert any("does not increase" in line for line in problems), problems

    sanity = brook("dump-log", "--index-sanity-check", str(tmp_path / "p-0"))
    assert sanity.returncode == 1
    assert f"{index.with_suffix('.timeindex')} passed sanity check." in sanity.lines
    assert f"Mismatches in {index}:" in sanity.lines


def test_corrupt_time_index_is_detected(tmp_path):
    built = build_segment(tmp_path / "p-0")
    time_index = tmp_path / "p-0" / f"{100:020d}.timeindex"
    entries = [(b.max_timestamp, b.last_offset - 100) for b in built[1:]]
    entries[3] = (entries[3][0] + 1, entries[3][1])  # not the batch's max timestamp
    time_index.write_bytes(b"".join(struct.pack(">qi", *entry) for entry in entries))
    ran = brook("dump-log", str(time_index))
    assert ran.returncode == 1
    assert f"timestamp: {entries[3][0]} offset: {built[4].last_offset}" in ran.lines
    assert f"Mismatches in {time_index}:" in ran.lines
    assert any(
        "timestamp mismatch" in line and str(built[4].max_timestamp) in line for line in ran.lines
    )


def test_damaged_segment(tmp_path):
    built = build_segment(tmp_path / "p-0")
    log = tmp_path / "p-0" / f"{100:020d}.log"
    data = bytearray(log.read_bytes())
    data[built[2].position + 70] ^= 0xFF  # a byte inside the third batch's records
    log.write_bytes(bytes(data[: built[-1].position + 30]))  # and a torn last batch
    ran = brook("dump-log", str(log))
    assert ran.returncode == 1
    validity = [batch["isvalid"] for batch in batch_lines(ran.stdout)]
    assert validity == ["true", "true", "false"] + ["true"] * 6
    assert ran.lines[-1].startswith(f"Found 30 invalid bytes at position {built[-1].position}")


def test_bad_files_are_one_error_line(tmp_path):
    odd_index = tmp_path / f"{0:020d}.index"
    odd_index.write_bytes(b"\x00" * 8 + b"\x01\x02\x03")
    assert_one_line_error(
        brook("dump-log", str(odd_index)), str(odd_index), "not a multiple", code=1
    )
    assert_one_line_error(brook("dump-log", str(tmp_path / "missing.log")), "no such file")
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    assert_one_line_error(brook("dump-log", str(other)), "unknown file type", code=1)
    not_a_log = tmp_path / f"{0:020d}.log"
    not_a_log.write_bytes(b"\x00" * 16 + b"\x07" + b"\x00" * 60)
    ran = brook("dump-log", str(not_a_log))
    assert ran.returncode == 1 and "magic byte 7" in ran.stdout
    assert_one_line_error(brook("dump-log"), "give at least one file", code=2)


# --- producer state, aborted transactions, leader epochs ------------------------------------


def snapshot_bytes(entries: list[tuple[int, ...]]) -> bytes:
    """Kafka's producer snapshot: version 1, CRC32C of the rest, int32 count, entries."""
    body = struct.pack(">i", len(entries)) + b"".join(
        struct.pack(">qhiqiqiq", *entry) for entry in entries
    )
    return struct.pack(">hI", 1, crc32c.crc32c(body)) + body


def test_producer_snapshot(tmp_path):
    snapshot = tmp_path / f"{50:020d}.snapshot"
    now = int(time.time() * 1000)
    snapshot.write_bytes(
        snapshot_bytes(
            [
                (1000, 2, 9, 49, 4, now, -1, -1),
                (1001, 0, 3, 40, 0, now - 5, 7, 38),
            ]
        )
    )
    ran = brook("dump-log", str(snapshot))
    assert ran.returncode == 0, ran
    assert ran.lines[1:] == [
        "producerId: 1000 producerEpoch: 2 coordinatorEpoch: -1 currentTxnFirstOffset: none"
        f" lastTimestamp: {now} lastSequence: 9 lastOffset: 49 offsetDelta: 4",
        "producerId: 1001 producerEpoch: 0 coordinatorEpoch: 7 currentTxnFirstOffset: 38"
        f" lastTimestamp: {now - 5} lastSequence: 3 lastOffset: 40 offsetDelta: 0",
    ]
    damaged = bytearray(snapshot.read_bytes())
    damaged[-1] ^= 1
    snapshot.write_bytes(bytes(damaged))
    assert_one_line_error(brook("dump-log", str(snapshot)), "CRC", code=1)


def test_txn_index_and_leader_epoch_checkpoint(tmp_path):
    txn_index = tmp_path / f"{0:020d}.txnindex"
    txn_index.write_bytes(
        struct.pack(">hqqqq", 0, 77, 10, 20, 21) + struct.pack(">hqqqq", 0, 78, 30, 31, 32)
    )
    checkpoint = tmp_path / "leader-epoch-checkpoint"
    checkpoint.write_text("0\n3\n0 0\n2 150\n5 900\n")
    ran = brook("dump-log", str(txn_index), str(checkpoint))
    assert ran.returncode == 0, ran
    assert ran.lines == [
        f"Dumping {txn_index}",
        "version: 0 producerId: 77 firstOffset: 10 lastOffset: 20 lastStableOffset: 21",
        "version: 0 producerId: 78 firstOffset: 30 lastOffset: 31 lastStableOffset: 32",
        f"Dumping {checkpoint}",
        "epoch: 0 startOffset: 0",
        "epoch: 2 startOffset: 150",
        "epoch: 5 startOffset: 900",
    ]
    checkpoint.write_text("0\n3\n0 0\n")
    assert_one_line_error(brook("dump-log", str(checkpoint)), "promises 3 entries", code=1)
