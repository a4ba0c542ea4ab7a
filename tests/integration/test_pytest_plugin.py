"""The pytest plugin as its users use it: the session broker with a topic per test, the
helpers that seed and read topics (checked against other real clients), the async
fixture under pytest-asyncio, and a project of its own run by pytest (pytester)."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
from confluent_kafka import KafkaException
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from brook.broker.testing import ProduceError

from .clients import aiokafka_consumer, aiokafka_poll, aiokafka_producer

pytest_plugins = ["pytester"]

# The session broker's port seen by each test that used it: one broker for all.
_session_ports: set[int] = set()
_session_topics: list[str] = []


@pytest.mark.parametrize("round_", range(2))
def test_the_session_broker_is_shared_and_each_test_has_its_own_topic(
    brook_session_broker, brook_topic, round_
):
    _session_ports.add(brook_session_broker.port)
    assert len(_session_ports) == 1
    assert brook_topic not in _session_topics
    _session_topics.append(brook_topic)
    assert re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", brook_topic), brook_topic
    # The topic is this test's alone: empty until it writes, then holding only its own.
    produced = brook_session_broker.produce(brook_topic, [f"round {round_}"])
    assert [(p.partition, p.offset) for p in produced] == [(0, 0)]
    assert [r.value for r in brook_session_broker.records(brook_topic)] == [
        f"round {round_}".encode()
    ]


def test_produce_and_records_round_trip_every_field(brook_broker, brook_topic):
    brook_broker.create_topic(brook_topic, partitions=3)
    produced = brook_broker.produce(
        brook_topic,
        [
            b"plain",
            ("k1", "text"),
            {"key": b"k2", "value": b"v2", "headers": {"h": "x"}, "partition": 2},
            {"value": None, "key": "tombstone", "partition": 1, "timestamp": 1_700_000_000_000},
        ],
        partition=0,
    )
    assert [(p.partition, p.offset) for p in produced] == [(0, 0), (0, 1), (2, 0), (1, 0)]
    records = brook_broker.records(brook_topic)
    assert [(r.partition, r.offset, r.key, r.value) for r in records] == [
        (0, 0, None, b"plain"),
        (0, 1, b"k1", b"text"),
        (1, 0, b"tombstone", None),
        (2, 0, b"k2", b"v2"),
    ]
    assert records[3].headers == [("h", b"x")]
    assert records[2].timestamp == 1_700_000_000_000
    assert [r.offset for r in brook_broker.records(brook_topic, partitions=[0])] == [0, 1]


def test_records_reads_what_another_client_produced(brook_broker, brook_topic):
    producer = KafkaProducer(bootstrap_servers=brook_broker.bootstrap)
    for number in range(5):
        producer.send(brook_topic, key=b"k", value=f"kafka-python {number}".encode(), partition=0)
    producer.flush(15)
    producer.close()
    assert [r.value for r in brook_broker.records(brook_topic)] == [
        f"kafka-python {number}".encode() for number in range(5)
    ]


def test_produce_seeds_what_another_client_reads(brook_broker, brook_topic):
    brook_broker.produce(brook_topic, [(f"k{n}", f"seeded {n}") for n in range(4)], partition=0)
    consumer = KafkaConsumer(
        bootstrap_servers=brook_broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=0
    )
    partition = TopicPartition(brook_topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    seen = []
    while len(seen) < 4:
        for batch in consumer.poll(timeout_ms=1000).values():
            seen += [(m.key, m.value) for m in batch]
    consumer.close()
    assert seen == [(f"k{n}".encode(), f"seeded {n}".encode()) for n in range(4)]


def test_records_skips_transaction_markers_and_aborted_records(brook_broker, brook_topic):
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": brook_broker.bootstrap, "transactional.id": f"tx-{brook_topic}"}
    )
    producer.init_transactions(15)
    for outcome, value in (("commit", b"kept"), ("abort", b"dropped"), ("commit", b"also kept")):
        producer.begin_transaction()
        producer.produce(brook_topic, value=value, partition=0)
        producer.flush(15)
        if outcome == "commit":
            producer.commit_transaction(15)
        else:
            producer.abort_transaction(15)
    committed = brook_broker.records(brook_topic, isolation_level="read_committed")
    assert [r.value for r in committed] == [b"kept", b"also kept"]
    # Uncommitted reads show the aborted record too, never a marker.
    everything = brook_broker.records(brook_topic)
    assert [r.value for r in everything] == [b"kept", b"dropped", b"also kept"]


@pytest.mark.brook_config(auto_create_topics_enable="false")
def test_produce_to_a_missing_topic_raises_with_kafkas_error(brook_broker, brook_topic):
    with pytest.raises(ProduceError) as raised:
        brook_broker.produce(brook_topic, [b"nowhere"], config={"message.timeout.ms": 3000})
    assert raised.value.error is not None
    with pytest.raises(KafkaException) as missing:
        brook_broker.records(brook_topic)
    assert "UNKNOWN_TOPIC" in str(missing.value)


@pytest.mark.brook_config(admin_listener="http://127.0.0.1:0")
def test_the_admin_endpoint_on_port_0_is_found_through_the_fixture(brook_broker):
    """admin.listener on port 0: the fixture says where it listens, and it answers there."""
    assert brook_broker.admin_port != 0
    assert brook_broker.admin_url == f"http://127.0.0.1:{brook_broker.admin_port}"
    with urllib.request.urlopen(f"{brook_broker.admin_url}/v1/health", timeout=10) as response:
        assert response.status == 200
        assert json.loads(response.read())["live"] is True


@pytest.mark.asyncio
@pytest.mark.brook_config(num_partitions=2)
async def test_the_async_fixture_with_aiokafka(brook_async_broker, brook_topic):
    await brook_async_broker.create_topic(brook_topic)  # num.partitions applies: 2
    async with aiokafka_producer(brook_async_broker.bootstrap) as producer:
        for partition in (0, 1):
            await producer.send_and_wait(brook_topic, b"from aiokafka", partition=partition)
    records = await brook_async_broker.records(brook_topic)
    assert [(r.partition, r.value) for r in records] == [
        (0, b"from aiokafka"),
        (1, b"from aiokafka"),
    ]
    await brook_async_broker.produce(brook_topic, [("k", "seeded")], partition=1)
    async with aiokafka_consumer(
        brook_async_broker.bootstrap, auto_offset_reset="earliest"
    ) as consumer:
        consumer.subscribe([brook_topic])
        got = await aiokafka_poll(consumer, 3)
    assert sorted(m.value for m in got) == [b"from aiokafka", b"from aiokafka", b"seeded"]


def test_a_project_of_its_own_uses_the_fixtures(pytester):
    """A user's project: the plugin is found through its entry point, the session broker
    is configured from the ini file, and the async fixture runs under pytest-asyncio."""
    pytester.makeini(
        """
        [pytest]
        asyncio_default_fixture_loop_scope = function
        brook_session_config =
            num.partitions=4
        """
    )
    pytester.makepyfile(
        """
        import pytest

        def test_session(brook_session_broker, brook_topic):
            brook_session_broker.produce(brook_topic, [b"a"])
            assert len(brook_session_broker.records(brook_topic)) == 1
            assert brook_session_broker.records(brook_topic)[0].value == b"a"
            from confluent_kafka.admin import AdminClient
            admin = AdminClient({"bootstrap.servers": brook_session_broker.bootstrap})
            topic = admin.list_topics(brook_topic, timeout=10).topics[brook_topic]
            assert len(topic.partitions) == 4

        @pytest.mark.brook_config(num_partitions=3)
        def test_fresh(brook_broker, brook_topic):
            brook_broker.produce(brook_topic, [("k", "v")])
            (record,) = brook_broker.records(brook_topic)
            assert (record.key, record.value) == (b"k", b"v")

        @pytest.mark.asyncio
        async def test_async(brook_async_broker, brook_topic):
            await brook_async_broker.produce(brook_topic, [b"x", b"y"], partition=0)
            records = await brook_async_broker.records(brook_topic)
            assert [r.value for r in records] == [b"x", b"y"]
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)
