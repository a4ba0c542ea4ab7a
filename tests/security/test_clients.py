"""confluent-kafka, kafka-python, aiokafka and kcat produce and consume over SSL, mTLS,
SASL_PLAINTEXT and SASL_SSL, with PLAIN and SCRAM-SHA-256/512 (the SCRAM users made by
AlterUserScramCredentials in the fixture, then logged in with)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition

from .modes import MODES, Mode, aiokafka_config, kafka_python_config, librdkafka_config

VALUES = [b"one", b"two", b"three"]
KCAT = shutil.which("kcat")


def _topic(mode: Mode, client: str) -> str:
    return f"{client}-{mode.name}-{uuid.uuid4().hex[:6]}"


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.name)
def test_confluent_kafka(secure_broker, pki, mode):
    config = {"bootstrap.servers": secure_broker.bootstrap(mode.listener)}
    config.update(librdkafka_config(pki, mode))
    topic = _topic(mode, "confluent")
    producer = Producer(config)
    for value in VALUES:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**config, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(VALUES) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == VALUES
    # What the broker stored came over the secured listener.
    assert [r.value for r in secure_broker.thread.records(topic)] == VALUES


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.name)
def test_kafka_python(secure_broker, pki, mode):
    bootstrap = secure_broker.bootstrap(mode.listener)
    config = kafka_python_config(pki, mode)
    topic = _topic(mode, "kafka-python")
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, **config)
    for value in VALUES:
        producer.send(topic, value).get(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **config)
    partition = KafkaPythonTopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < len(VALUES) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=200).values():
            got += [record.value for record in batch]
    consumer.close()
    assert got == VALUES


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.name)
def test_aiokafka(secure_broker, pki, mode):
    bootstrap = secure_broker.bootstrap(mode.listener)
    topic = _topic(mode, "aiokafka")

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **aiokafka_config(pki, mode))
        await producer.start()
        try:
            for value in VALUES:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **aiokafka_config(pki, mode),
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            from aiokafka import TopicPartition as AioTopicPartition

            consumer.assign([AioTopicPartition(topic, 0)])
            deadline = time.monotonic() + 30
            while len(got) < len(VALUES) and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=200)).values():
                    got += [record.value for record in batch]
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == VALUES


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.name)
def test_kcat(secure_broker, pki, mode):
    assert KCAT is not None
    settings = [f"-X{key}={value}" for key, value in librdkafka_config(pki, mode).items()]
    base = [KCAT, "-b", secure_broker.bootstrap(mode.listener), *settings]
    topic = _topic(mode, "kcat")
    produced = subprocess.run(
        [*base, "-P", "-t", topic],
        input=b"\n".join(VALUES) + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr.decode(errors="replace")
    consumed = subprocess.run(
        [*base, "-C", "-t", topic, "-o", "beginning", "-e", "-c", str(len(VALUES)), "-f", "%s\n"],
        capture_output=True,
        timeout=60,
    )
    assert consumed.returncode == 0, consumed.stderr.decode(errors="replace")
    assert consumed.stdout.splitlines() == VALUES
