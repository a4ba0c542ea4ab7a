"""The broker's log cleaner compacts topics while they are produced to and read, and a
broker killed in the middle of a swap comes back with its log whole.

Waits are on the broker's own state: its count of cleaned logs and its cleaner
checkpoint, read on its event loop (BrokerThread.call), or its log lines for a process.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from brook.broker.server.crash_points import LOG_CLEANER_OLD_DELETED, LOG_CLEANER_SWAP_RENAMED
from brook.broker.testing import wait_until

from .clients import create_topic, poll_until
from .processes import watermarks

TIMEOUT_S = 60
KEYS = 40
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "4000",
    "min.cleanable.dirty.ratio": "0.01",
}

pytestmark = pytest.mark.brook_config(log_cleaner_backoff_ms=20)


def _produce_rounds(bootstrap: str, topic: str, rounds: range) -> dict[bytes, bytes]:
    """KEYS keys a round, one value each; returns the last value of every key."""
    # Batches well under segment.bytes (a bigger one would be refused).
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 2,
            "batch.size": 1500,
            "enable.idempotence": True,
        }
    )
    errors: list[Any] = []

    def on_delivery(error: Any, _: Any) -> None:
        if error is not None:
            errors.append(error)

    latest: dict[bytes, bytes] = {}
    for r in rounds:
        for k in range(KEYS):
            key, value = b"key-%02d" % k, b"value-%d-%d-" % (k, r) + b"." * 40
            producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
            latest[key] = value
        producer.poll(0)
    assert producer.flush(30) == 0
    assert not errors, errors[:3]
    return latest


def _consume_from_start(bootstrap: str, topic: str, until_offset: int) -> list[Any]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        return poll_until(
            consumer, lambda out: bool(out) and out[-1].offset() >= until_offset - 1, TIMEOUT_S
        )
    finally:
        consumer.close()


def _cleaner_state(brook_broker: Any, topic: str) -> tuple[int, int | None, int]:
    """(logs cleaned, the partition's cleaner checkpoint, its active segment's base)."""
    broker = brook_broker.broker

    def read() -> tuple[int, int | None, int]:
        log = broker.log_manager.get_log(topic, 0)
        checkpoint = broker.log_cleaner.checkpoints(log.dir.parent).get(topic, 0)
        return broker.log_cleaner.cleaned_logs, checkpoint, log.active_segment.base_offset

    result: tuple[int, int | None, int] = brook_broker.call(read)
    return result


def test_a_compacted_topic_cleaned_while_produced_to_and_consumed(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config=COMPACTED)
    seen: list[Any] = []
    done = threading.Event()
    errors: list[BaseException] = []

    def consume_meanwhile() -> None:
        # A consumer reading from the start while the log is cleaned under it.
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic_name, 0, 0)])
        try:
            while not done.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    seen.append(message)
        except BaseException as exc:
            errors.append(exc)
        finally:
            consumer.close()

    reader = threading.Thread(target=consume_meanwhile)
    reader.start()
    latest: dict[bytes, bytes] = {}
    for chunk in range(6):
        latest.update(_produce_rounds(bootstrap, topic_name, range(chunk * 10, chunk * 10 + 10)))
    cleaned_during, _, _ = _cleaner_state(brook_broker, topic_name)
    end = watermarks(bootstrap, topic_name, 1)[0][1]
    # The cleaner catches up with everything below the active segment.
    wait_until(
        lambda: (
            _cleaner_state(brook_broker, topic_name)[1]
            == _cleaner_state(brook_broker, topic_name)[2]
        ),
        "cleaner checkpoint at the active segment",
    )
    wait_until(lambda: bool(seen) and seen[-1].offset() >= end - 1, "reader at the end")
    done.set()
    reader.join(30)
    assert not errors, errors
    assert cleaned_during >= 1, "no cleaning happened while producing"

    offsets = [m.offset() for m in seen]
    assert offsets == sorted(set(offsets)), "offsets went backwards or repeated"
    assert {m.key(): m.value() for m in seen} == latest

    after = _consume_from_start(bootstrap, topic_name, end)
    offsets = [m.offset() for m in after]
    assert offsets == sorted(set(offsets))
    assert {m.key(): m.value() for m in after} == latest
    # Compacted: far fewer records than the 2400 produced.
    assert len(after) < 6 * 10 * KEYS / 3


@pytest.mark.parametrize("crash_point", [LOG_CLEANER_SWAP_RENAMED, LOG_CLEANER_OLD_DELETED])
def test_sigkill_during_a_swap_recovers_whole(brokers, topic_name, crash_point):
    overrides = {"log.cleaner.backoff.ms": 20, "log.cleaner.enable": "false"}
    first = brokers.start(overrides)
    create_topic(first.bootstrap, topic_name, config=COMPACTED)
    latest = _produce_rounds(first.bootstrap, topic_name, range(20))
    end = watermarks(first.bootstrap, topic_name, 1)[0][1]
    first.stop()
    # With the cleaner on and the crash point armed, the first swap kills the broker.
    crashing = brokers.start(
        {"log.cleaner.backoff.ms": 20},
        data_dir=first.data_dir,
        port=first.port,
        env={"BROOK_CRASH_POINT": crash_point},
    )
    assert crashing.process is not None
    assert crashing.process.wait(TIMEOUT_S) < 0
    assert f"Crash point {crash_point} reached" in crashing.log_text()
    leftovers = [p.name for p in (first.data_dir / f"{topic_name}-0").iterdir()]
    assert any(name.endswith(".swap") for name in leftovers), leftovers
    restarted = brokers.start(overrides, data_dir=first.data_dir, port=first.port)
    assert watermarks(restarted.bootstrap, topic_name, 1)[0][1] == end
    records = _consume_from_start(restarted.bootstrap, topic_name, end)
    offsets = [m.offset() for m in records]
    assert offsets == sorted(set(offsets))
    assert {m.key(): m.value() for m in records} == latest
    assert len(records) < 20 * KEYS / 2  # the swap was completed, not undone
    names = [p.name for p in (first.data_dir / f"{topic_name}-0").iterdir()]
    assert not [n for n in names if n.endswith((".swap", ".cleaned"))], names
    # The idempotent producer of a new session and the log go on.
    latest.update(_produce_rounds(restarted.bootstrap, topic_name, range(20, 21)))
    records = _consume_from_start(restarted.bootstrap, topic_name, end + KEYS)
    assert {m.key(): m.value() for m in records} == latest
