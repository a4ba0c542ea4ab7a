"""Log dirs for the audit's tests, written by a real Brook broker and real clients.

`write_log` runs a broker (stopped cleanly at the end) and writes:

- clean topics: `orders` (3 partitions, small segments and index intervals, so every
  partition has several segments with .index and .timeindex entries, snapshots at each
  roll), written by an idempotent producer without compression and another with gzip,
  keys repeating; `txn`, two committed transactions; a consumer group's commits on
  `orders` (in `__consumer_offsets`) and the transactional ids (in
  `__transaction_state`).
- semantic cases: `aborted` (an aborted transaction, then a committed one), `open` (a
  transaction never ended) and `late` (timestamps going backwards, one far in the
  future, which the topic's message.timestamp.after.max.ms lets through).

and `damage` copies partitions of it into a new log dir, one fault per partition.
"""

from __future__ import annotations

import json
import shutil
import struct
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.apache_kafka import file_lock
from brook.broker.testing import BrokerThread
from brook.storage.producer_snapshot import encode_snapshot, read_snapshot

BROKER = {"offsets.topic.num.partitions": 2, "transaction.state.log.num.partitions": 2}
ORDERS_PARTITIONS = 3
ORDERS_PER_PARTITION = 160
GZIP_PER_PARTITION = 40
KEYS = 40  # distinct keys per partition in orders
GROUP = "audit-group"
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
CLEAN_TOPICS = ["orders", "txn", "__consumer_offsets", "__transaction_state"]
SEMANTIC_TOPICS = ["aborted", "open", "late"]


@dataclass
class WrittenLog:
    data: Path
    committed: dict[tuple[str, int], int] = field(default_factory=dict)  # group commits
    late_timestamps: list[int] = field(default_factory=list)


def _create(admin: AdminClient, topics: list[NewTopic]) -> None:
    for future in admin.create_topics(topics).values():
        future.result(15)


def _delivered(producer: Producer) -> None:
    assert producer.flush(30) == 0


def _orders(bootstrap: str) -> None:
    runs = (("none", ORDERS_PER_PARTITION, 0), ("gzip", GZIP_PER_PARTITION, 1000))
    for codec, count, first in runs:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "compression.type": codec,
                "linger.ms": 5,
            }
        )
        failed: list[Any] = []

        def delivered(error: Any, _: Any, failed: list[Any] = failed) -> None:
            if error is not None:
                failed.append(error)

        for n in range(count):
            for partition in range(ORDERS_PARTITIONS):
                producer.produce(
                    "orders",
                    partition=partition,
                    key=b"user-%d" % ((first + n) % KEYS),
                    value=b"order %d " % n * 12,
                    on_delivery=delivered,
                )
            if n % 20 == 19:
                _delivered(producer)  # many batches per partition
        _delivered(producer)
        assert not failed, failed


def _transactional(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer


def _transaction(producer: Producer, topic: str, count: int, end: str | None) -> None:
    producer.begin_transaction()
    for n in range(count):
        producer.produce(topic, key=b"k%d" % n, value=b"v%d" % n)
    _delivered(producer)  # written before it ends: an abort then has data to abort
    if end == "commit":
        producer.commit_transaction(30)
    elif end == "abort":
        producer.abort_transaction(30)


def _late(bootstrap: str) -> list[int]:
    """Timestamps in append order: back 5 s, back about 3 h, 2 h into the future, and two
    after it that the future one's 2 h put behind it."""
    now = int(time.time() * 1000)
    stamps = [now, now + 1000, now - 4000, now + 2000, now - 3 * HOUR_MS, now + 2 * HOUR_MS]
    stamps += [now + 3000, now + 4000]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for n, stamp in enumerate(stamps):
        producer.produce("late", key=b"late-%d" % n, value=b"x", timestamp=stamp)
        _delivered(producer)  # one batch each, in this order
    return stamps


def _consume_and_commit(bootstrap: str) -> dict[tuple[str, int], int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["orders"])
    try:
        read = 0
        while read < 250:
            message = consumer.poll(10)
            if message is not None and message.error() is None:
                read += 1
        committed = consumer.commit(asynchronous=False)
        return {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}
    finally:
        consumer.close()


def write_log(data: Path) -> WrittenLog:
    broker = BrokerThread(data, BROKER).start()
    written = WrittenLog(data)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        small = {"segment.bytes": "6000", "index.interval.bytes": "300"}
        _create(
            admin,
            [
                NewTopic("orders", ORDERS_PARTITIONS, 1, config=small),
                NewTopic("txn", 1, 1),
                NewTopic("aborted", 1, 1),
                NewTopic("open", 1, 1),
                NewTopic("late", 1, 1, config={"message.timestamp.after.max.ms": str(DAY_MS)}),
            ],
        )
        _orders(broker.bootstrap)
        committer = _transactional(broker.bootstrap, "tx-committed")
        _transaction(committer, "txn", 20, "commit")
        _transaction(committer, "txn", 20, "commit")
        aborter = _transactional(broker.bootstrap, "tx-aborted")
        _transaction(aborter, "aborted", 10, "abort")
        _transaction(aborter, "aborted", 5, "commit")
        hanging = _transactional(broker.bootstrap, "tx-open")
        _transaction(hanging, "open", 7, None)
        written.late_timestamps = _late(broker.bootstrap)
        written.committed = _consume_and_commit(broker.bootstrap)
    finally:
        broker.stop()
    return written


def shared_log(root: Path) -> WrittenLog:
    """The log `write_log` writes, written once under `root` by whichever process asks
    first and read by the rest: the audit's tests run in several xdist workers (each
    group its own Spark), and each would otherwise run a broker to write the same log.
    Nobody writes into it: the tests that damage a log damage a copy."""
    facts = root / "written.json"
    with file_lock(root / "lock"):
        if not facts.exists():
            written = write_log(root / "data")
            facts.write_text(
                json.dumps(
                    {
                        "committed": [[t, p, o] for (t, p), o in written.committed.items()],
                        "late_timestamps": written.late_timestamps,
                    }
                )
            )
    read = json.loads(facts.read_text())
    return WrittenLog(
        root / "data",
        {(t, p): o for t, p, o in read["committed"]},
        list(read["late_timestamps"]),
    )


# --- faults ---------------------------------------------------------------------------


def _copy(data: Path, out: Path, source: str, name: str) -> Path:
    target = out / name
    shutil.copytree(data / source, target)
    return target


def _batch_starts(raw: bytes) -> list[int]:
    starts, position = [], 0
    while position + 12 <= len(raw):
        starts.append(position)
        position += 12 + struct.unpack_from(">i", raw, position + 8)[0]
    return starts


def damage(data: Path, out: Path) -> dict[str, str]:
    """Copies of clean partitions, one fault each, under new topic names; returns which
    check each partition directory should fail (the fault's name)."""
    out.mkdir(parents=True, exist_ok=True)
    expected = {}

    # A byte flipped in the records of the second batch: its CRC no longer matches.
    flip = _copy(data, out, "orders-0", "flipped-0")
    segment = sorted(flip.glob("*.log"))[0]
    raw = bytearray(segment.read_bytes())
    second = _batch_starts(bytes(raw))[1]
    raw[second + 61 + 5] ^= 0xFF
    segment.write_bytes(raw)
    expected["flipped-0"] = "crc_mismatch"

    # The last segment loses its last 7 bytes: a write cut short.
    torn = _copy(data, out, "orders-1", "torn-0")
    last = sorted(torn.glob("*.log"))[-1]
    last.write_bytes(last.read_bytes()[:-7])
    expected["torn-0"] = "torn_tail"

    # The first offset-index entry of the first segment names the next offset.
    index_dir = _copy(data, out, "orders-2", "index-0")
    index = sorted(index_dir.glob("*.index"))[0]
    entries = bytearray(index.read_bytes())
    assert len(entries) >= 8, "the segment has an index entry"
    relative = struct.unpack_from(">i", entries, 0)[0]
    struct.pack_into(">i", entries, 0, relative + 1)
    index.write_bytes(entries)
    expected["index-0"] = "offset_index_mismatch"

    # The leader-epoch checkpoint says epoch 5 from offset 0; the batches carry 0.
    epoch = _copy(data, out, "orders-0", "epoch-0")
    (epoch / "leader-epoch-checkpoint").write_text("0\n1\n5 0\n")
    expected["epoch-0"] = "leader_epoch_mismatch"

    # The newest producer snapshot claims a later sequence for its first producer.
    snap = _copy(data, out, "orders-1", "snapshot-0")
    newest = sorted(snap.glob("*.snapshot"))[-1]
    entries_in = read_snapshot(newest)
    assert entries_in, "the snapshot holds the idempotent producers"
    changed = replace(entries_in[0], last_sequence=entries_in[0].last_sequence + 3)
    newest.write_bytes(encode_snapshot([changed, *entries_in[1:]]))
    expected["snapshot-0"] = "snapshot_mismatch"

    # The aborted transaction's .txnindex is gone.
    txn = _copy(data, out, "aborted-0", "txnindex-0")
    indexes = list(txn.glob("*.txnindex"))
    assert indexes, "the abort was indexed"
    for path in indexes:
        path.unlink()
    expected["txnindex-0"] = "txn_index_mismatch"
    return expected


def append_duplicate(data: Path, out: Path) -> tuple[Path, int, int]:
    """A copy of orders-2 whose last data batch is written again at the log end, as a
    broker that did not see the retry would have: same producer, epoch and sequence,
    the next offsets. Returns the partition directory, the original's and the copy's
    base offsets."""
    target = _copy(data, out, "orders-2", "duplicate-0")
    last = sorted(target.glob("*.log"))[-1]
    raw = bytearray(last.read_bytes())
    start = _batch_starts(bytes(raw))[-1]
    batch = bytearray(raw[start:])
    (original,) = struct.unpack_from(">q", batch, 0)
    (last_delta,) = struct.unpack_from(">i", batch, 23)
    copy_base = original + last_delta + 1
    # The base offset lies outside the CRC: the copy still passes its CRC.
    struct.pack_into(">q", batch, 0, copy_base)
    last.write_bytes(bytes(raw) + bytes(batch))
    return target, original, copy_base


# --- a log the cleaner compacted -----------------------------------------------------


def compacted_partition(directory: Path) -> None:
    """A partition written through the broker's storage and compacted by its log cleaner:
    an idempotent producer overwriting 5 keys, an aborted and a committed transaction,
    several segments; the cleaner removes superseded records (offset and sequence gaps)
    and the aborted data, keeping the markers. Closed cleanly (snapshot at the end)."""
    from brook.protocol import coordinator_records as cr
    from brook.protocol.record_batch import Record, build_batch
    from brook.storage import Log, LogConfig
    from brook.storage.log_cleaner import clean, plan_cleaning
    from brook.storage.log_validator import AppendOrigin

    now = int(time.time() * 1000)
    config = LogConfig(segment_bytes=2048, index_interval_bytes=128, cleanup_policy=("compact",))
    log = Log.open(directory, config)

    def append(data: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        log.append_as_leader(data, 0, now, origin)
        log.high_watermark = log.log_end_offset

    def transaction(pid: int, result: cr.ControlRecordType) -> None:
        records = [Record(i, now, b"t%d" % i, b"in a transaction") for i in range(3)]
        append(
            build_batch(
                records, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True
            )
        )
        control = Record(
            0,
            now,
            cr.encode_key(cr.ControlRecordKey(int(result))),
            cr.encode_value(cr.EndTxnMarker(coordinator_epoch=0)),
        )
        marker = build_batch(
            [control], producer_id=pid, producer_epoch=0, transactional=True, control=True
        )
        append(marker, AppendOrigin.COORDINATOR)

    sequence = 0
    for round_number in range(40):
        records = [Record(i, now, b"k%d" % i, b"round %d" % round_number) for i in range(5)]
        append(build_batch(records, producer_id=7, producer_epoch=0, base_sequence=sequence))
        sequence += 5
        if round_number == 10:
            transaction(8, cr.ControlRecordType.ABORT)
        if round_number == 20:
            transaction(9, cr.ControlRecordType.COMMIT)
    log.roll()
    plan = plan_cleaning(log, None, now, force=True)
    assert plan is not None
    result = clean(plan)
    sizes = {s.base_offset: size for s, size in zip(plan.segments, plan.sizes, strict=True)}
    assert log.replace_segments(result.groups, sizes)
    log.close()


# --- lost and wrongly written data ---------------------------------------------------


def _middle_segment(partition: Path) -> str:
    logs = sorted(partition.glob("*.log"))
    assert len(logs) >= 3, "the partition has a segment between two others"
    return logs[len(logs) // 2].stem


def _rewrite_crc(batch: bytearray) -> None:
    from brook.protocol import crc32c

    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))


def lose_data(data: Path, out: Path) -> dict[str, set[str]]:
    """Copies of clean partitions of topics that are not compacted (cleanup.policy
    delete, Kafka's default), each with data lost or written wrong; returns the error
    checks each partition directory should fail. (Data written twice is append_duplicate's
    partition, which conftest.damaged_report adds beside these.)"""
    out.mkdir(parents=True, exist_ok=True)
    expected: dict[str, set[str]] = {}

    # A middle segment deleted with its indexes: 40 offsets, and the sequences in them, gone.
    deleted = _copy(data, out, "orders-0", "deleted-0")
    for path in deleted.glob(f"{_middle_segment(deleted)}.*"):
        path.unlink()
    expected["deleted-0"] = {"missing_offsets", "sequence_gap"}

    # A middle segment emptied, without its index files.
    emptied = _copy(data, out, "orders-1", "emptied-0")
    middle = _middle_segment(emptied)
    (emptied / f"{middle}.log").write_bytes(b"")
    for suffix in (".index", ".timeindex"):
        (emptied / f"{middle}{suffix}").unlink()
    expected["emptied-0"] = {"missing_offsets", "sequence_gap"}

    # From the middle batch of the first segment on, the first producer's sequences jump
    # by 5 (CRCs rewritten, offsets whole); the snapshots, which would disagree, go.
    skipped = _copy(data, out, "orders-2", "skipped-0")
    for path in skipped.glob("*.snapshot"):
        path.unlink()
    first = sorted(skipped.glob("*.log"))[0]
    raw = bytearray(first.read_bytes())
    starts = _batch_starts(bytes(raw))
    (producer,) = struct.unpack_from(">q", raw, starts[0] + 43)
    for segment in sorted(skipped.glob("*.log")):
        raw = bytearray(segment.read_bytes())
        for start in _batch_starts(bytes(raw)):
            if segment == first and start < starts[len(starts) // 2]:
                continue
            if struct.unpack_from(">q", raw, start + 43)[0] != producer:
                continue
            (length,) = struct.unpack_from(">i", raw, start + 8)
            batch = bytearray(raw[start : start + 12 + length])
            (sequence,) = struct.unpack_from(">i", batch, 53)
            struct.pack_into(">i", batch, 53, sequence + 5)
            _rewrite_crc(batch)
            raw[start : start + len(batch)] = batch
        segment.write_bytes(raw)
    expected["skipped-0"] = {"sequence_gap"}

    # A COMMIT marker of a producer that wrote nothing to the partition, at its log end.
    from brook.protocol import coordinator_records as cr
    from brook.protocol.record_batch import Record, build_batch

    commit = _copy(data, out, "orders-0", "commit-0")
    last = sorted(commit.glob("*.log"))[-1]
    raw = last.read_bytes()
    start = _batch_starts(raw)[-1]
    (base,) = struct.unpack_from(">q", raw, start)
    (delta,) = struct.unpack_from(">i", raw, start + 23)
    (newest,) = struct.unpack_from(">q", raw, start + 35)
    control = Record(
        base + delta + 1,
        newest,
        cr.encode_key(cr.ControlRecordKey(int(cr.ControlRecordType.COMMIT))),
        cr.encode_value(cr.EndTxnMarker(coordinator_epoch=0)),
    )
    marker = build_batch(
        [control],
        base_offset=base + delta + 1,
        producer_id=4242,
        producer_epoch=0,
        transactional=True,
        control=True,
        partition_leader_epoch=0,
    )
    last.write_bytes(raw + marker)
    expected["commit-0"] = {"commit_without_data"}
    return expected


def future_partition(directory: Path, records: int = 300, future_at: int = 100) -> int:
    """A partition written through the broker's storage, one record a batch, whose record
    at `future_at` carries a timestamp a day ahead (a topic with no after bound lets it
    through): every record after it is below it. Returns that record's timestamp."""
    from brook.protocol.record_batch import Record, build_batch
    from brook.storage import Log, LogConfig
    from brook.storage.log_validator import AppendOrigin

    now = int(time.time() * 1000)
    log = Log.open(directory, LogConfig(message_timestamp_after_max_ms=2**63 - 1))
    future = now + DAY_MS
    for n in range(records):
        stamp = future if n == future_at else now + n
        batch = build_batch([Record(0, stamp, b"k%d" % n, b"v")])
        log.append_as_leader(batch, 0, now, AppendOrigin.CLIENT)
    log.high_watermark = log.log_end_offset
    log.close()
    return future
