"""The log cleaner's own keys on a real broker: log.cleaner.dedupe.buffer.size (a full
offset map cleans as far as it fits, and the next cleaning goes on), log.cleaner.threads,
log.cleaner.io.max.bytes.per.second, and their dynamic updates through
IncrementalAlterConfigs (confluent-kafka) and AlterConfigs (kafka-python).

Waits are on the broker's own state (its record of cleanings, its cleaner checkpoints,
its cleaner's threads), read on its event loop.
"""

from __future__ import annotations

import itertools
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigSource, ResourceType
from kafka.admin import ConfigResource, KafkaAdminClient

from brook.broker.cli import CLEANER_SWITCH_INTERVAL_S
from brook.broker.testing import BrokerProcess, free_port, wait_until
from brook.storage.checkpoints import OffsetCheckpointFile
from brook.storage.log_cleaner import CLEANER_OFFSET_CHECKPOINT_FILE
from brook.storage.offset_map import ENTRY_OVERHEAD

from .clients import create_topic
from .processes import watermarks
from .test_configs import describe, incremental, kafka_error
from .test_log_cleaner import (
    COMPACTED,
    KEYS,
    _cleaner_state,
    _consume_from_start,
    _produce_rounds,
)

SET = AlterConfigOpType.SET
INVALID_REQUEST = 42


def _cleanings(brook_broker: Any, topic: str) -> list[tuple[int, int, float]]:
    """(first dirty offset, end offset, offset map utilization) of each cleaning."""

    def read() -> list[tuple[int, int, float]]:
        return [
            (done.first_dirty_offset, done.end_offset, done.buffer_utilization)
            for done in brook_broker.broker.log_cleaner.recent
            if done.topic_partition == (topic, 0)
        ]

    result: list[tuple[int, int, float]] = brook_broker.call(read)
    return result


def _cleaner(brook_broker: Any) -> tuple[int, int, float]:
    """(threads running, each thread's offset map bytes, the throttle's rate)."""

    def read() -> tuple[int, int, float]:
        cleaner = brook_broker.broker.cleaner
        running = len([task for task in cleaner._tasks if not task.done()])
        return running, cleaner.offset_map_memory, cleaner.throttler.desired_rate_per_sec

    result: tuple[int, int, float] = brook_broker.call(read)
    return result


def _cleaned_to_the_active_segment(brook_broker: Any, topic: str) -> bool:
    _, checkpoint, active_base = _cleaner_state(brook_broker, topic)
    return checkpoint == active_base


# Room for about 25 of the test's keys (b"key-NN", 6 bytes) per cleaning.
SMALL_MAP = int(25 * (6 + ENTRY_OVERHEAD) / 0.9)


@pytest.mark.brook_config(log_cleaner_backoff_ms=20, log_cleaner_dedupe_buffer_size=SMALL_MAP)
def test_a_full_offset_map_cleans_as_far_as_it_fits(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config=COMPACTED)
    # 40 keys a round: more than the map holds, so no cleaning covers a whole round.
    latest = _produce_rounds(bootstrap, topic_name, range(12))
    end = watermarks(bootstrap, topic_name, 1)[0][1]
    wait_until(
        lambda: _cleaned_to_the_active_segment(brook_broker, topic_name),
        "cleaner checkpoint at the active segment",
    )
    cleanings = _cleanings(brook_broker, topic_name)
    # Each cleaning goes on where the previous one stopped ...
    assert all(later[0] == earlier[1] for earlier, later in itertools.pairwise(cleanings)), (
        cleanings
    )
    # ... and those that stopped early stopped because the map was full, inside the
    # dirty section (not at a segment boundary of the plan).
    partial = [c for c in cleanings if c[2] > 0.8]
    assert len(partial) >= 3, cleanings
    records = _consume_from_start(bootstrap, topic_name, end)
    offsets = [m.offset() for m in records]
    assert offsets == sorted(set(offsets))
    assert {m.key(): m.value() for m in records} == latest
    assert len(records) < 12 * KEYS / 2


def _cleaner_started(brook_broker: Any) -> bool:
    return bool(brook_broker.call(lambda: brook_broker.broker.cleaner is not None))


@pytest.mark.brook_config(log_cleaner_backoff_ms=20)
def test_the_cleaner_starts_with_the_first_compacted_log(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-deleted", 1)
    assert not _cleaner_started(brook_broker)
    # A topic altered to compact starts it, at once (the change is applied on the loop).
    incremental(
        bootstrap, ResourceType.TOPIC, f"{topic_name}-deleted", [("cleanup.policy", SET, "compact")]
    )
    assert _cleaner(brook_broker) == (1, 128 * 1024 * 1024, 1.7976931348623157e308)


@pytest.mark.brook_config(log_cleaner_backoff_ms=20)
def test_a_compacted_topic_or_default_starts_the_cleaner(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-plain", 1)
    assert not _cleaner_started(brook_broker)
    # The broker's default policy turned to compact makes every plain topic compacted.
    incremental(bootstrap, ResourceType.BROKER, "0", [("log.cleanup.policy", SET, "compact")])
    assert _cleaner_started(brook_broker)
    # ... and the logs took it (a new reconfigurable of the broker).
    assert brook_broker.call(
        lambda: brook_broker.broker.replicas.partition(f"{topic_name}-plain", 0).log.config.compact
    )


@pytest.mark.brook_config(log_cleaner_backoff_ms=20, log_cleaner_enable="false")
def test_no_cleaner_when_disabled_even_with_compacted_topics(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, 1, COMPACTED)
    assert not _cleaner_started(brook_broker)


@pytest.mark.brook_config(log_cleaner_backoff_ms=20)
def test_cleaner_keys_update_dynamically_and_are_checked(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, 1, COMPACTED)  # starts the cleaner
    assert _cleaner(brook_broker) == (1, 128 * 1024 * 1024, 1.7976931348623157e308)
    described = describe(bootstrap, ResourceType.BROKER, "0")
    assert described["log.cleaner.io.max.bytes.per.second"].value == "1.7976931348623157E308"
    assert described["log.cleaner.threads"].value == "1"
    assert described["log.cleaner.dedupe.buffer.size"].value == "134217728"

    incremental(
        bootstrap,
        ResourceType.BROKER,
        "0",
        [
            ("log.cleaner.threads", SET, "2"),
            ("log.cleaner.dedupe.buffer.size", SET, "50000000"),
            ("log.cleaner.io.max.bytes.per.second", SET, "2500000.5"),
        ],
    )
    # The threads restart with the new settings: two of them, 25 MB of map each.
    wait_until(lambda: _cleaner(brook_broker) == (2, 25_000_000, 2500000.5), "new cleaner")
    described = describe(bootstrap, ResourceType.BROKER, "0")
    entry = described["log.cleaner.threads"]
    assert (entry.value, entry.source) == ("2", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert described["log.cleaner.io.max.bytes.per.second"].value == "2500000.5"

    # Kafka's checks of a thread count: at least 1, at most double, at least half.
    for value, message in [
        ("5", "Log cleaner threads cannot be increased to more than double the current value 2"),
        ("0", "Log cleaner threads should be at least 1"),
        ("x", "Invalid value 'x' for configuration log.cleaner.threads"),
    ]:
        error = kafka_error(
            incremental, bootstrap, ResourceType.BROKER, "0", [("log.cleaner.threads", SET, value)]
        )
        assert error.code() == INVALID_REQUEST, (value, error)
        assert message in error.str(), (value, error.str())
    assert _cleaner(brook_broker) == (2, 25_000_000, 2500000.5)

    # kafka-python's AlterConfigs (the legacy request) on the same keys.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        done = admin.alter_configs(
            [ConfigResource("BROKER", "0", {"log.cleaner.threads": "4"})], incremental=False
        )["broker"]["0"]
        refused = admin.alter_configs(
            [ConfigResource("BROKER", "0", {"log.cleaner.threads": "1"})], incremental=False
        )["broker"]["0"]
    finally:
        admin.close()
    assert "Error" not in str(done), done
    assert "InvalidRequestError" in str(refused), refused
    assert "less than half the current value 4" in str(refused), refused
    memory = int(
        describe(bootstrap, ResourceType.BROKER, "0")["log.cleaner.dedupe.buffer.size"].value
    )
    wait_until(lambda: _cleaner(brook_broker)[:2] == (4, memory // 4), "cleaner with 4 threads")


@pytest.mark.brook_config(log_cleaner_backoff_ms=20, log_cleaner_threads=2)
def test_two_cleaner_threads_share_the_logs(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    topics = [f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-c"]
    latest: dict[str, dict[bytes, bytes]] = {}
    for topic in topics:
        create_topic(bootstrap, topic, config=COMPACTED)
    for topic in topics:
        latest[topic] = _produce_rounds(bootstrap, topic, range(15))
    for topic in topics:
        wait_until(lambda t=topic: _cleaned_to_the_active_segment(brook_broker, t), topic)
    assert _cleaner(brook_broker)[0] == 2
    for topic in topics:
        # No range of a log was cleaned twice: one thread at a time per log.
        cleanings = _cleanings(brook_broker, topic)
        assert all(b[0] == a[1] for a, b in itertools.pairwise(cleanings)), cleanings
        end = watermarks(bootstrap, topic, 1)[0][1]
        records = _consume_from_start(bootstrap, topic, end)
        assert {m.key(): m.value() for m in records} == latest[topic]


# Kafka's throttler checks the rate every 300 ms, so a cleaning must last longer than that
# unthrottled to be held back: 16 MB of small records, read twice (the offset map's pass and
# the rewrite), take about 0.6 s at the cleaner's 50 MB/s. 4 MB/s: below what the cleaner
# does even on a loaded 2-core machine (it fell under 10 MB/s in CI, and a throttle never
# reached holds nothing back); throttled, the cleaning takes about 8 s.
@pytest.mark.brook_config(log_cleaner_backoff_ms=20, log_cleaner_io_max_bytes_per_second=4e6)
def test_io_throttle_slows_the_cleaner_down(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    # About 16 MB written while not compacted, then made compacted: one cleaning of it.
    create_topic(bootstrap, topic_name, config={"segment.bytes": "1000000"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    latest: dict[bytes, bytes] = {}
    for n in range(160_000):
        key, value = b"key-%02d" % (n % KEYS), b"%06d" % n + b"." * 80
        while True:
            try:
                producer.produce(topic_name, key=key, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
        latest[key] = value
    assert producer.flush(30) == 0
    end = watermarks(bootstrap, topic_name, 1)[0][1]
    incremental(bootstrap, ResourceType.TOPIC, topic_name, [("cleanup.policy", SET, "compact")])
    wait_until(
        lambda: _cleaned_to_the_active_segment(brook_broker, topic_name),
        "cleaner checkpoint at the active segment",
    )
    slept = brook_broker.call(lambda: brook_broker.broker.cleaner.throttler.slept_s)
    cleaned = brook_broker.call(lambda: brook_broker.broker.log_cleaner.bytes_cleaned)
    assert cleaned > 12_000_000
    assert slept > 0, "the throttle never held the cleaner back"
    records = _consume_from_start(bootstrap, topic_name, end)
    assert {m.key(): m.value() for m in records} == latest


@pytest.mark.brook_config(log_cleaner_backoff_ms=20, log_cleaner_dedupe_buffer_size=100)
def test_an_offset_map_too_small_waits_for_a_bigger_one(brook_broker, topic_name, caplog):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config=COMPACTED)
    latest = _produce_rounds(bootstrap, topic_name, range(10))
    end = watermarks(bootstrap, topic_name, 1)[0][1]
    wait_until(lambda: f"Cannot clean {topic_name}-0" in caplog.text, "the cleaner's complaint")
    assert "log.cleaner.dedupe.buffer.size" in caplog.text
    assert _cleanings(brook_broker, topic_name) == []
    # Not given up on: with room in the map, the log is cleaned.
    incremental(
        bootstrap, ResourceType.BROKER, "0", [("log.cleaner.dedupe.buffer.size", SET, "10000000")]
    )
    wait_until(
        lambda: _cleaned_to_the_active_segment(brook_broker, topic_name),
        "cleaner checkpoint at the active segment",
    )
    records = _consume_from_start(bootstrap, topic_name, end)
    assert {m.key(): m.value() for m in records} == latest


# CPython's switch interval when nothing changed it.
DEFAULT_SWITCH_INTERVAL_S = 0.005


def _switch_interval(admin_url: str) -> float | None:
    """brook_gil_switch_interval_seconds of the broker's /metrics (None until it answers)."""
    try:
        with urllib.request.urlopen(admin_url + "/metrics", timeout=10) as response:
            text = response.read().decode()
    except OSError:
        return None
    found = re.search(r"^brook_gil_switch_interval_seconds (\S+)$", text, re.MULTILINE)
    assert found, "no brook_gil_switch_interval_seconds in /metrics"
    return float(found.group(1))


def _cleaned_to_the_end(data_dir: Path, topic: str) -> bool:
    """The cleaner checkpoint file on disk names the partition's active segment."""
    cleaned = OffsetCheckpointFile(data_dir / CLEANER_OFFSET_CHECKPOINT_FILE).read()
    active_base = max(int(path.stem) for path in (data_dir / f"{topic}-0").glob("*.log"))
    return cleaned.get((topic, 0)) == active_base


def test_brook_serve_lowers_the_switch_interval_only_while_it_cleans(tmp_path, topic_name):
    """`brook serve` hands the GIL to its event loop within 0.5 ms while a cleaning runs
    (its thread would otherwise hold up each of the loop's system calls for up to 5 ms),
    and puts CPython's interval back when no cleaning runs. A cleaning throttled to a
    byte a second stays under way until the throttle is lifted."""
    admin_url = f"http://127.0.0.1:{free_port()}"
    data_dir = tmp_path / "data"
    broker = BrokerProcess(
        data_dir,
        {
            "admin.listener": admin_url,
            "log.cleaner.backoff.ms": "20",
            "log.cleaner.io.max.bytes.per.second": "1",
        },
    ).start()
    try:
        bootstrap = broker.bootstrap
        interval = wait_until(lambda: _switch_interval(admin_url), what="the admin endpoint")
        assert interval == DEFAULT_SWITCH_INTERVAL_S
        create_topic(bootstrap, topic_name, 1, COMPACTED)
        latest = _produce_rounds(bootstrap, topic_name, range(10))
        wait_until(
            lambda: _switch_interval(admin_url) == CLEANER_SWITCH_INTERVAL_S,
            "a throttled cleaning under way",
        )
        assert not _cleaned_to_the_end(data_dir, topic_name)
        incremental(
            bootstrap,
            ResourceType.BROKER,
            "0",
            [("log.cleaner.io.max.bytes.per.second", SET, "1.7976931348623157E308")],
        )
        wait_until(
            lambda: _cleaned_to_the_end(data_dir, topic_name),
            "the cleaner checkpoint at the active segment",
        )
        wait_until(
            lambda: _switch_interval(admin_url) == DEFAULT_SWITCH_INTERVAL_S,
            "the interval put back",
        )
        end = watermarks(bootstrap, topic_name, 1)[0][1]
        records = _consume_from_start(bootstrap, topic_name, end)
        assert {m.key(): m.value() for m in records} == latest
    finally:
        assert broker.stop() == 0
