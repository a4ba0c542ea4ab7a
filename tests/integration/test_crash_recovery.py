"""A broker killed with SIGKILL keeps every acknowledged record, and recovers a torn or
corrupt log tail on its next start, as Kafka does.

Real `brook serve` processes and confluent-kafka; nothing is mocked. A SIGKILL loses no
page-cache data, so acks=1 writes must all survive it; what recovery may cut is only
what was never completely written (simulated here by damaging the file).
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from .acked import AckRecorder, assert_all_acked_kept, read_all
from .clients import create_topic, produce
from .processes import read_partition, stop_with, watermarks
from .segments import check_indexes

PARTITIONS = 4
# Small segments, so a crash leaves several segments per partition to recover.
TOPIC_CONFIG = {"segment.bytes": str(64 * 1024), "index.interval.bytes": "1024"}
LOG_LINE = re.compile(r"^\S+ \S+ [A-Z]+ (?P<logger>[\w.]+): (?P<message>.*)$", re.MULTILINE)
PROGRESS_LINE = re.compile(r"\[\d+/\d+ in [^\]]+\] Recovering segment (\d+)/(\d+) of (\S+) ")
LOADED_LINE = re.compile(
    r"\[\d+/\d+ in [^\]]+\] Loaded log (\S+) with .*, after recovering (\d+) unflushed segment"
)


def _assert_recovery_logged(log_text: str, topic: str) -> None:
    """The start after a crash: one line per partition, from one logger, says what its
    recovery did; a long one adds lines naming the segment it has reached. No line is
    logged twice. (What recovery found, such as a torn tail or a half-written snapshot,
    has lines of its own.)"""
    assert "after an unclean shutdown" in log_text
    loading = log_text.split("after an unclean shutdown", 1)[1].split(" partition log(s) from")[0]
    lines = [(m["logger"], m["message"]) for m in LOG_LINE.finditer(loading)]
    assert len({message for _, message in lines}) == len(lines), loading
    for partition in range(PARTITIONS):
        name = f"{topic}-{partition}"
        naming = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])")
        mine = [
            (logger, message)
            for logger, message in lines
            if naming.search(message) and re.search("Recover|Loaded log", message)
        ]
        assert {logger for logger, _ in mine} == {"brook.storage.log"}, mine
        loaded = [match for _, message in mine if (match := LOADED_LINE.search(message))]
        assert len(loaded) == 1, mine
        recovered = int(loaded[0][2])
        assert recovered >= 1
        progress = [match for _, message in mine if (match := PROGRESS_LINE.search(message))]
        assert len(mine) == 1 + len(progress), mine
        numbers = [int(match[1]) for match in progress]
        assert numbers == sorted(set(numbers)) and all(n <= recovered for n in numbers)


def test_sigkill_during_produce_loses_no_acknowledged_record(brokers, topic_name):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, PARTITIONS, TOPIC_CONFIG)
    acked: list[tuple[int, int, bytes]] = []

    # Two rounds: the second crash hits a broker that itself started by recovering.
    for run in ("first", "second"):
        with AckRecorder(broker.bootstrap, topic_name, run, partitions=PARTITIONS) as recorder:
            recorder.wait_for_acks(8000)
            broker.kill()
            time.sleep(0.2)  # let the producer see the dead connection mid-stream
        assert recorder.sent > len(recorder.acked), "the kill did not happen mid-stream"
        acked += recorder.acked
        assert len({(p, o) for p, o, _ in acked}) == len(acked), "an offset was acked twice"

        broker = brokers.restart(broker)
        _assert_recovery_logged(broker.log_text(), topic_name)
        stored = read_all(broker.bootstrap, topic_name, PARTITIONS)
        assert_all_acked_kept(stored, acked)
        assert sum(len(records) for records in stored.values()) >= len(acked)

    # Producing after the restart continues each partition right at its log end.
    ends = [high for _, high in watermarks(broker.bootstrap, topic_name, PARTITIONS)]
    for partition in range(PARTITIONS):
        delivered = produce(
            broker.bootstrap,
            topic_name,
            [(None, b"after-%d-%d" % (partition, i)) for i in range(50)],
            partition=partition,
        )
        start = ends[partition]
        assert [m.offset() for m in delivered] == list(range(start, start + 50))
    stored = read_all(broker.bootstrap, topic_name, PARTITIONS)
    assert_all_acked_kept(stored, acked)
    for partition in range(PARTITIONS):
        tail = stored[partition][ends[partition] :]
        assert [value for _, value in tail] == [b"after-%d-%d" % (partition, i) for i in range(50)]
    assert broker.stop() == 0
    # The indexes rebuilt by recovery hold up to the checks of Kafka's DumpLogSegments.
    for partition in range(PARTITIONS):
        check_indexes(broker.data_dir / f"{topic_name}-{partition}")


def test_sigterm_during_produce_stops_cleanly_and_keeps_every_acknowledged_record(
    brokers, topic_name
):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, PARTITIONS, TOPIC_CONFIG)
    with AckRecorder(broker.bootstrap, topic_name, "sigterm", partitions=PARTITIONS) as recorder:
        recorder.wait_for_acks(8000)
        # Requests keep arriving while the broker stops: those it read are answered,
        # the rest fail on the closed connection and are not acknowledged.
        assert stop_with(broker, signal.SIGTERM) == 0
    assert recorder.sent > len(recorder.acked), "the stop did not happen mid-stream"
    assert (broker.data_dir / ".kafka_cleanshutdown").exists()

    broker = brokers.restart(broker)
    text = broker.log_text()
    assert "after a clean shutdown" in text and "Recovering" not in text
    stored = read_all(broker.bootstrap, topic_name, PARTITIONS)
    assert_all_acked_kept(stored, recorder.acked)
    assert broker.stop() == 0


def test_clean_restart_does_not_recover(brokers, topic_name):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, PARTITIONS, TOPIC_CONFIG)
    for partition in range(PARTITIONS):
        # Batches well below segment.bytes: a bigger one is refused, as in Kafka.
        messages = [(None, b"v" * 200)] * 500
        produce(
            broker.bootstrap, topic_name, messages, partition=partition, **{"batch.size": 16384}
        )
    assert stop_with(broker, signal.SIGTERM) == 0

    broker = brokers.restart(broker)
    text = broker.log_text()
    assert "after a clean shutdown" in text
    assert "Recovering" not in text
    assert [high for _, high in watermarks(broker.bootstrap, topic_name, PARTITIONS)] == [
        500
    ] * PARTITIONS


# --- a damaged tail ---------------------------------------------------------------------

BATCHES = 12
RECORDS_PER_BATCH = 5


def _batch_positions(log_file: Path) -> list[tuple[int, int]]:
    """(position, size) of each batch in a .log file, from the length fields alone."""
    data = log_file.read_bytes()
    positions = []
    position = 0
    while position + 12 <= len(data):
        size = int.from_bytes(data[position + 8 : position + 12], "big") + 12
        positions.append((position, size))
        position += size
    assert position == len(data), "the test's own log file is not whole batches"
    return positions


def _truncate_mid_batch(log_file: Path, last: tuple[int, int]) -> None:
    position, size = last
    with open(log_file, "r+b") as handle:
        handle.truncate(position + size // 2)


def _flip_byte_in_last_batch(log_file: Path, last: tuple[int, int]) -> None:
    # The last byte is inside the last record's value, covered by the batch CRC.
    position, size = last
    with open(log_file, "r+b") as handle:
        handle.seek(position + size - 1)
        byte = handle.read(1)[0]
        handle.seek(position + size - 1)
        handle.write(bytes([byte ^ 0x40]))


@pytest.mark.parametrize(
    ("damage", "expected_log"),
    [
        (_truncate_mid_batch, "Truncating"),
        (_flip_byte_in_last_batch, "Found invalid messages"),
    ],
    ids=["torn-tail", "flipped-byte"],
)
def test_damaged_tail_is_truncated_after_unclean_shutdown(
    brokers, topic_name, damage, expected_log
):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, 1)
    # A long linger and an explicit flush: each flush sends exactly one batch.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 10_000})
    for batch in range(BATCHES):
        for i in range(RECORDS_PER_BATCH):
            producer.produce(topic_name, value=b"b%02d-r%d-" % (batch, i) + b"y" * 100, partition=0)
        assert producer.flush(10) == 0  # one batch per flush
    broker.kill()  # a torn write can only follow an unclean shutdown

    log_file = broker.data_dir / f"{topic_name}-0" / "00000000000000000000.log"
    positions = _batch_positions(log_file)
    assert len(positions) == BATCHES
    damage(log_file, positions[-1])

    broker = brokers.restart(broker)
    text = broker.log_text()
    assert "after an unclean shutdown" in text
    assert expected_log in text
    assert re.search(rf"Truncating \d+ invalid bytes at the end of .*{topic_name}-0", text), text
    assert re.search(rf"Loaded log {topic_name}-0 .*, after recovering 1 unflushed", text), text
    # Every fully written batch is kept; the damaged one is gone, byte for byte.
    kept_end = positions[-1][0]
    assert log_file.stat().st_size == kept_end
    kept = (BATCHES - 1) * RECORDS_PER_BATCH
    assert watermarks(broker.bootstrap, topic_name, 1) == [(0, kept)]
    values = [m.value() for m in read_partition(broker.bootstrap, topic_name, 0, kept)]
    expected = [
        b"b%02d-r%d-" % (batch, i) + b"y" * 100
        for batch in range(BATCHES - 1)
        for i in range(RECORDS_PER_BATCH)
    ]
    assert values == expected

    # The broker serves on from the cut: new records take the offsets the lost batch had.
    delivered = produce(broker.bootstrap, topic_name, [(None, b"new-%d" % i) for i in range(7)])
    assert [m.offset() for m in delivered] == list(range(kept, kept + 7))
    values = [m.value() for m in read_partition(broker.bootstrap, topic_name, 0, kept + 7)]
    assert values == expected + [b"new-%d" % i for i in range(7)]
    assert broker.stop() == 0
    check_indexes(log_file.parent, expect_entries=False)


def test_recovery_starts_at_the_checkpointed_recovery_point(brokers, topic_name):
    broker = brokers.start()
    create_topic(broker.bootstrap, topic_name, 1, {"segment.bytes": "4096"})
    first = [(None, b"before-%03d-" % i * 4) for i in range(300)]
    produce(broker.bootstrap, topic_name, first, **{"batch.size": 1024})
    # A clean stop flushes everything and checkpoints the recovery point at 300.
    assert broker.stop() == 0
    broker = brokers.restart(broker)
    second = [(None, b"after-%03d-" % i * 4) for i in range(100)]
    produce(broker.bootstrap, topic_name, second, **{"batch.size": 1024})
    broker.kill()

    partition_dir = broker.data_dir / f"{topic_name}-0"
    bases = sorted(int(path.stem) for path in partition_dir.glob("*.log"))
    unflushed = [base for i, base in enumerate(bases) if i + 1 == len(bases) or bases[i + 1] > 300]
    assert len(bases) > len(unflushed) > 1, "the test meant flushed and unflushed segments"
    broker = brokers.restart(broker)
    text = broker.log_text()
    # Only the segments from the one holding the recovery point on are re-validated.
    assert re.search(
        rf"Loaded log {topic_name}-0 .*, after recovering {len(unflushed)} unflushed"
        r" segment\(s\) from recovery point 300\b",
        text,
    ), text
    values = [m.value() for m in read_partition(broker.bootstrap, topic_name, 0, 400)]
    assert values == [value for _, value in first + second]
    assert broker.stop() == 0
