"""Exactly-once consume-transform-produce: an application SIGKILLed at random points and
restarted, 10 times, still turns every input record into exactly one committed output
record, as read by a read_committed consumer."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, TopicPartition

from .clients import create_topic, produce
from .processes import clean_env

RECORDS = 10_000
ROUNDS = 10
APP = Path(__file__).with_name("eos_app.py")


def _start_app(bootstrap: str, topic: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), bootstrap, topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean_env(),
    )


def _wait_for_a_commit(app: subprocess.Popen[str]) -> None:
    """Until the application reports a committed transaction (or has finished)."""
    assert app.stdout is not None
    line = app.stdout.readline()
    assert line.startswith("committed") or app.poll() == 0, line


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        if message.error():
            if message.error().code() == KafkaError._PARTITION_EOF:
                break
            continue
        values.append(message.value())
    consumer.close()
    return values


def test_killed_application_still_produces_each_output_once(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-in")
    create_topic(bootstrap, f"{topic_name}-out")
    produce(bootstrap, f"{topic_name}-in", [(b"%d" % i, b"in-%d" % i) for i in range(RECORDS)])
    chance = random.Random(topic_name)  # a different, reproducible schedule per test
    kills = 0
    for _ in range(ROUNDS):
        app = _start_app(bootstrap, topic_name)
        _wait_for_a_commit(app)
        time.sleep(chance.uniform(0, 0.2))  # a random point of its work
        if app.poll() is not None:
            break  # finished the input before this round's kill
        app.kill()
        app.wait(30)
        kills += 1
    assert kills >= ROUNDS // 2, "the application finished too early to be killed often"
    app = _start_app(bootstrap, topic_name)
    assert app.wait(180) == 0
    out = _read_committed(bootstrap, f"{topic_name}-out")
    assert sorted(out) == sorted(b"in-%d-done" % i for i in range(RECORDS))
