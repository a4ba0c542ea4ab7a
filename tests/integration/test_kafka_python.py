"""kafka-python (3.x, pure Python) against a real Brook broker over real sockets.

Consumers use assign() with group_id=None: Brook does not serve consumer groups yet.
"""

from __future__ import annotations

import base64
import time
import uuid
from pathlib import Path
from typing import Any

import kafka.errors as errors
import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.protocol.consumer import OffsetSpec

from brook.protocol.compression import Codec

from .clients import (
    CODECS,
    assert_consumed_as_placed,
    kafka_python_consumer,
    kafka_python_poll,
    kafka_python_producer,
    stored_batches,
)


@pytest.fixture
def admin(brook_broker):
    client = KafkaAdminClient(bootstrap_servers=brook_broker.bootstrap, request_timeout_ms=15_000)
    try:
        yield client
    finally:
        client.close()


def create(admin: KafkaAdminClient, topic: str, partitions: int = 1, **configs: str) -> uuid.UUID:
    """Create a topic and return the topic id the broker gave it."""
    spec = {"num_partitions": partitions, "replication_factor": 1, "configs": configs}
    [created] = admin.create_topics({topic: spec})["topics"]
    return uuid.UUID(created["topic_id"])


def topic_id_on_disk(partition_dir: Path) -> uuid.UUID:
    """The topic id in partition.metadata, which Kafka writes as unpadded URL-safe base64."""
    fields = dict(
        line.split(": ", 1)
        for line in (partition_dir / "partition.metadata").read_text().splitlines()
    )
    return uuid.UUID(bytes=base64.urlsafe_b64decode(fields["topic_id"] + "=="))


def send_all(
    bootstrap: str, topic: str, messages: list[tuple[bytes | None, bytes | None]], **config: Any
) -> list[Any]:
    """Send to partition 0 and return each record's metadata (raises on any error)."""
    producer = kafka_python_producer(bootstrap, **config)
    try:
        futures = [producer.send(topic, key=k, value=v, partition=0) for k, v in messages]
        producer.flush(30)
        return [future.get(10) for future in futures]
    finally:
        producer.close(5)


def read_from(bootstrap: str, topic: str, offset: int, count: int, partition: int = 0) -> list[Any]:
    consumer = kafka_python_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        return kafka_python_poll(consumer, count)
    finally:
        consumer.close()


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_and_consume_every_codec_and_acks(brook_broker, admin, topic_name, codec, acks):
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    # Repetitive values so that every codec actually shrinks them.
    sent = [(b"k%d" % i, b"value-%d-" % i * (i % 9 + 1)) for i in range(250)]
    metadata = send_all(
        bootstrap,
        topic_name,
        sent,
        acks=acks,
        compression_type=None if codec == "none" else codec,
        # All of them in one batch at the flush: kafka-python sends a batch that its codec
        # would not shrink uncompressed, and a busy machine let the default linger (5 ms)
        # pass after the first record, whose batch of one went out uncompressed.
        linger_ms=60_000,
        batch_size=1 << 20,
    )
    if acks != 0:  # with acks=0 the broker says nothing, so there is no offset to check
        assert [m.offset for m in metadata] == list(range(250))
    received = read_from(bootstrap, topic_name, 0, 250)
    assert [(r.key, r.value) for r in received] == sent
    assert [r.offset for r in received] == list(range(250))
    # compression.type=producer: the broker keeps the producer's codec on disk.
    assert {batch.codec for batch in stored_batches(brook_broker.data_dir, topic_name)} == {
        CODECS[codec]
    }


def test_keys_headers_and_nulls(brook_broker, admin, topic_name):
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    producer = kafka_python_producer(bootstrap)
    futures = [
        producer.send(topic_name, key=None, value=b"no key", partition=0),
        producer.send(topic_name, key=b"tombstone", value=None, partition=0),
        producer.send(
            topic_name,
            key=b"h",
            value=b"with headers",
            partition=0,
            headers=[("a", b"1"), ("empty", b""), ("a", b"2"), ("utf8-\u00e9", b"\xff\x00")],
        ),
        producer.send(topic_name, key=b"", value=b"", partition=0),
    ]
    producer.flush(15)
    producer.close(5)
    assert [f.get(5).offset for f in futures] == [0, 1, 2, 3]
    records = read_from(bootstrap, topic_name, 0, 4)
    assert [(r.key, r.value) for r in records] == [
        (None, b"no key"),
        (b"tombstone", None),
        (b"h", b"with headers"),
        (b"", b""),
    ]
    assert records[2].headers == [
        ("a", b"1"),
        ("empty", b""),
        ("a", b"2"),
        ("utf8-\u00e9", b"\xff\x00"),
    ]
    assert records[0].headers == []


def test_assign_seek_beginning_end_and_positions(brook_broker, admin, topic_name):
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    send_all(bootstrap, topic_name, [(None, b"m%d" % i) for i in range(20)])
    tp = TopicPartition(topic_name, 0)
    consumer = kafka_python_consumer(bootstrap)
    try:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 0}
        assert consumer.end_offsets([tp]) == {tp: 20}

        consumer.seek(tp, 7)
        assert [r.value for r in kafka_python_poll(consumer, 13)] == [
            b"m%d" % i for i in range(7, 20)
        ]
        assert consumer.position(tp) == 20

        consumer.seek_to_beginning(tp)
        assert consumer.position(tp) == 0
        assert [r.offset for r in kafka_python_poll(consumer, 20)] == list(range(20))

        consumer.seek_to_end(tp)
        assert consumer.position(tp) == 20
        assert kafka_python_poll(consumer, 1, timeout=1) == []

        # Records produced after seeking to the end are the next ones fetched.
        send_all(bootstrap, topic_name, [(None, b"late-%d" % i) for i in range(3)])
        late = kafka_python_poll(consumer, 3)
        assert [(r.offset, r.value) for r in late] == [(20 + i, b"late-%d" % i) for i in range(3)]
        assert consumer.end_offsets([tp]) == {tp: 23}
    finally:
        consumer.close()


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_seek_out_of_range_resets(brook_broker, admin, topic_name, reset):
    """OFFSET_OUT_OF_RANGE from the broker makes the client apply auto_offset_reset."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    send_all(bootstrap, topic_name, [(None, b"m%d" % i) for i in range(5)])
    tp = TopicPartition(topic_name, 0)
    consumer = kafka_python_consumer(bootstrap, auto_offset_reset=reset)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        if reset == "earliest":
            assert [r.offset for r in kafka_python_poll(consumer, 5)] == list(range(5))
        else:
            assert kafka_python_poll(consumer, 1, timeout=2) == []
            assert consumer.position(tp) == 5
    finally:
        consumer.close()


def test_seek_out_of_range_without_reset_raises(brook_broker, admin, topic_name):
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    send_all(bootstrap, topic_name, [(None, b"only")])
    tp = TopicPartition(topic_name, 0)
    consumer = kafka_python_consumer(bootstrap, auto_offset_reset="none")
    try:
        consumer.assign([tp])
        consumer.seek(tp, 50)
        with pytest.raises(errors.OffsetOutOfRangeError):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                consumer.poll(timeout_ms=200)
    finally:
        consumer.close()


def _send_with_timestamps(bootstrap: str, topic: str, timestamps: list[int], batch: bool) -> None:
    """One batch per record (each flushed alone), or all of them in one batch."""
    producer = kafka_python_producer(bootstrap, linger_ms=500 if batch else 0)
    try:
        for i, ts in enumerate(timestamps):
            future = producer.send(topic, value=b"ts%d" % i, partition=0, timestamp_ms=ts)
            if not batch:
                future.get(10)  # delivered before the next one is even queued
        producer.flush(10)
    finally:
        producer.close(5)


@pytest.mark.parametrize("index_interval", ["1", "4096"])
@pytest.mark.parametrize("one_batch", [False, True], ids=["batch-per-record", "one-batch"])
def test_offsets_for_times_out_of_order(brook_broker, admin, topic_name, index_interval, one_batch):
    """ListOffsets by time: the earliest offset whose timestamp is >= T, in offset order,
    even when timestamps go backwards (within a batch or across batches)."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, **{"index.interval.bytes": index_interval})
    base = int(time.time() * 1000) - 600_000
    relative = [5_000, 1_000, 3_000, 7_000, 2_000, 6_000]
    _send_with_timestamps(bootstrap, topic_name, [base + r for r in relative], one_batch)
    expected_batches = 1 if one_batch else len(relative)
    assert len(stored_batches(brook_broker.data_dir, topic_name)) == expected_batches

    tp = TopicPartition(topic_name, 0)
    consumer = kafka_python_consumer(bootstrap)
    try:
        cases = {
            0: (0, 5_000),  # before everything: the first record
            2_500: (0, 5_000),  # offset 0 already reaches 2.5 s, though later ones are older
            5_000: (0, 5_000),
            5_001: (3, 7_000),  # 6 s at offset 5 comes after 7 s at offset 3
            6_500: (3, 7_000),
            7_000: (3, 7_000),
        }
        for target, (offset, ts) in cases.items():
            found = consumer.offsets_for_times({tp: base + target})[tp]
            assert found is not None, target
            assert (found.offset, found.timestamp) == (offset, base + ts), target
        assert consumer.offsets_for_times({tp: base + 7_001}) == {tp: None}
        # The special specs of ListOffsets v7/v8, through the admin client.
        specs = {
            OffsetSpec.MAX_TIMESTAMP: (3, base + 7_000),  # the record with the largest one
            OffsetSpec.EARLIEST: (0, -1),
            OffsetSpec.EARLIEST_LOCAL: (0, -1),
            OffsetSpec.LATEST: (len(relative), -1),
        }
        for spec, expected in specs.items():
            found = admin.list_partition_offsets({tp: spec})[tp]
            assert (found.offset, found.timestamp) == expected, spec.name
        # The consumer reads back the timestamps it was given, CreateTime.
        records = read_from(bootstrap, topic_name, 0, len(relative))
        assert [r.timestamp - base for r in records] == relative
        assert {r.timestamp_type for r in records} == {0}
    finally:
        consumer.close()


def _session_epochs(broker: Any) -> list[int]:
    """Epochs of the broker's open fetch sessions (read on the broker's own loop)."""
    return broker.call(lambda: [s.epoch for s in broker.broker.fetch_sessions.sessions.values()])


def test_fetch_session_follows_assignment_changes(brook_broker, admin, topic_name):
    """kafka-python fetches through an incremental session (KIP-227): partitions that are
    unassigned are forgotten, new ones added, and idle partitions left out, without
    losing or repeating a record."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, partitions=3)
    p0, p1, p2 = (TopicPartition(topic_name, p) for p in range(3))
    producer = kafka_python_producer(bootstrap)

    def produce(partition: int, first: int, count: int) -> None:
        futures = [
            producer.send(topic_name, value=b"%d-%d" % (partition, i), partition=partition)
            for i in range(first, first + count)
        ]
        for future in futures:
            future.get(10)

    def seen(records: list[Any]) -> dict[int, list[bytes]]:
        out: dict[int, list[bytes]] = {}
        for record in records:
            out.setdefault(record.partition, []).append(record.value)
        return out

    consumer = kafka_python_consumer(bootstrap)
    try:
        for partition in range(3):
            produce(partition, 0, 5)
        consumer.assign([p0, p1])
        consumer.seek_to_beginning(p0, p1)
        first = seen(kafka_python_poll(consumer, 10))
        assert first == {p: [b"%d-%d" % (p, i) for i in range(5)] for p in (0, 1)}
        # Idle polls: incremental fetches on the open session.
        assert kafka_python_poll(consumer, 1, timeout=1) == []
        epochs = _session_epochs(brook_broker)
        assert epochs and max(epochs) > 2, "kafka-python did not use an incremental session"

        consumer.assign([p1, p2])  # p0 forgotten, p2 added
        consumer.seek(p1, 5)
        consumer.seek(p2, 0)
        for partition in range(3):
            produce(partition, 5, 3)
        second = seen(kafka_python_poll(consumer, 11))
        assert second == {
            1: [b"1-%d" % i for i in range(5, 8)],
            2: [b"2-%d" % i for i in range(8)],
        }
        # Only p2 gets new data; p1, idle, stays in the session and still works after.
        produce(2, 8, 2)
        assert seen(kafka_python_poll(consumer, 2)) == {2: [b"2-8", b"2-9"]}
        produce(1, 8, 1)
        assert seen(kafka_python_poll(consumer, 1)) == {1: [b"1-8"]}
        assert kafka_python_poll(consumer, 1, timeout=1) == []
    finally:
        consumer.close()
        producer.close(5)


def test_log_append_time_topic(brook_broker, admin, topic_name):
    """With LogAppendTime the broker stamps the batch and reports the stamp to the producer."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, **{"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    old = before - 3_600_000
    producer = kafka_python_producer(bootstrap)
    future = producer.send(topic_name, value=b"stamped", partition=0, timestamp_ms=old)
    producer.flush(10)
    producer.close(5)
    after = int(time.time() * 1000)
    [record] = read_from(bootstrap, topic_name, 0, 1)
    assert record.timestamp_type == 1
    assert before <= record.timestamp <= after
    assert stored_batches(brook_broker.data_dir, topic_name)[0].is_log_append_time
    # The produce response carries the append time (RecordMetadata.timestamp uses it).
    assert future.get(5).timestamp == record.timestamp


def test_timestamp_far_in_the_future_is_rejected(brook_broker, admin, topic_name):
    """KIP-937: message.timestamp.after.max.ms defaults to one hour; a later timestamp
    fails the whole batch with INVALID_TIMESTAMP and nothing is stored."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    producer = kafka_python_producer(bootstrap)
    try:
        future = producer.send(
            topic_name,
            value=b"from the future",
            partition=0,
            timestamp_ms=int(time.time() * 1000) + 2 * 3_600_000,
        )
        with pytest.raises(errors.InvalidTimestampError):
            future.get(15)
        # A timestamp within the hour is fine.
        in_range = int(time.time() * 1000) + 60_000
        soon = producer.send(topic_name, value=b"soon", partition=0, timestamp_ms=in_range)
        assert soon.get(15).offset == 0
    finally:
        producer.close(5)


def test_admin_create_delete_partitions_and_errors(brook_broker, admin, topic_name):
    topic_id = create(admin, topic_name, partitions=2)
    assert topic_name in admin.list_topics()
    [described] = admin.describe_topics([topic_name])
    assert described["topic_id"] == str(topic_id)
    assert topic_id_on_disk(brook_broker.data_dir / f"{topic_name}-1") == topic_id
    with pytest.raises(errors.TopicAlreadyExistsError):
        create(admin, topic_name)
    with pytest.raises(errors.InvalidReplicationFactorError):
        admin.create_topics({topic_name + "-rf": {"num_partitions": 1, "replication_factor": 3}})
    with pytest.raises(errors.InvalidPartitionsError):
        admin.create_topics({topic_name + "-np": {"num_partitions": 0, "replication_factor": 1}})
    with pytest.raises(errors.InvalidTopicError):
        create(admin, "bad name!")
    with pytest.raises(errors.InvalidConfigurationError):
        create(admin, topic_name + "-cfg", **{"segment.bytes": "not-a-number"})
    for failed in ("-rf", "-np", "-cfg"):
        assert topic_name + failed not in admin.list_topics()

    admin.create_partitions({topic_name: 5})
    [described] = admin.describe_topics([topic_name])
    assert sorted(p["partition_index"] for p in described["partitions"]) == list(range(5))
    assert {p["leader_id"] for p in described["partitions"]} == {0}
    # Shrinking, or asking for the current count, is refused.
    with pytest.raises(errors.InvalidPartitionsError):
        admin.create_partitions({topic_name: 3})
    with pytest.raises(errors.InvalidPartitionsError):
        admin.create_partitions({topic_name: 5})
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.create_partitions({topic_name + "-missing": 2})

    # A new partition takes writes at once.
    producer = kafka_python_producer(brook_broker.bootstrap)
    assert producer.send(topic_name, value=b"p4", partition=4).get(10).offset == 0
    producer.close(5)
    assert topic_id_on_disk(brook_broker.data_dir / f"{topic_name}-4") == topic_id

    # DeleteTopics v6 names topics by id.
    with pytest.raises(errors.UnknownTopicIdError):
        admin.delete_topics([uuid.uuid4()])
    admin.delete_topics([topic_id])
    assert topic_name not in admin.list_topics()
    assert not any(p.name.startswith(f"{topic_name}-") for p in brook_broker.data_dir.iterdir())
    with pytest.raises(errors.UnknownTopicOrPartitionError):
        admin.delete_topics([topic_name])


@pytest.mark.brook_config(num_partitions=3)
def test_auto_create_on_produce(brook_broker, topic_name):
    producer = kafka_python_producer(brook_broker.bootstrap)
    try:
        metadata = producer.send(topic_name, value=b"first").get(15)
        assert producer.partitions_for(topic_name) == {0, 1, 2}
    finally:
        producer.close(5)
    [record] = read_from(brook_broker.bootstrap, topic_name, 0, 1, partition=metadata.partition)
    assert record.value == b"first"


def test_message_near_limit_accepted_and_over_limit_rejected(brook_broker, admin, topic_name):
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, **{"max.message.bytes": "20000"})
    # max_request_size high so that the client does not refuse the record itself.
    producer = kafka_python_producer(bootstrap, max_request_size=10_000_000)
    try:
        assert producer.send(topic_name, value=b"x" * 19_800, partition=0).get(10).offset == 0
        too_big = producer.send(topic_name, value=b"y" * 30_000, partition=0)
        with pytest.raises(errors.MessageSizeTooLargeError):
            too_big.get(15)
    finally:
        producer.close(5)
    consumer = kafka_python_consumer(bootstrap)
    tp = TopicPartition(topic_name, 0)
    try:
        assert consumer.end_offsets([tp]) == {tp: 1}
    finally:
        consumer.close()
    assert [len(r.value) for r in read_from(bootstrap, topic_name, 0, 1)] == [19_800]


def test_default_broker_limit_about_one_megabyte(brook_broker, admin, topic_name):
    """message.max.bytes=1048588: a 1,000,000-byte record passes, 1,100,000 does not."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    producer = kafka_python_producer(bootstrap, max_request_size=10_000_000)
    try:
        big = bytes(range(256)) * 3906 + b"tail"  # 1,000,000 bytes that do not repeat trivially
        assert producer.send(topic_name, value=big, partition=0).get(15).offset == 0
        with pytest.raises(errors.MessageSizeTooLargeError):
            producer.send(topic_name, value=b"z" * 1_100_000, partition=0).get(15)
    finally:
        producer.close(5)
    # One record larger than max_partition_fetch_bytes still comes back whole (KIP-74).
    consumer = kafka_python_consumer(bootstrap, max_partition_fetch_bytes=64 * 1024)
    try:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        [record] = kafka_python_poll(consumer, 1)
        assert record.value == big
    finally:
        consumer.close()


def test_oversized_batch_is_split_by_the_client(brook_broker, admin, topic_name):
    """MESSAGE_TOO_LARGE on a multi-record batch makes kafka-python split it and retry,
    which only works if the broker answers with that exact error."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, **{"max.message.bytes": "20000"})
    producer = kafka_python_producer(
        bootstrap, max_request_size=10_000_000, batch_size=1_000_000, linger_ms=200
    )
    try:
        futures = [
            producer.send(topic_name, value=bytes([i]) * 7_000, partition=0) for i in range(6)
        ]
        # No flush(): kafka-python 3.0's flush() gives up on a batch it has split.
        assert sorted(f.get(20).offset for f in futures) == list(range(6))
    finally:
        producer.close(5)
    batches = stored_batches(brook_broker.data_dir, topic_name)
    assert len(batches) > 1
    assert all(batch.size <= 20_000 for batch in batches)
    assert [r.value for r in read_from(bootstrap, topic_name, 0, 6)] == [
        bytes([i]) * 7_000 for i in range(6)
    ]


def test_many_partitions_keyed(brook_broker, admin, topic_name):
    """Keys spread over 32 partitions; each partition keeps its records in order."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, partitions=32)
    producer = kafka_python_producer(bootstrap)
    sent: list[tuple[bytes, bytes, Any]] = []
    for i in range(640):
        key = b"key-%d" % (i % 97)
        value = b"%d" % i
        sent.append((key, value, producer.send(topic_name, key=key, value=value)))
    producer.flush(30)
    producer.close(5)
    placed = {(k, v): f.get(5) for k, v, f in sent}
    assert len({m.partition for m in placed.values()}) > 16

    consumer = kafka_python_consumer(bootstrap)
    try:
        partitions = [TopicPartition(topic_name, p) for p in range(32)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records = kafka_python_poll(consumer, 640, timeout=30)
        assert consumer.end_offsets(partitions) == {
            tp: sum(1 for m in placed.values() if m.partition == tp.partition) for tp in partitions
        }
    finally:
        consumer.close()
    assert_consumed_as_placed(records, placed, 32)
    # One key, one partition (the default partitioner hashes the key).
    assert all(len({r.partition for r in records if r.key == k}) == 1 for k, _, _ in sent)


def test_small_fetch_limits_still_deliver_everything(brook_broker, admin, topic_name):
    """fetch_max_bytes and max_partition_fetch_bytes far below the data: each fetch
    returns a little (at least one batch), and the consumer still gets every record of
    every partition, in order."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, partitions=6)
    producer = kafka_python_producer(bootstrap, linger_ms=0, batch_size=1024)
    futures = [
        producer.send(topic_name, value=b"%d-%03d-" % (p, i) + b"v" * 250, partition=p)
        for i in range(40)
        for p in range(6)
    ]
    for future in futures:
        future.get(15)
    producer.close(5)

    partitions = [TopicPartition(topic_name, p) for p in range(6)]
    consumer = kafka_python_consumer(bootstrap, fetch_max_bytes=1500, max_partition_fetch_bytes=700)
    try:
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records = kafka_python_poll(consumer, 240, timeout=40)
    finally:
        consumer.close()
    for p in range(6):
        mine = [r for r in records if r.partition == p]
        assert [r.offset for r in mine] == list(range(40)), p
        assert [r.value[: len(b"0-000-")] for r in mine] == [
            b"%d-%03d-" % (p, i) for i in range(40)
        ]


def test_reads_and_time_lookups_across_many_segments(brook_broker, admin, topic_name):
    """A partition rolled into many small segments reads back whole, and offsets and
    timestamps resolve in whichever segment holds them."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name, **{"segment.bytes": "4096", "index.interval.bytes": "512"})
    base = int(time.time() * 1000) - 600_000
    producer = kafka_python_producer(bootstrap, linger_ms=0)
    for i in range(150):
        value = b"seg-%03d-" % i + b"s" * 80
        producer.send(topic_name, value=value, partition=0, timestamp_ms=base + i * 10).get(10)
    producer.close(5)
    segments = sorted((brook_broker.data_dir / f"{topic_name}-0").glob("*.log"))
    assert len(segments) > 4

    tp = TopicPartition(topic_name, 0)
    consumer = kafka_python_consumer(bootstrap)
    try:
        consumer.assign([tp])
        assert consumer.end_offsets([tp]) == {tp: 150}
        for target in (0, 37, 149):  # in the first, a middle and the last segment
            found = consumer.offsets_for_times({tp: base + target * 10 - 5})[tp]
            assert (found.offset, found.timestamp) == (target, base + target * 10)
        consumer.seek(tp, 97)
        middle = kafka_python_poll(consumer, 53)
        assert [r.offset for r in middle] == list(range(97, 150))
        consumer.seek_to_beginning(tp)
        everything = kafka_python_poll(consumer, 150)
        assert [r.value[:8] for r in everything] == [b"seg-%03d-" % i for i in range(150)]
    finally:
        consumer.close()


def test_one_huge_batch_of_small_records(brook_broker, admin, topic_name):
    """20,000 small records in a few large zstd batches are validated, stored as sent,
    and read back one by one."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    producer = kafka_python_producer(
        bootstrap,
        compression_type="zstd",
        batch_size=900_000,
        linger_ms=500,
        max_request_size=5_000_000,
    )
    try:
        futures = [
            producer.send(topic_name, key=b"%d" % (i % 10), value=b"r%05d" % i, partition=0)
            for i in range(20_000)
        ]
        offsets = [future.get(30).offset for future in futures]
    finally:
        producer.close(5)
    assert offsets == list(range(20_000))
    batches = stored_batches(brook_broker.data_dir, topic_name)
    # Once, on a loaded machine, the log held an uncompressed first batch of 58 records
    # among the zstd ones, as kafka-python had sent it (Brook stores batches as sent).
    codecs = {b.codec for b in batches}
    assert len(batches) < 20 and Codec.ZSTD in codecs and codecs <= {Codec.ZSTD, Codec.NONE}
    assert sum(b.record_count for b in batches) == 20_000
    records = read_from(bootstrap, topic_name, 0, 20_000)
    assert [r.value for r in records] == [b"r%05d" % i for i in range(20_000)]


def test_delete_records_moves_the_log_start(brook_broker, admin, topic_name):
    """DeleteRecords: the low watermark moves, reads below it are out of range, and
    -1 means "up to the high watermark"."""
    bootstrap = brook_broker.bootstrap
    create(admin, topic_name)
    send_all(bootstrap, topic_name, [(None, b"d%d" % i) for i in range(10)])
    tp = TopicPartition(topic_name, 0)

    assert admin.delete_records({tp: 4})[tp]["low_watermark"] == 4
    # Asking for less than what is already gone changes nothing.
    assert admin.delete_records({tp: 2})[tp]["low_watermark"] == 4
    with pytest.raises(errors.OffsetOutOfRangeError):
        admin.delete_records({tp: 11})

    consumer = kafka_python_consumer(bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign([tp])
        assert consumer.beginning_offsets([tp]) == {tp: 4}
        consumer.seek(tp, 1)  # below the log start: reset to the earliest, which is 4
        assert [r.value for r in kafka_python_poll(consumer, 6)] == [
            b"d%d" % i for i in range(4, 10)
        ]
    finally:
        consumer.close()

    assert admin.delete_records({tp: -1})[tp]["low_watermark"] == 10
    consumer = kafka_python_consumer(bootstrap)
    try:
        assert consumer.beginning_offsets([tp]) == consumer.end_offsets([tp]) == {tp: 10}
    finally:
        consumer.close()
