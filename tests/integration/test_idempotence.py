"""Idempotent producers: producer ids, sequence checks, retried batches answered with
their original offsets, and state that survives a restart."""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer
from kio.schema.init_producer_id.v4 import request as init4

from brook.broker.testing import BrokerProcess
from brook.protocol.record_batch import Record, build_batch

from .clients import consume_all, create_topic
from .raw_client import RawClient, produce_request


def _init_producer(
    client: RawClient, producer_id: int = -1, epoch: int = -1, transactional_id: str | None = None
):
    return client.request(
        init4.InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=producer_id,
            producer_epoch=epoch,
        )
    )


def _produce(
    client: RawClient, topic: str, producer_id: int, epoch: int, sequence: int, values: list[bytes]
):
    # Stamped now: a producer whose last batch is older than producer.id.expiration.ms
    # (a day) is forgotten when its state is loaded from a snapshot, as in Kafka.
    now = int(time.time() * 1000)
    batch = build_batch(
        [Record(i, now, None, value) for i, value in enumerate(values)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    response = client.request(produce_request(topic, 0, batch))
    return response.responses[0].partition_responses[0]


def test_kafka_python_default_producer_is_idempotent(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    producer = KafkaProducer(bootstrap_servers=brook_broker.bootstrap)  # idempotent by default
    offsets = [producer.send(topic_name, b"v%d" % i, partition=0).get(10).offset for i in range(5)]
    producer.close()
    assert offsets == [0, 1, 2, 3, 4]


def test_confluent_idempotent_producer(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    producer = Producer(
        {"bootstrap.servers": brook_broker.bootstrap, "enable.idempotence": True, "linger.ms": 2}
    )
    for i in range(500):
        producer.produce(topic_name, value=b"%d" % i, partition=0)
    assert producer.flush(20) == 0
    values = [m.value() for m in consume_all(brook_broker.bootstrap, topic_name, 500)]
    assert values == [b"%d" % i for i in range(500)]


def test_sequence_rules(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        init = _init_producer(client)
        assert init.error_code.value == 0 and init.producer_epoch == 0
        pid = init.producer_id
        first = _produce(client, topic_name, pid, 0, 0, [b"a", b"b"])
        assert (first.error_code.value, first.base_offset) == (0, 0)
        retried = _produce(client, topic_name, pid, 0, 0, [b"a", b"b"])
        assert (retried.error_code.value, retried.base_offset) == (0, 0)  # not written twice
        gap = _produce(client, topic_name, pid, 0, 5, [b"c"])
        assert gap.error_code.value == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
        follows = _produce(client, topic_name, pid, 0, 2, [b"c"])
        assert (follows.error_code.value, follows.base_offset) == (0, 2)
        bumped = _init_producer(client, pid, 0)
        assert (bumped.producer_id, bumped.producer_epoch) == (pid, 1)
        new_epoch = _produce(client, topic_name, pid, 1, 0, [b"d"])
        assert (new_epoch.error_code.value, new_epoch.base_offset) == (0, 3)
        fenced = _produce(client, topic_name, pid, 0, 3, [b"e"])
        assert fenced.error_code.value == 47  # INVALID_PRODUCER_EPOCH
        unknown = _produce(client, topic_name, pid + 1000, 0, 7, [b"f"])
        assert unknown.error_code.value == 45
        other = _init_producer(client)
        assert other.producer_id != pid
        transactional = _init_producer(client, transactional_id="txn")
        assert transactional.error_code.value == 0
        assert transactional.producer_id not in (pid, other.producer_id)
        assert transactional.producer_epoch == 0
    values = [m.value() for m in consume_all(brook_broker.bootstrap, topic_name, 4)]
    assert values == [b"a", b"b", b"c", b"d"]


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_state_survives_restart(tmp_path, topic_name, stop):
    """A retry after a restart still gets its original offset; ids are not reused."""
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, topic_name)
        with RawClient(broker.port) as client:
            pid = _init_producer(client).producer_id
            assert _produce(client, topic_name, pid, 0, 0, [b"x"]).base_offset == 0
            assert _produce(client, topic_name, pid, 0, 1, [b"y"]).base_offset == 1
    finally:
        if stop == "SIGKILL":
            broker.kill()
        else:
            broker.stop()
    restarted = BrokerProcess(tmp_path / "data").start()
    try:
        with RawClient(restarted.port) as client:
            retried = _produce(client, topic_name, pid, 0, 1, [b"y"])
            assert (retried.error_code.value, retried.base_offset) == (0, 1)
            assert _produce(client, topic_name, pid, 0, 2, [b"z"]).base_offset == 2
            assert _init_producer(client).producer_id > pid
    finally:
        restarted.stop()
