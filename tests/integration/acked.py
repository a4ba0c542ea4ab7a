"""A producer that records exactly what the broker acknowledged, and the checks that
every acknowledged record is read back at its offset: the crash and full-disk tests.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from .processes import read_partition, watermarks


class AckRecorder:
    """A producer thread that sends without pause and records every acknowledged record.

    Values are unique (`<run>-<sequence>`), partitions round-robin. Only a delivery
    report without error counts as acknowledged: that is the promise acks=1 makes.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        run: str,
        *,
        partitions: int,
        acks: str = "1",
        value_size: int = 40,
        message_timeout_ms: int = 300_000,
        rate: float | None = None,
        idempotent: bool = False,
    ) -> None:
        self.acked: list[tuple[int, int, bytes]] = []
        self.sent = 0
        self.failed = 0
        self._bootstrap = bootstrap
        self._topic = topic
        self._run = run
        self._partitions = partitions
        self._acks = acks
        self._padding = b"x" * value_size
        self._message_timeout_ms = message_timeout_ms
        # At most this many records a second (None: as fast as the broker takes them).
        self._rate = rate
        # Idempotent (acks=all, retries deduplicated): the cluster's loss test.
        self._idempotent = idempotent
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._produce, name=f"producer-{run}", daemon=True)

    def __enter__(self) -> AckRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _on_delivery(self, error: object, message: object) -> None:
        if error is None:
            self.acked.append((message.partition(), message.offset(), message.value()))  # type: ignore[attr-defined]
        else:
            self.failed += 1

    def _produce(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "acks": self._acks,
                "message.timeout.ms": self._message_timeout_ms,
                "enable.idempotence": self._idempotent,
                "linger.ms": 2,
                "batch.num.messages": 200,
                "reconnect.backoff.max.ms": 200,
            }
        )
        started = time.monotonic()
        try:
            while not self._stop.is_set():
                # Ahead of the rate, or too many outstanding (kept bounded, so the kill
                # catches some in flight without the queue growing without end): wait 10 ms,
                # then send what fell due in a burst. Not 1 ms: where the broker is a thread
                # of this process, a thread waking a thousand times a second to take the GIL
                # starved the broker's loop on a loaded machine (its writes waited seconds to
                # get the GIL back, and a log dir move chased the log end for 300 s).
                if self._rate is not None and self.sent > (time.monotonic() - started) * self._rate:
                    producer.poll(0.01)
                    continue
                if self.sent - len(self.acked) - self.failed > 3000:
                    producer.poll(0.01)
                    continue
                value = f"{self._run}-{self.sent:08d}-".encode() + self._padding
                try:
                    producer.produce(
                        self._topic,
                        value=value,
                        partition=self.sent % self._partitions,
                        on_delivery=self._on_delivery,
                    )
                except BufferError:
                    producer.poll(0.01)
                    continue
                self.sent += 1
                producer.poll(0)
            # The broker is gone: whatever was not answered is not acknowledged.
            producer.purge()
            producer.flush(10)
        except BaseException as exc:
            self._error = exc

    def wait_for_acks(self, count: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < count:
            assert self._error is None, self._error
            assert time.monotonic() < deadline, f"only {len(self.acked)} of {count} acked"
            time.sleep(0.01)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "producer thread did not stop"
        if self._error is not None:
            raise self._error


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[int, list[tuple[int, bytes]]]:
    """Every partition's records as (offset, value), checking that offsets are contiguous
    from 0 to the high watermark."""
    stored: dict[int, list[tuple[int, bytes]]] = {}
    for partition, (low, high) in enumerate(watermarks(bootstrap, topic, partitions)):
        assert low == 0
        messages = read_partition(bootstrap, topic, partition, high)
        stored[partition] = [(m.offset(), m.value()) for m in messages]
        assert [offset for offset, _ in stored[partition]] == list(range(high)), (
            f"partition {partition}: offsets are not 0..{high - 1} without gaps"
        )
    return stored


def assert_all_acked_kept(
    stored: dict[int, list[tuple[int, bytes]]], acked: list[tuple[int, int, bytes]]
) -> None:
    for partition, offset, value in acked:
        records = stored[partition]
        assert offset < len(records), f"acked {partition}/{offset} is beyond the log end"
        assert records[offset][1] == value, f"acked {partition}/{offset} holds another value"
    # Each value was sent once and no retry reached a broker: nothing is stored twice.
    values = [value for records in stored.values() for _, value in records]
    assert len(values) == len(set(values)), "a record is stored twice"


def assert_order_kept(stored: dict[int, list[tuple[int, bytes]]]) -> None:
    """Per partition, records sit in the order they were sent (`<run>-<sequence>-...`)."""
    for partition, records in stored.items():
        sequences = [int(value.split(b"-")[1]) for _, value in records]
        assert sequences == sorted(sequences), f"partition {partition} is out of order"
