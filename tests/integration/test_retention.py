"""Retention by time and size deletes whole segments past their limits, and nothing else.

Short intervals instead of long sleeps: the retention check runs every 200 ms here, and
old records are made old by their CreateTime timestamps, as Kafka judges time
retention by the largest record timestamp in a segment.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from brook.broker.testing import BrokerThread, wait_until

from .clients import consume_all, create_topic
from .clocks import ShiftedClock
from .processes import watermarks

CHECK_EVERY_MS = 200
pytestmark = pytest.mark.brook_config(log_retention_check_interval_ms=CHECK_EVERY_MS)


def _produce_batches(bootstrap: str, topic: str, values: list[bytes], timestamp_ms: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for value in values:  # one batch each, so segment.bytes rolls between them
        producer.produce(topic, value=value, partition=0, timestamp=timestamp_ms)
        producer.flush(10)


def _segments(data_dir: Path, topic: str, suffix: str = ".log") -> list[int]:
    return sorted(
        int(path.name.split(".")[0])
        for path in (data_dir / f"{topic}-0").iterdir()
        if path.name.endswith(suffix)
    )


def _earliest(bootstrap: str, topic: str) -> int:
    return watermarks(bootstrap, topic, 1)[0][0]


def _broker_on_a_shifted_clock(tmp_path: Path) -> tuple[ShiftedClock, BrokerThread]:
    """A broker whose clock the test moves on, checking retention every CHECK_EVERY_MS."""
    clock = ShiftedClock()
    broker = BrokerThread(
        tmp_path / "data", {"log.retention.check.interval.ms": CHECK_EVERY_MS}, clock=clock
    ).start()
    return clock, broker


def test_time_retention_deletes_only_segments_whose_newest_record_is_too_old(tmp_path, topic_name):
    """Two batches a segment, six old and three new; once the broker's clock passes
    retention.ms for the old ones, their three segments go and the new ones stay.

    The records are all young while they are written, and the broker's clock moves on
    only after: a retention pass amid the writes would delete the partly filled active
    segment of old records (Kafka does too) and shift the segment boundaries, leaving
    the last old record in a segment with a new one, kept for its sake."""
    clock, broker = _broker_on_a_shifted_clock(tmp_path)
    try:
        bootstrap = broker.bootstrap
        create_topic(
            bootstrap,
            topic_name,
            config={"segment.bytes": "1000", "retention.ms": "600000", "file.delete.delay.ms": "0"},
        )
        now = clock()
        old = [b"old-%d" % i + b"." * 400 for i in range(6)]
        _produce_batches(bootstrap, topic_name, old, now)
        # Five minutes ahead: within log.message.timestamp.after.max.ms (an hour).
        new = [b"new-%d" % i + b"." * 400 for i in range(3)]
        _produce_batches(bootstrap, topic_name, new, now + 5 * 60_000)
        assert _segments(broker.data_dir, topic_name) == [0, 2, 4, 6, 8]
        assert _log_start(broker, topic_name) == 0

        # Eleven minutes on: the old records are past retention.ms, the new ones six
        # minutes old.
        clock.shift_ms += 11 * 60_000
        wait_until(lambda: _log_start(broker, topic_name) == 6)
        assert _earliest(bootstrap, topic_name) == 6
        remaining = consume_all(bootstrap, topic_name, 3, offset=-2)
        assert [m.value()[:5] for m in remaining] == [b"new-0", b"new-1", b"new-2"]
        assert _segments(broker.data_dir, topic_name) == [6, 8]
        assert not _segments(broker.data_dir, topic_name, ".deleted")
    finally:
        broker.stop()


def test_size_retention_keeps_the_newest_bytes(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(
        bootstrap,
        topic_name,
        config={"segment.bytes": "1000", "retention.bytes": "2500", "file.delete.delay.ms": "0"},
    )
    now = int(time.time() * 1000)
    _produce_batches(bootstrap, topic_name, [b"%02d" % i + b"." * 500 for i in range(12)], now)

    def total_size() -> int:
        # Read on the broker's loop: a file listed here may be deleted by retention
        # before this thread could stat it.
        return brook_broker.call(
            lambda: brook_broker.broker.log_manager.get_log(topic_name, 0).size_in_bytes
        )

    wait_until(lambda: total_size() <= 2500 + 1000)
    start = _earliest(bootstrap, topic_name)
    assert 0 < start < 12
    values = consume_all(bootstrap, topic_name, 12 - start, offset=-2)
    assert [int(m.value()[:2]) for m in values] == list(range(start, 12))


def test_deleted_segments_wait_for_file_delete_delay(tmp_path, topic_name):
    """Segments past retention are renamed `.deleted` at once and removed only once
    file.delete.delay.ms has passed on the broker's clock, which the test moves on."""
    clock, broker = _broker_on_a_shifted_clock(tmp_path)
    try:
        bootstrap = broker.bootstrap
        create_topic(
            bootstrap,
            topic_name,
            config={
                "segment.bytes": "1000",
                # Ten minutes: the fresh record stays young after the jump below.
                "retention.ms": "600000",
                "file.delete.delay.ms": "60000",
            },
        )
        old = clock() - 20 * 60_000
        _produce_batches(bootstrap, topic_name, [b"." * 600 for _ in range(3)], old)
        _produce_batches(bootstrap, topic_name, [b"fresh"], clock())
        # The fresh record shares the third segment, whose newest timestamp keeps it.
        wait_until(lambda: _log_start(broker, topic_name) == 2)
        renamed = _segments(broker.data_dir, topic_name, ".log.deleted")
        assert renamed == [0, 1]
        checks = _retention_checks(broker)
        wait_until(lambda: _retention_checks(broker) >= checks + 2)
        assert _segments(broker.data_dir, topic_name, ".log.deleted") == renamed  # not yet
        clock.shift_ms += 61_000
        wait_until(lambda: _segments(broker.data_dir, topic_name, ".deleted") == [])
        assert _segments(broker.data_dir, topic_name) == [2]
    finally:
        broker.stop()


def test_retention_minus_one_keeps_everything(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"segment.bytes": "1000", "retention.ms": "-1"})
    ancient = 1_000_000_000_000  # 2001
    _produce_batches(bootstrap, topic_name, [b"." * 600 for _ in range(4)], ancient)
    checks = _retention_checks(brook_broker)
    wait_until(lambda: _retention_checks(brook_broker) >= checks + 2)
    assert _earliest(bootstrap, topic_name) == 0
    assert len(_segments(brook_broker.data_dir, topic_name)) >= 4


def _retention_checks(broker: BrokerThread) -> int:
    """How many retention passes the broker has run (its own count)."""
    return broker.call(lambda: broker.broker.retention_checks)


def _log_start(broker: BrokerThread, topic: str) -> int:
    return broker.call(lambda: broker.broker.log_manager.get_log(topic, 0).log_start_offset)


def test_segment_ms_rolls_by_age(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"segment.ms": "300"})
    _produce_batches(bootstrap, topic_name, [b"first"], int(time.time() * 1000))
    time.sleep(0.5)
    _produce_batches(bootstrap, topic_name, [b"second"], int(time.time() * 1000))
    assert _segments(brook_broker.data_dir, topic_name) == [0, 1]
