"""Idempotent producers' state across a SIGKILL (producer snapshots plus the log after
them), DescribeProducers, and producer.id.expiration.ms."""

from __future__ import annotations

import datetime
import struct
import time
from pathlib import Path

import crc32c
import pytest
from confluent_kafka import Producer
from kio.schema.api_versions.v3 import request as api_versions3
from kio.schema.describe_producers.v0 import request as describe0
from kio.schema.init_producer_id.v4 import request as init4

from brook.broker.testing import BrokerProcess, wait_until
from brook.protocol.record_batch import Record, build_batch

from .clients import consume_all, create_topic
from .raw_client import RawClient, produce_request

UNKNOWN_TOPIC_OR_PARTITION = 3
OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def describe(port: int, topic: str, *partitions: int) -> list:
    with RawClient(port) as client:
        response = client.request(
            describe0.DescribeProducersRequest(
                topics=(describe0.TopicRequest(name=topic, partition_indexes=partitions),)
            )
        )
    (topic_response,) = response.topics
    assert topic_response.name == topic
    return list(topic_response.partitions)


def producers(port: int, topic: str, partition: int = 0) -> dict[int, tuple[int, int, int, int]]:
    (answer,) = describe(port, topic, partition)
    assert answer.error_code.value == 0
    return {
        p.producer_id: (p.producer_epoch, p.last_sequence, p.last_timestamp, p.coordinator_epoch)
        for p in answer.active_producers
    }


def init_producer(client: RawClient) -> int:
    response = client.request(
        init4.InitProducerIdRequest(
            transactional_id=None,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    assert response.error_code.value == 0
    return response.producer_id


def raw_produce(
    client: RawClient, topic: str, producer_id: int, sequence: int, count: int, ts: int
) -> tuple[int, int]:
    records = [Record(i, ts, None, b"raw-%d" % (sequence + i)) for i in range(count)]
    batch = build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
    response = client.request(produce_request(topic, 0, batch))
    answer = response.responses[0].partition_responses[0]
    return answer.error_code.value, answer.base_offset


def decode_snapshot(path: Path) -> dict[int, tuple[int, ...]]:
    """Kafka's snapshot schema, version 1, decoded by hand."""
    data = path.read_bytes()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, crc, len(data)) == (1, crc32c.crc32c(data[6:]), 10 + 46 * count)
    return {fields[0]: fields[1:] for fields in struct.iter_unpack(">qhiqiqiq", data[10:])}


def recovery_point(data_dir: Path, topic: str) -> int:
    path = data_dir / "recovery-point-offset-checkpoint"
    if not path.exists():
        return -1
    for line in path.read_text().splitlines()[2:]:
        name, partition, offset = line.split()
        if (name, partition) == (topic, "0"):
            return int(offset)
    return -1


def test_state_after_sigkill_is_what_the_broker_had(tmp_path: Path, topic_name: str) -> None:
    data = tmp_path / "data"
    overrides = {
        "log.segment.bytes": 16384,
        # Recovery points are checkpointed often, so that the snapshots of the rolled
        # segments are below the recovery point when the broker is killed.
        "log.flush.offset.checkpoint.interval.ms": 100,
    }
    broker = BrokerProcess(data, overrides).start()
    producer = None
    restarted = None
    try:
        create_topic(broker.bootstrap, topic_name)
        errors: list = []
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.num.messages": 20,
                "message.timeout.ms": 60000,
            }
        )

        def send(first: int, count: int) -> None:
            for i in range(first, first + count):
                producer.produce(
                    topic_name,
                    value=b"%06d" % i + b"x" * 100,
                    partition=0,
                    on_delivery=lambda err, _msg: err and errors.append(err),
                )
            assert producer.flush(60) == 0
            assert not errors, errors

        send(0, 1500)
        with RawClient(broker.port) as client:
            raw_pid = init_producer(client)
            raw_offsets = [
                raw_produce(client, topic_name, raw_pid, seq, 3, int(time.time() * 1000))
                for seq in range(0, 15, 3)
            ]
        assert all(error == 0 for error, _ in raw_offsets)
        before = producers(broker.port, topic_name)
        assert len(before) == 2 and before[raw_pid][1] == 14
        partition_dir = data / f"{topic_name}-0"
        rolled = sorted(int(p.name[:20]) for p in partition_dir.glob("*.log"))[1:]
        assert len(rolled) >= 3
        # The broker's own checkpoint says the rolled segments are on disk.
        wait_until(
            lambda: recovery_point(data, topic_name) >= rolled[-1],
            what="the recovery point to pass the last roll",
        )
        broker.kill()

        snapshots = sorted(int(p.name[:20]) for p in partition_dir.glob("*.snapshot"))
        assert snapshots and snapshots[-1] == rolled[-1]
        (confluent_pid,) = set(before) - {raw_pid}
        in_snapshot = decode_snapshot(partition_dir / f"{snapshots[-1]:020d}.snapshot")
        epoch, last_sequence, last_offset, *_ = in_snapshot[confluent_pid]
        assert epoch == 0 and 0 < last_sequence < 1500 and last_offset < snapshots[-1]

        restarted = BrokerProcess(data, overrides, port=broker.port).start()
        assert producers(restarted.port, topic_name) == before
        assert f"snapshot file '{partition_dir / f'{snapshots[-1]:020d}.snapshot'}'" in (
            restarted.log_text()
        )
        # The raw producer's last batches, retried, are duplicates: their first offsets.
        with RawClient(restarted.port) as client:
            for seq, (_, offset) in zip(range(9, 15, 3), raw_offsets[3:], strict=True):
                now = int(time.time() * 1000)
                assert raw_produce(client, topic_name, raw_pid, seq, 3, now) == (0, offset)
            assert raw_produce(client, topic_name, raw_pid, 20, 3, now)[0] == (
                OUT_OF_ORDER_SEQUENCE_NUMBER
            )
        # The same confluent producer goes on: no OUT_OF_ORDER_SEQUENCE, no new epoch.
        send(1500, 500)
        after = producers(restarted.port, topic_name)
        assert after[confluent_pid][:2] == (0, 1999)
        values = [
            m.value()[:6]
            for m in consume_all(restarted.bootstrap, topic_name, 2015)
            if not m.value().startswith(b"raw")
        ]
        assert values == [b"%06d" % i for i in range(2000)]
    finally:
        if producer is not None:
            producer.flush(1)
        broker.kill()
        if restarted is not None:
            restarted.stop()


def test_describe_producers(brook_broker, topic_name: str) -> None:
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    with RawClient(brook_broker.port) as client:
        versions = client.request(
            api_versions3.ApiVersionsRequest(
                client_software_name="test", client_software_version="1"
            )
        )
        (entry,) = [k for k in versions.api_keys if k.api_key == 61]
        assert (entry.min_version, entry.max_version) == (0, 0)
        pid = init_producer(client)
        for seq in range(0, 6, 2):
            assert raw_produce(client, topic_name, pid, seq, 2, 1_700_000_000_000 + seq)[0] == 0
    first, second = describe(brook_broker.port, topic_name, 0, 1)
    assert (first.partition_index, first.error_code.value) == (0, 0)
    (state,) = first.active_producers
    assert (
        state.producer_id,
        state.producer_epoch,
        state.last_sequence,
        state.last_timestamp,
        state.coordinator_epoch,
        state.current_txn_start_offset,
    ) == (pid, 0, 5, 1_700_000_000_004, -1, -1)
    assert (second.partition_index, second.error_code.value, second.active_producers) == (
        1,
        0,
        (),
    )
    (missing,) = describe(brook_broker.port, topic_name, 7)
    assert (missing.partition_index, missing.error_code.value) == (7, UNKNOWN_TOPIC_OR_PARTITION)
    assert missing.active_producers == ()
    (unknown,) = describe(brook_broker.port, topic_name + "-nope", 0)
    assert unknown.error_code.value == UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.brook_config(
    producer_id_expiration_ms=1500, producer_id_expiration_check_interval_ms=100
)
def test_idle_producers_expire(brook_broker, topic_name: str) -> None:
    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        idle, busy = init_producer(client), init_producer(client)
        now = int(time.time() * 1000)
        assert raw_produce(client, topic_name, idle, 0, 2, now)[0] == 0
        assert raw_produce(client, topic_name, busy, 0, 2, now)[0] == 0
        assert set(producers(brook_broker.port, topic_name)) == {idle, busy}
        sequence = 2

        def only_busy_left() -> bool:
            nonlocal sequence
            # The busy producer writes on, stamping its batches with the current time.
            stamp = int(time.time() * 1000)
            assert raw_produce(client, topic_name, busy, sequence, 2, stamp)[0] == 0
            sequence += 2
            return set(producers(brook_broker.port, topic_name)) == {busy}

        wait_until(only_busy_left, what="the idle producer to expire")
        # Forgotten: a batch that continues its sequence is out of order.
        assert raw_produce(client, topic_name, idle, 2, 2, int(time.time() * 1000))[0] == (
            OUT_OF_ORDER_SEQUENCE_NUMBER
        )
