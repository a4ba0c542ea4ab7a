"""aiokafka against a real Brook broker over real sockets.

aiokafka speaks only non-flexible versions (Produce <= 8, Fetch <= 11), so these tests
cover the older encodings that librdkafka no longer uses. Each test runs its body with
asyncio.run; consumers use assign() with group_id=None since Brook serves no groups yet.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka import errors as aioerrors
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete

from brook.protocol.compression import Codec

from .clients import (
    CODECS,
    aiokafka_consumer,
    aiokafka_poll,
    aiokafka_producer,
    assert_consumed_as_placed,
    stored_batches,
)


@asynccontextmanager
async def admin_client(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


def topic_errors(response: Any) -> dict[str, type[Exception] | None]:
    """CreateTopics/DeleteTopics answer per topic: aiokafka's error class, None if fine.

    aiokafka's admin client returns these responses without raising, so the tests map
    the codes to classes themselves.
    """
    entries = getattr(response, "topic_errors", None)
    if entries is None:  # DeleteTopics
        entries = response.topic_error_codes
    out: dict[str, type[Exception] | None] = {}
    for name, code, *_ in entries:
        out[name] = None if code == 0 else aioerrors.for_code(code)
    return out


async def create(bootstrap: str, topic: str, partitions: int = 1, **configs: str) -> None:
    async with admin_client(bootstrap) as admin:
        response = await admin.create_topics(
            [NewTopic(topic, partitions, 1, topic_configs=configs)]
        )
    assert topic_errors(response) == {topic: None}


async def produce_each(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Produce `values` to partition 0, each send acknowledged before the next."""
    async with aiokafka_producer(bootstrap) as producer:
        for value in values:
            await producer.send_and_wait(topic, value=value, partition=0)


async def read_from(
    bootstrap: str, topic: str, offset: int, count: int, partition: int = 0, **config: Any
) -> list[Any]:
    async with aiokafka_consumer(bootstrap, **config) as consumer:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        return await aiokafka_poll(consumer, count)


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_and_consume_every_codec_and_acks(brook_broker, topic_name, codec, acks):
    bootstrap = brook_broker.bootstrap
    sent = [(b"k%d" % i, b"value-%d-" % i * (i % 9 + 1)) for i in range(250)]

    async def scenario() -> tuple[list[Any], list[Any]]:
        await create(bootstrap, topic_name)
        compression = None if codec == "none" else codec
        async with aiokafka_producer(
            bootstrap, acks=acks, compression_type=compression, linger_ms=5
        ) as producer:
            futures = [
                await producer.send(topic_name, key=k, value=v, partition=0) for k, v in sent
            ]
            metadata = await asyncio.gather(*futures)
        return metadata, await read_from(bootstrap, topic_name, 0, len(sent))

    metadata, received = asyncio.run(scenario())
    if acks != 0:  # with acks=0 the broker says nothing, so there is no offset to check
        assert [m.offset for m in metadata] == list(range(250))
    assert [(r.key, r.value) for r in received] == sent
    assert [r.offset for r in received] == list(range(250))
    # compression.type=producer: the broker keeps the producer's codec on disk.
    assert {batch.codec for batch in stored_batches(brook_broker.data_dir, topic_name)} == {
        CODECS[codec]
    }


def test_keys_headers_and_nulls(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    headers = [("a", b"1"), ("empty", b""), ("a", b"2"), ("utf8-\u00e9", b"\xff\x00")]

    async def scenario() -> list[Any]:
        await create(bootstrap, topic_name)
        async with aiokafka_producer(bootstrap) as producer:
            sends = [
                producer.send_and_wait(topic_name, key=None, value=b"no key", partition=0),
                producer.send_and_wait(topic_name, key=b"tombstone", value=None, partition=0),
                producer.send_and_wait(
                    topic_name, key=b"h", value=b"with headers", partition=0, headers=headers
                ),
                producer.send_and_wait(topic_name, key=b"", value=b"", partition=0),
            ]
            offsets = [(await send).offset for send in sends]
        assert offsets == [0, 1, 2, 3]
        return await read_from(bootstrap, topic_name, 0, 4)

    records = asyncio.run(scenario())
    assert [(r.key, r.value) for r in records] == [
        (None, b"no key"),
        (b"tombstone", None),
        (b"h", b"with headers"),
        (b"", b""),
    ]
    assert list(records[2].headers) == headers
    assert list(records[0].headers) == []


def test_assign_seek_beginning_end_and_positions(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    tp = TopicPartition(topic_name, 0)

    async def produce_values(values: list[bytes]) -> None:
        async with aiokafka_producer(bootstrap, linger_ms=5) as producer:
            futures = [await producer.send(topic_name, value=v, partition=0) for v in values]
            await asyncio.gather(*futures)

    async def scenario() -> None:
        await create(bootstrap, topic_name)
        await produce_values([b"m%d" % i for i in range(20)])
        async with aiokafka_consumer(bootstrap) as consumer:
            consumer.assign([tp])
            assert await consumer.beginning_offsets([tp]) == {tp: 0}
            assert await consumer.end_offsets([tp]) == {tp: 20}

            consumer.seek(tp, 7)
            records = await aiokafka_poll(consumer, 13)
            assert [r.value for r in records] == [b"m%d" % i for i in range(7, 20)]
            assert await consumer.position(tp) == 20
            assert consumer.highwater(tp) == 20  # from the fetch response

            await consumer.seek_to_beginning(tp)
            assert await consumer.position(tp) == 0
            assert [r.offset for r in await aiokafka_poll(consumer, 20)] == list(range(20))

            await consumer.seek_to_end(tp)
            assert await consumer.position(tp) == 20
            assert await aiokafka_poll(consumer, 1, timeout=1) == []

            # Records produced after seeking to the end are the next ones fetched.
            await produce_values([b"late-%d" % i for i in range(3)])
            late = await aiokafka_poll(consumer, 3)
            assert [(r.offset, r.value) for r in late] == [
                (20 + i, b"late-%d" % i) for i in range(3)
            ]
            assert await consumer.end_offsets([tp]) == {tp: 23}

    asyncio.run(scenario())


def test_read_committed_without_transactions_sees_everything(brook_broker, topic_name):
    """With no transaction open the last stable offset is the high watermark."""
    bootstrap = brook_broker.bootstrap
    tp = TopicPartition(topic_name, 0)

    async def scenario() -> None:
        await create(bootstrap, topic_name)
        await produce_each(bootstrap, topic_name, [b"c%d" % i for i in range(5)])
        async with aiokafka_consumer(bootstrap, isolation_level="read_committed") as consumer:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            records = await aiokafka_poll(consumer, 5)
            assert [r.value for r in records] == [b"c%d" % i for i in range(5)]
            assert consumer.last_stable_offset(tp) == 5
            assert await consumer.end_offsets([tp]) == {tp: 5}

    asyncio.run(scenario())


def test_out_of_range_offset_resets_or_raises(brook_broker, topic_name):
    """OFFSET_OUT_OF_RANGE from the broker: reset to earliest, or an error with 'none'."""
    bootstrap = brook_broker.bootstrap
    tp = TopicPartition(topic_name, 0)

    async def scenario() -> None:
        await create(bootstrap, topic_name)
        await produce_each(bootstrap, topic_name, [b"m%d" % i for i in range(5)])
        async with aiokafka_consumer(bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 1000)
            assert [r.offset for r in await aiokafka_poll(consumer, 5)] == list(range(5))
        async with aiokafka_consumer(bootstrap, auto_offset_reset="none") as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 1000)
            with pytest.raises(aioerrors.OffsetOutOfRangeError):
                await aiokafka_poll(consumer, 1, timeout=15)

    asyncio.run(scenario())


@pytest.mark.parametrize("one_batch", [False, True], ids=["batch-per-record", "one-batch"])
def test_offsets_for_times_out_of_order(brook_broker, topic_name, one_batch):
    """ListOffsets by time: the earliest offset whose timestamp is >= T, in offset order,
    even when timestamps go backwards (within a batch or across batches)."""
    bootstrap = brook_broker.bootstrap
    base = int(time.time() * 1000) - 600_000
    relative = [5_000, 1_000, 3_000, 7_000, 2_000, 6_000]
    tp = TopicPartition(topic_name, 0)

    async def produce() -> None:
        async with aiokafka_producer(bootstrap) as producer:
            if one_batch:
                batch = producer.create_batch()
                for i, ts in enumerate(relative):
                    assert batch.append(key=None, value=b"ts%d" % i, timestamp=base + ts)
                batch.close()
                await (await producer.send_batch(batch, topic_name, partition=0))
            else:
                for i, ts in enumerate(relative):
                    await producer.send_and_wait(
                        topic_name, value=b"ts%d" % i, partition=0, timestamp_ms=base + ts
                    )

    async def scenario() -> list[Any]:
        # index.interval.bytes=1 puts every batch in the time index.
        await create(bootstrap, topic_name, **{"index.interval.bytes": "1"})
        await produce()
        async with aiokafka_consumer(bootstrap) as consumer:
            cases = {
                0: (0, 5_000),  # before everything: the first record
                2_500: (0, 5_000),  # offset 0 already reaches 2.5 s, though later ones are older
                5_000: (0, 5_000),
                5_001: (3, 7_000),  # 6 s at offset 5 comes after 7 s at offset 3
                7_000: (3, 7_000),
            }
            for target, (offset, ts) in cases.items():
                found = (await consumer.offsets_for_times({tp: base + target}))[tp]
                assert found is not None, target
                assert (found.offset, found.timestamp) == (offset, base + ts), target
            assert await consumer.offsets_for_times({tp: base + 7_001}) == {tp: None}
        return await read_from(bootstrap, topic_name, 0, len(relative))

    records = asyncio.run(scenario())
    assert [r.timestamp - base for r in records] == relative
    assert len(stored_batches(brook_broker.data_dir, topic_name)) == (
        1 if one_batch else len(relative)
    )


def test_send_batch_is_stored_as_one_batch(brook_broker, topic_name):
    """A batch built by the client keeps its records together, with contiguous offsets."""
    bootstrap = brook_broker.bootstrap

    async def scenario() -> Any:
        await create(bootstrap, topic_name)
        async with aiokafka_producer(bootstrap, compression_type="gzip") as producer:
            await producer.send_and_wait(topic_name, value=b"before", partition=0)
            batch = producer.create_batch()
            for i in range(40):
                assert batch.append(key=b"%d" % i, value=b"batched-%d" % i, timestamp=None)
            batch.close()
            metadata = await (await producer.send_batch(batch, topic_name, partition=0))
        records = await read_from(bootstrap, topic_name, 0, 41)
        assert [r.value for r in records[1:]] == [b"batched-%d" % i for i in range(40)]
        return metadata

    metadata = asyncio.run(scenario())
    assert metadata.offset == 1
    batches = stored_batches(brook_broker.data_dir, topic_name)
    assert [(b.base_offset, b.record_count) for b in batches] == [(0, 1), (1, 40)]
    assert batches[1].codec == Codec.GZIP


def test_admin_create_delete_partitions_and_errors(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    data_dir = brook_broker.data_dir

    async def scenario() -> None:
        async with admin_client(bootstrap) as admin:
            created = await admin.create_topics([NewTopic(topic_name, 2, 1)])
            assert topic_errors(created) == {topic_name: None}
            assert topic_name in await admin.list_topics()

            again = await admin.create_topics([NewTopic(topic_name, 2, 1)])
            assert topic_errors(again) == {topic_name: aioerrors.TopicAlreadyExistsError}
            bad_rf = await admin.create_topics([NewTopic(topic_name + "-rf", 1, 3)])
            assert topic_errors(bad_rf) == {
                topic_name + "-rf": aioerrors.InvalidReplicationFactorError
            }
            bad_config = await admin.create_topics(
                [NewTopic(topic_name + "-cfg", 1, 1, topic_configs={"cleanup.policy": "nope"})]
            )
            assert topic_errors(bad_config) == {
                topic_name + "-cfg": aioerrors.InvalidConfigurationError
            }
            assert topic_name + "-rf" not in await admin.list_topics()

            await admin.create_partitions({topic_name: NewPartitions(6)})
            [described] = await admin.describe_topics([topic_name])
            assert sorted(p["partition"] for p in described["partitions"]) == list(range(6))
            with pytest.raises(aioerrors.InvalidPartitionsError):
                await admin.create_partitions({topic_name: NewPartitions(4)})

        # A new partition takes writes at once.
        async with aiokafka_producer(bootstrap) as producer:
            metadata = await producer.send_and_wait(topic_name, value=b"p5", partition=5)
            assert (metadata.partition, metadata.offset) == (5, 0)

        async with admin_client(bootstrap) as admin:
            deleted = await admin.delete_topics([topic_name])
            assert topic_errors(deleted) == {topic_name: None}
            assert topic_name not in await admin.list_topics()
            missing = await admin.delete_topics([topic_name])
            assert topic_errors(missing) == {topic_name: aioerrors.UnknownTopicOrPartitionError}

    asyncio.run(scenario())
    assert not any(p.name.startswith(f"{topic_name}-") for p in data_dir.iterdir())


@pytest.mark.brook_config(num_partitions=3)
def test_auto_create_on_produce(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap

    async def scenario() -> None:
        async with aiokafka_producer(bootstrap) as producer:
            metadata = await producer.send_and_wait(topic_name, value=b"first")
            assert await producer.partitions_for(topic_name) == {0, 1, 2}
        [record] = await read_from(bootstrap, topic_name, 0, 1, partition=metadata.partition)
        assert record.value == b"first"

    asyncio.run(scenario())


def test_message_near_limit_accepted_and_over_limit_rejected(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap

    async def scenario() -> None:
        await create(bootstrap, topic_name, **{"max.message.bytes": "20000"})
        # max_request_size high so that the client does not refuse the record itself.
        async with aiokafka_producer(bootstrap, max_request_size=10_000_000) as producer:
            near = await producer.send_and_wait(topic_name, value=b"x" * 19_800, partition=0)
            assert near.offset == 0
            with pytest.raises(aioerrors.MessageSizeTooLargeError):
                await producer.send_and_wait(topic_name, value=b"y" * 30_000, partition=0)
        tp = TopicPartition(topic_name, 0)
        async with aiokafka_consumer(bootstrap) as consumer:
            assert await consumer.end_offsets([tp]) == {tp: 1}
        records = await read_from(bootstrap, topic_name, 0, 1)
        assert [len(r.value) for r in records] == [19_800]

    asyncio.run(scenario())


def test_default_broker_limit_about_one_megabyte(brook_broker, topic_name):
    """message.max.bytes=1048588: a 1,000,000-byte record passes, 1,100,000 does not; the
    big one comes back whole even past max_partition_fetch_bytes (KIP-74)."""
    bootstrap = brook_broker.bootstrap
    big = bytes(range(256)) * 3906 + b"tail"

    async def scenario() -> None:
        await create(bootstrap, topic_name)
        async with aiokafka_producer(bootstrap, max_request_size=10_000_000) as producer:
            assert (await producer.send_and_wait(topic_name, value=big, partition=0)).offset == 0
            with pytest.raises(aioerrors.MessageSizeTooLargeError):
                await producer.send_and_wait(topic_name, value=b"z" * 1_100_000, partition=0)
        records = await read_from(bootstrap, topic_name, 0, 1, max_partition_fetch_bytes=64 * 1024)
        assert [r.value for r in records] == [big]

    asyncio.run(scenario())


def test_many_partitions_keyed(brook_broker, topic_name):
    """Keys spread over 32 partitions; each partition keeps its records in order."""
    bootstrap = brook_broker.bootstrap
    partitions = [TopicPartition(topic_name, p) for p in range(32)]

    async def scenario() -> tuple[dict[tuple[bytes, bytes], Any], list[Any]]:
        await create(bootstrap, topic_name, partitions=32)
        sent = [(b"key-%d" % (i % 97), b"%d" % i) for i in range(640)]
        async with aiokafka_producer(bootstrap, linger_ms=5) as producer:
            futures = [await producer.send(topic_name, key=k, value=v) for k, v in sent]
            placed = dict(zip(sent, await asyncio.gather(*futures), strict=True))
        async with aiokafka_consumer(bootstrap) as consumer:
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            records = await aiokafka_poll(consumer, 640, timeout=30)
            ends = await consumer.end_offsets(partitions)
        assert ends == {
            tp: sum(1 for m in placed.values() if m.partition == tp.partition) for tp in partitions
        }
        return placed, records

    placed, records = asyncio.run(scenario())
    assert len({m.partition for m in placed.values()}) > 16
    assert_consumed_as_placed(records, placed, 32)


def test_small_fetch_limits_still_deliver_everything(brook_broker, topic_name):
    """Fetch limits far below the data: every record of every partition still arrives,
    in order, a batch or so per fetch."""
    bootstrap = brook_broker.bootstrap
    partitions = [TopicPartition(topic_name, p) for p in range(4)]

    async def scenario() -> list[Any]:
        await create(bootstrap, topic_name, partitions=4)
        async with aiokafka_producer(bootstrap, max_batch_size=1024) as producer:
            for i in range(30):
                sends = [
                    await producer.send(
                        topic_name, value=b"%d-%03d-" % (p, i) + b"v" * 250, partition=p
                    )
                    for p in range(4)
                ]
                await asyncio.gather(*sends)
        async with aiokafka_consumer(
            bootstrap, fetch_max_bytes=1500, max_partition_fetch_bytes=700
        ) as consumer:
            consumer.assign(partitions)
            await consumer.seek_to_beginning(*partitions)
            return await aiokafka_poll(consumer, 120, timeout=40)

    records = asyncio.run(scenario())
    for p in range(4):
        mine = [r for r in records if r.partition == p]
        assert [r.offset for r in mine] == list(range(30)), p
        assert [r.value[:6] for r in mine] == [b"%d-%03d-" % (p, i) for i in range(30)]


def test_log_append_time_and_timestamp_bounds(brook_broker, topic_name):
    """Through Produce v8 and older: a LogAppendTime topic stamps the batch and reports the
    stamp in the response; a CreateTime more than an hour ahead is INVALID_TIMESTAMP."""
    bootstrap = brook_broker.bootstrap
    stamped = topic_name + "-append"

    async def scenario() -> None:
        await create(bootstrap, stamped, **{"message.timestamp.type": "LogAppendTime"})
        await create(bootstrap, topic_name)
        now = int(time.time() * 1000)
        async with aiokafka_producer(bootstrap) as producer:
            metadata = await producer.send_and_wait(
                stamped, value=b"old", partition=0, timestamp_ms=now - 3_600_000
            )
            with pytest.raises(aioerrors.InvalidTimestampError):
                await producer.send_and_wait(
                    topic_name, value=b"late", partition=0, timestamp_ms=now + 2 * 3_600_000
                )
        [record] = await read_from(bootstrap, stamped, 0, 1)
        assert record.timestamp_type == 1
        assert now <= record.timestamp <= int(time.time() * 1000)
        assert metadata.timestamp == record.timestamp
        tp = TopicPartition(topic_name, 0)
        async with aiokafka_consumer(bootstrap) as consumer:
            assert await consumer.end_offsets([tp]) == {tp: 0}

    asyncio.run(scenario())


def test_delete_records_moves_the_log_start(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    tp = TopicPartition(topic_name, 0)

    async def scenario() -> None:
        await create(bootstrap, topic_name)
        await produce_each(bootstrap, topic_name, [b"d%d" % i for i in range(10)])
        async with admin_client(bootstrap) as admin:
            low = await admin.delete_records({tp: RecordsToDelete(before_offset=6)})
        assert low == {tp: 6}
        async with aiokafka_consumer(bootstrap, auto_offset_reset="none") as consumer:
            consumer.assign([tp])
            assert await consumer.beginning_offsets([tp]) == {tp: 6}
            consumer.seek(tp, 6)
            records = await aiokafka_poll(consumer, 4)
            assert [r.value for r in records] == [b"d%d" % i for i in range(6, 10)]
            consumer.seek(tp, 2)  # deleted: out of range
            with pytest.raises(aioerrors.OffsetOutOfRangeError):
                await aiokafka_poll(consumer, 1, timeout=15)

    asyncio.run(scenario())


def test_txn_offset_commit_without_a_member_id_into_a_group_with_members(brook_broker, topic_name):
    """aiokafka commits a transaction's offsets with TxnOffsetCommit v0, which carries no
    member id or generation: Kafka takes it into a group that has live members (a
    consume-transform-produce app whose consumer is in the group)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentPartition

    asyncio.run(create(brook_broker.bootstrap, topic_name))
    group = f"{topic_name}-app"
    member = Consumer(
        {
            "bootstrap.servers": brook_broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
        }
    )
    try:
        member.subscribe([topic_name])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        assert member.assignment(), "the consumer never joined its group"

        async def transform() -> None:
            async with (
                aiokafka_producer(
                    brook_broker.bootstrap, transactional_id=f"{topic_name}-tx"
                ) as producer,
                producer.transaction(),
            ):
                await producer.send_and_wait(topic_name, b"derived", partition=0)
                await producer.send_offsets_to_transaction(
                    {TopicPartition(topic_name, 0): 7}, group
                )

        asyncio.run(transform())
        committed = member.committed([ConfluentPartition(topic_name, 0)], timeout=10)
        assert committed[0].offset == 7
    finally:
        member.close()
