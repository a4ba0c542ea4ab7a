"""A log dir to compact, written by a real Brook broker whose cleaner is off, and what its
segments hold (read with the storage reader), for the compaction tests.

`orders` (compacted, two partitions, small segments): an idempotent producer writes
every key a few times, tombstones and a last round that a second producer then writes
over (so the idempotent producer's last batch holds nothing that survives compaction),
and a transactional producer aborts one transaction and commits another. `events` is
not compacted. A consumer group commits offsets (`__consumer_offsets`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brook.broker.testing import BrokerThread
from brook.storage.reader import Damage, SegmentReader, list_partitions

ORDERS = "orders"
EVENTS = "events"
PARTITIONS = 2
KEYS = 30
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4000",
    "min.cleanable.dirty.ratio": "0.01",
}
# What a record is, as a consumer and the segment files give it.
Record = tuple[int, bytes | None, bytes | None]  # offset, key, value


@dataclass
class Source:
    data: Path
    port: int
    # (partition, key) -> (offset, value) of the key's latest record in `orders`.
    latest: dict[tuple[int, bytes], tuple[int, bytes | None]]
    # The idempotent producer, still alive: it goes on against the compacted copy.
    idempotent: Any
    failures: list[Any] = field(default_factory=list)


def _delivered(source: Source, record_latest: bool = True) -> Any:
    def on_delivery(error: Any, message: Any) -> None:
        if error is not None:
            source.failures.append(error)
            return
        if record_latest and message.topic() == ORDERS:
            key = (message.partition(), message.key())
            if key not in source.latest or source.latest[key][0] < message.offset():
                source.latest[key] = (message.offset(), message.value())

    return on_delivery


def write_source(data: Path) -> Source:
    broker = BrokerThread(data, {"log.cleaner.enable": "false"}).start()
    idempotent = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "linger.ms": 2,
            "batch.size": 1500,
        }
    )
    source = Source(data, broker.port, {}, idempotent)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        created = admin.create_topics(
            [
                NewTopic(ORDERS, PARTITIONS, 1, config=COMPACTED),
                NewTopic(EVENTS, 1, 1, config={"segment.bytes": "4000"}),
            ]
        )
        for future in created.values():
            future.result(15)
        on_delivery = _delivered(source)

        def produce(producer: Any, rounds: range, keys: range) -> None:
            for r in rounds:
                for partition in range(PARTITIONS):
                    for k in keys:
                        producer.produce(
                            ORDERS,
                            key=b"key-%02d" % k,
                            value=b"value-%d-%d-%d-" % (partition, k, r) + b"." * 30,
                            partition=partition,
                            on_delivery=on_delivery,
                        )
                producer.poll(0)
            assert producer.flush(30) == 0

        produce(idempotent, range(4), range(KEYS))
        for partition, key in ((0, b"key-03"), (1, b"key-04")):
            idempotent.produce(
                ORDERS, key=key, value=None, partition=partition, on_delivery=on_delivery
            )
        assert idempotent.flush(30) == 0

        transactional = Producer(
            {"bootstrap.servers": broker.bootstrap, "transactional.id": "compact-tx"}
        )
        transactional.init_transactions(30)
        transactional.begin_transaction()
        transactional.produce(ORDERS, key=b"key-05", value=b"aborted", partition=1)
        transactional.abort_transaction(30)
        transactional.begin_transaction()
        transactional.produce(
            ORDERS, key=b"key-06", value=b"committed", partition=1, on_delivery=on_delivery
        )
        transactional.commit_transaction(30)
        assert transactional.flush(30) == 0

        # The idempotent producer's last batches, then written over by another.
        produce(idempotent, range(4, 5), range(10, KEYS))
        plain = Producer(
            {"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "batch.size": 1500}
        )
        produce(plain, range(5, 12), range(10, KEYS))
        for n in range(50):
            plain.produce(EVENTS, value=b"event-%d" % n, partition=0)
        assert plain.flush(30) == 0
        assert not source.failures, source.failures[:3]

        group = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compact-group"})
        group.commit(offsets=[TopicPartition(EVENTS, 0, 25)], asynchronous=False)
        group.close()
    finally:
        broker.stop()
    return source


def orders_records(data: Path, partition: int) -> list[Record]:
    """The data records of an `orders` partition in its segment files (aborted ones
    included, control records not), in offset order."""
    return [
        (record.offset, record.key, record.value)
        for batch in partition_batches(data, ORDERS, partition)
        if not batch.header.is_control
        for record in batch.records()
    ]


def aborted_offsets(data: Path) -> set[int]:
    """Where the aborted transaction wrote (partition 1 of `orders`)."""
    return {offset for offset, _, value in orders_records(data, 1) if value == b"aborted"}


def partition_batches(data: Path, topic: str, partition: int) -> Iterator[Any]:
    (found,) = [p for p in list_partitions(data) if (p.topic, p.partition) == (topic, partition)]
    for segment in found.segments:
        with SegmentReader(segment.log_path) as reader:
            for batch in reader.batches():
                assert not isinstance(batch, Damage), batch
                yield batch


def active_segment_base(data: Path, topic: str, partition: int) -> int:
    (found,) = [p for p in list_partitions(data) if (p.topic, p.partition) == (topic, partition)]
    return found.segments[-1].base_offset


def expected_after_compaction(source: Source, partition: int, active_base: int) -> list[Record]:
    """What a compacted `orders` partition serves: below the active segment (all that
    the cleaner may touch), each key's latest record there, at its offset; from the
    active segment on, every record as written. Aborted records in neither."""
    aborted = aborted_offsets(source.data) if partition == 1 else set()
    written = [r for r in orders_records(source.data, partition) if r[0] not in aborted]
    below: dict[bytes | None, Record] = {}
    for record in written:
        if record[0] < active_base:
            below[record[1]] = record
    return sorted(below.values()) + [r for r in written if r[0] >= active_base]
