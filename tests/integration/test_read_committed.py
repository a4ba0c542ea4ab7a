"""Transactions as consumers see them: read_committed reads stop at the last stable
offset and drop aborted records; read_uncommitted reads everything.

Real transactional producers (confluent-kafka, kafka-python, aiokafka) write through
Brook's transaction coordinator, which ends each transaction with COMMIT or ABORT
markers; real consumers (confluent-kafka, kafka-python, aiokafka, kcat) read under
both isolation levels. Raw Fetch and ListOffsets requests check what the broker
answers: the last stable offset, and the aborted transactions of a read_committed
fetch. The `.txnindex` files are decoded by hand here, from Kafka's format.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaProducer
from kio.index import load_request_schema

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode
from brook.protocol.record_batch import Record, build_batch

from .cli import brook
from .clients import (
    aiokafka_consumer,
    aiokafka_poll,
    create_topic,
    kafka_python_consumer,
    kafka_python_poll,
    poll_until,
    produce,
    stored_batches,
)
from .raw_client import RawClient, make, nested, produce_request, topic_id, versions

KCAT = shutil.which("kcat")
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first, last, last stable offset
# Long enough that no transaction times out while a test holds it open.
TXN_TIMEOUT_MS = 600_000


# --- producers -------------------------------------------------------------------------


def txn_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(30)
    return producer


def send_in_txn(producer: Producer, sends: list[tuple[str, int, bytes]], commit: bool) -> None:
    """One transaction of `sends` (topic, partition, value), committed or aborted. The
    records are flushed before an abort, so that they are written and then aborted
    rather than dropped unsent by the client."""
    producer.begin_transaction()
    for topic, partition, value in sends:
        producer.produce(topic, value=value, partition=partition)
    if commit:
        producer.commit_transaction(30)
    else:
        assert producer.flush(30) == 0
        producer.abort_transaction(30)


# --- consumers: (bootstrap, topic, partition, isolation level, count) -> values --------


def confluent_read(bootstrap: str, topic: str, partition: int, level: str, count: int) -> list:
    """To the end of the partition as the isolation level sees it (librdkafka's EOF:
    the last stable offset under read_committed); `count` is only a sanity bound."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
            "isolation.level": level,
        }
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(values) <= count:
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return values
                raise AssertionError(error)
            values.append(message.value())
        raise AssertionError(f"no end of {topic}-{partition} after {values}")
    finally:
        consumer.close()


def kafka_python_read(bootstrap: str, topic: str, partition: int, level: str, count: int) -> list:
    from kafka import TopicPartition as KafkaTopicPartition

    consumer = kafka_python_consumer(bootstrap, isolation_level=level)
    try:
        tp = KafkaTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        return [r.value for r in kafka_python_poll(consumer, count)]
    finally:
        consumer.close()


def aiokafka_read(bootstrap: str, topic: str, partition: int, level: str, count: int) -> list:
    from aiokafka import TopicPartition as AioTopicPartition

    async def read() -> list:
        async with aiokafka_consumer(bootstrap, isolation_level=level) as consumer:
            tp = AioTopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            return [r.value for r in await aiokafka_poll(consumer, count)]

    return asyncio.run(read())


def kcat_read(bootstrap: str, topic: str, partition: int, level: str, count: int) -> list:
    """kcat to the end of the partition (-e: its end under the isolation level)."""
    assert KCAT is not None
    result = subprocess.run(
        [
            *(KCAT, "-b", bootstrap, "-C", "-t", topic, "-p", str(partition)),
            *("-o", "beginning", "-e", "-q", "-J", "-X", f"isolation.level={level}"),
        ],
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    lines = result.stdout.decode().splitlines()
    return [json.loads(line)["payload"].encode() for line in lines if line]


READERS: dict[str, Callable[[str, str, int, str, int], list]] = {
    "confluent-kafka": confluent_read,
    "kafka-python": kafka_python_read,
    "aiokafka": aiokafka_read,
    "kcat": kcat_read,
}


def _reader(name: str) -> Callable[[str, str, int, str, int], list]:
    if name == "kcat" and KCAT is None:
        pytest.skip("kcat is not installed (./test.sh installs Debian's kcat with apt-get)")
    return READERS[name]


# --- raw requests ----------------------------------------------------------------------


def fetch(
    client: RawClient,
    topic: str,
    *,
    version: int = 11,
    isolation_level: int,
    offset: int = 0,
    partition: int = 0,
    ref: Any = None,
) -> Any:
    """One partition's part of a sessionless Fetch response of `version`."""
    request_type = load_request_schema(ApiKey.FETCH, version)
    fetch_partition = make(
        nested(request_type, "FetchPartition"),
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1_000_000,
    )
    request = make(
        request_type,
        cluster_id=None,
        replica_id=-1,
        replica_state=make(nested(request_type, "ReplicaState"), replica_id=-1, replica_epoch=-1)
        if version >= 15
        else None,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=1_000_000,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=(
            make(
                nested(request_type, "FetchTopic"),
                topic=topic,
                topic_id=ref,
                partitions=(fetch_partition,),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    response = client.request(request)
    assert getattr(response, "error_code", 0) == 0  # v7+
    (data,) = response.responses[0].partitions
    assert data.error_code == 0
    return data


def list_latest(client: RawClient, topic: str, isolation_level: int, version: int = 5) -> int:
    request_type = load_request_schema(ApiKey.LIST_OFFSETS, version)
    partition = make(
        nested(request_type, "ListOffsetsPartition"),
        partition_index=0,
        current_leader_epoch=-1,
        timestamp=-1,
    )
    request = make(
        request_type,
        replica_id=-1,
        isolation_level=isolation_level,
        topics=(
            make(nested(request_type, "ListOffsetsTopic"), name=topic, partitions=(partition,)),
        ),
    )
    (result,) = client.request(request).topics[0].partitions
    assert result.error_code == 0
    return int(result.offset)


def aborted(data: Any) -> list[tuple[int, int]] | None:
    if data.aborted_transactions is None:
        return None
    return [(int(t.producer_id), int(t.first_offset)) for t in data.aborted_transactions]


def record_offsets(records: bytes) -> list[tuple[int, int, bool]]:
    """(base offset, last offset, is control) of each batch of a fetched record set."""
    out = []
    position = 0
    while position + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, position)
        attributes, last_delta = struct.unpack_from(">hi", records, position + 21)
        out.append((base, base + last_delta, bool(attributes & 0x20)))
        position += 12 + length
    return out


def txn_index(data_dir: Path, topic: str, partition: int = 0) -> dict[str, list[tuple]]:
    return {
        path.name: [tuple(e) for e in TXN_ENTRY.iter_unpack(path.read_bytes())]
        for path in sorted((data_dir / f"{topic}-{partition}").glob("*.txnindex"))
    }


# --- tests -----------------------------------------------------------------------------


def _write_mixed_transactions(bootstrap: str, topic_a: str, topic_b: str) -> dict:
    """Commits and aborts across three partitions of two topics, with plain records in
    between. Returns {(topic, partition): (committed values, every value)}."""
    create_topic(bootstrap, topic_a, 2)
    create_topic(bootstrap, topic_b, 1)
    places = [(topic_a, 0), (topic_a, 1), (topic_b, 0)]
    producer = txn_producer(bootstrap, f"mixed-{topic_a}")
    written: dict[tuple[str, int], list[tuple[bytes, bool]]] = {p: [] for p in places}

    def txn(tag: str, commit: bool, count: int = 3) -> None:
        sends = [(t, p, f"{tag}-{t[-3:]}{p}-{i}".encode()) for t, p in places for i in range(count)]
        send_in_txn(producer, sends, commit)
        for t, p, value in sends:
            written[(t, p)].append((value, commit))

    txn("c1", True)
    txn("a2", False)
    produce(bootstrap, topic_a, [(None, b"plain-a0")], partition=0)
    written[(topic_a, 0)].append((b"plain-a0", True))
    txn("a3", False, count=2)
    txn("c4", True, count=2)
    producer.flush(30)
    return {
        place: ([v for v, ok in values if ok], [v for v, _ in values])
        for place, values in written.items()
    }


@pytest.mark.parametrize("client", list(READERS))
def test_read_committed_sees_exactly_the_committed_records(brook_broker, topic_name, client):
    read = _reader(client)
    bootstrap = brook_broker.bootstrap
    expected = _write_mixed_transactions(bootstrap, topic_name, topic_name + "-b")
    for (topic, partition), (committed, everything) in expected.items():
        got = read(bootstrap, topic, partition, "read_committed", len(committed))
        assert got == committed, (topic, partition)
        got = read(bootstrap, topic, partition, "read_uncommitted", len(everything))
        assert got == everything, (topic, partition)


def test_fetch_answers_the_aborted_transactions_of_each_version(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    expected = _write_mixed_transactions(bootstrap, topic_name, topic_name + "-b")
    batches = stored_batches(brook_broker.data_dir, topic_name, 0)
    producer_id = next(b.producer_id for b in batches if b.is_transactional)
    mine = [b for b in batches if b.producer_id == producer_id]
    # Each transaction starts with the first data batch after a marker; of c1, a2, a3,
    # c4, the second and third were aborted.
    starts = [
        b.base_offset
        for previous, b in zip([None, *mine], mine, strict=False)
        if not b.is_control and (previous is None or previous.is_control)
    ]
    assert len(starts) == 4
    aborted_starts = starts[1:3]
    log_end = batches[-1].last_offset + 1
    with RawClient(brook_broker.port) as client:
        ref = topic_id(client, topic_name)
        for version in versions(ApiKey.FETCH):
            name_or_id = {"ref": ref} if version >= 13 else {}
            committed = fetch(
                client, topic_name, version=version, isolation_level=READ_COMMITTED, **name_or_id
            )
            assert committed.last_stable_offset == committed.high_watermark == log_end
            assert aborted(committed) == [(producer_id, start) for start in aborted_starts]
            uncommitted = fetch(
                client, topic_name, version=version, isolation_level=READ_UNCOMMITTED, **name_or_id
            )
            assert aborted(uncommitted) is None
            assert record_offsets(uncommitted.records) == record_offsets(committed.records)
            # From after the aborted ranges, none of them is sent again.
            later = fetch(
                client,
                topic_name,
                version=version,
                isolation_level=READ_COMMITTED,
                offset=log_end - 1,
                **name_or_id,
            )
            assert aborted(later) == []
    committed_values = expected[(topic_name, 0)][0]
    assert confluent_read(bootstrap, topic_name, 0, "read_committed", 99) == committed_values


def test_read_committed_stops_at_an_open_transaction_until_it_commits(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"before-0"), (None, b"before-1")])  # 0, 1
    producer = txn_producer(bootstrap, f"open-{topic_name}")
    producer.begin_transaction()
    for i in range(2):
        producer.produce(topic_name, value=b"txn-%d" % i, partition=0)  # 2, 3
    assert producer.flush(30) == 0
    produce(bootstrap, topic_name, [(None, b"after-0"), (None, b"after-1")])  # 4, 5

    with RawClient(brook_broker.port) as client:
        assert list_latest(client, topic_name, READ_COMMITTED) == 2
        assert list_latest(client, topic_name, READ_UNCOMMITTED) == 6
        for version in (2, 8):
            assert list_latest(client, topic_name, READ_COMMITTED, version) == 2
        data = fetch(client, topic_name, isolation_level=READ_COMMITTED)
        assert (data.high_watermark, data.last_stable_offset) == (6, 2)
        assert [last for _, last, _ in record_offsets(data.records)] == [1]
        assert fetch(client, topic_name, isolation_level=READ_COMMITTED, offset=2).records in (
            b"",
            None,
        )
        assert record_offsets(fetch(client, topic_name, isolation_level=READ_UNCOMMITTED).records)

    # The clients' own "latest" under read_committed is the last stable offset too.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed"}
    )
    assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), 15, cached=False)[1] == 2
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    first = poll_until(consumer, lambda out: len(out) >= 2, 20)
    assert [m.value() for m in first] == [b"before-0", b"before-1"]
    # Nothing past the open transaction, however long the consumer keeps fetching.
    assert poll_until(consumer, lambda out: bool(out), 1.5) == []

    producer.commit_transaction(30)  # the marker at 6
    rest = poll_until(consumer, lambda out: len(out) >= 4, 20)
    assert [m.value() for m in rest] == [b"txn-0", b"txn-1", b"after-0", b"after-1"]
    consumer.close()
    with RawClient(brook_broker.port) as client:
        assert list_latest(client, topic_name, READ_COMMITTED) == 7
        data = fetch(client, topic_name, isolation_level=READ_COMMITTED)
        assert (data.high_watermark, data.last_stable_offset) == (7, 7)
        assert aborted(data) == []


def _kafka_python_transactions(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"kp-{topic}")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"kp-commit", partition=0)
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send(topic, b"kp-abort", partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.close()


def _aiokafka_transactions(bootstrap: str, topic: str) -> None:
    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"aio-{topic}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"aio-commit", partition=0)
            await producer.begin_transaction()
            await producer.send_and_wait(topic, b"aio-abort", partition=0)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(run())


@pytest.mark.parametrize(
    ("writer", "prefix"),
    [(_kafka_python_transactions, "kp"), (_aiokafka_transactions, "aio")],
    ids=["kafka-python", "aiokafka"],
)
def test_other_clients_transactional_producers(brook_broker, topic_name, writer, prefix):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    writer(bootstrap, topic_name)
    writer(bootstrap, topic_name)  # the same transactional id again: a new epoch
    committed = [f"{prefix}-commit".encode()] * 2
    everything = [f"{prefix}-commit".encode(), f"{prefix}-abort".encode()] * 2
    assert confluent_read(bootstrap, topic_name, 0, "read_committed", 2) == committed
    assert confluent_read(bootstrap, topic_name, 0, "read_uncommitted", 4) == everything
    entries = next(iter(txn_index(brook_broker.data_dir, topic_name).values()))
    # The aborts: at offsets 2-3 and 6-7 (data, marker), epochs 0 and 1 of one producer.
    assert [(first, last) for _, _, first, last, _ in entries] == [(2, 3), (6, 7)]
    assert [lso for *_, lso in entries] == [4, 8]


def test_state_after_sigkill_is_what_it_was(brokers, topic_name):
    broker = brokers.start()
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic_name, 1, {"segment.bytes": str(16 * 1024)})
    other = txn_producer(bootstrap, f"other-{topic_name}")
    producer = txn_producer(bootstrap, f"kill-{topic_name}")
    big = b"x" * 3000
    committed: list[bytes] = []
    for round_ in range(4):  # several segments, aborts in more than one of them
        values = [big + b"%d" % round_] * 3
        send_in_txn(producer, [(topic_name, 0, v) for v in values], commit=bool(round_ % 2))
        committed += values if round_ % 2 else []
        send_in_txn(other, [(topic_name, 0, b"o%d" % round_)], commit=not round_ % 2)
        committed += [] if round_ % 2 else [b"o%d" % round_]
    # A transaction left open across the crash, and a record after it.
    producer.begin_transaction()
    producer.produce(topic_name, value=b"open", partition=0)
    assert producer.flush(30) == 0
    produce(bootstrap, topic_name, [(None, b"plain")])
    data_dir = broker.data_dir / f"{topic_name}-0"
    bases = sorted(int(path.stem) for path in data_dir.glob("*.log"))
    assert len(bases) >= 3

    def state(port: int) -> tuple:
        with RawClient(port) as client:
            fetches = [
                fetch(client, topic_name, isolation_level=READ_COMMITTED, offset=base)
                for base in bases
            ]
            return (
                list_latest(client, topic_name, READ_COMMITTED),
                list_latest(client, topic_name, READ_UNCOMMITTED),
                [(f.last_stable_offset, f.high_watermark, aborted(f)) for f in fetches],
            )

    before = state(broker.port)
    lso, high_watermark, _ = before
    assert lso < high_watermark, "the open transaction holds the LSO back"
    index_before = txn_index(broker.data_dir, topic_name)
    assert len(index_before) >= 2, "aborts in more than one segment"
    assert sum(len(entries) for entries in index_before.values()) == 4
    assert confluent_read(bootstrap, topic_name, 0, "read_committed", 99) == committed

    broker.kill()
    # The active segment is recovered after a crash: without its txn index, recovery
    # must write it again from the markers (and the open transaction's start).
    active_index = data_dir / f"{bases[-1]:020d}.txnindex"
    assert active_index.name in index_before
    active_index.unlink()
    broker = brokers.restart(broker)
    assert "after an unclean shutdown" in broker.log_text()
    assert state(broker.port) == before
    assert txn_index(broker.data_dir, topic_name) == index_before
    assert confluent_read(bootstrap, topic_name, 0, "read_committed", 99) == committed


def test_dump_log_shows_the_markers_and_txn_index_brook_wrote(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = txn_producer(bootstrap, f"dump-{topic_name}")
    send_in_txn(producer, [(topic_name, 0, b"kept")], commit=True)  # 0, marker 1
    send_in_txn(producer, [(topic_name, 0, b"dropped")], commit=False)  # 2, marker 3
    directory = brook_broker.data_dir / f"{topic_name}-0"
    producer_id = stored_batches(brook_broker.data_dir, topic_name)[0].producer_id
    ran = brook("dump-log", "--deep-iteration", str(directory / f"{0:020d}.log"))
    assert ran.returncode == 0, ran
    markers = [line for line in ran.stdout.splitlines() if "endTxnMarker" in line]
    assert [line.split("endTxnMarker: ")[1] for line in markers] == [
        "COMMIT coordinatorEpoch: 0",
        "ABORT coordinatorEpoch: 0",
    ]
    ran = brook("dump-log", str(directory / f"{0:020d}.txnindex"))
    assert ran.returncode == 0, ran
    assert (
        f"version: 0 producerId: {producer_id} firstOffset: 2 lastOffset: 3 lastStableOffset: 4"
    ) in ran.stdout


def test_a_plain_write_inside_an_open_transaction_is_refused(brook_broker, topic_name):
    """A producer whose transaction is open in a partition may write there only
    transactionally: anything else is INVALID_TXN_STATE, and nothing is written."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = txn_producer(bootstrap, f"mixed-writes-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"in-txn", partition=0)
    assert producer.flush(30) == 0
    (opened,) = stored_batches(brook_broker.data_dir, topic_name)
    now = int(time.time() * 1000)
    plain = build_batch(
        [Record(0, now, None, b"outside")],
        producer_id=opened.producer_id,
        producer_epoch=opened.producer_epoch,
        base_sequence=opened.last_sequence + 1,
    )
    with RawClient(brook_broker.port) as client:
        response = client.request(produce_request(topic_name, 0, plain))
        result = response.responses[0].partition_responses[0]
        assert result.error_code == ErrorCode.invalid_txn_state
        assert list_latest(client, topic_name, READ_UNCOMMITTED) == 1
        assert list_latest(client, topic_name, READ_COMMITTED) == 0
    producer.commit_transaction(30)
    assert confluent_read(bootstrap, topic_name, 0, "read_committed", 1) == [b"in-txn"]
