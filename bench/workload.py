"""The client side of every measurement, through confluent-kafka (librdkafka), as users run it.

Nothing here knows which broker is on the other end; each function raises WorkloadError when the
broker does not deliver, so the runner can mark that phase failed and go on.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from .kafka_admin import NewTopic

# librdkafka logs every refused connection at error level; a failing broker would flood the
# terminal, so logs are silenced and errors reach us through error_cb and delivery reports instead.
QUIET_LOG_LEVEL = 2
METADATA_TIMEOUT_S = 15.0
# A consumer that receives nothing for this long is considered stuck.
CONSUME_STALL_S = 15.0


# Asked while waiting on the broker, so that a broker that died ends the wait at once instead of
# after the phase timeout.
Alive = Callable[[], bool]
# Longest single wait on librdkafka before asking again whether the broker is alive.
WAIT_SLICE_S = 0.25


class WorkloadError(RuntimeError):
    """A phase could not complete: the broker refused, timed out or lost messages."""


def _assumed_alive() -> bool:
    return True


def _flush(producer: Producer, deadline: float, alive: Alive) -> int:
    """flush() until the queue is empty or the deadline passes; returns messages left.

    flush() returns as soon as the queue drains, so waiting in slices costs no accuracy.
    """
    while True:
        remaining = producer.flush(min(WAIT_SLICE_S, max(0.0, deadline - time.perf_counter())))
        if remaining == 0 or time.perf_counter() >= deadline:
            return int(remaining)
        if not alive():
            raise WorkloadError(f"the broker exited with {remaining} messages unacknowledged")


@dataclass(frozen=True)
class Throughput:
    messages: int
    payload_bytes: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def mb_per_s(self) -> float:
        # MB = 10**6 bytes of message value; protocol overhead is not counted.
        return self.payload_bytes / self.seconds / 1e6


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p99_ms: float
    max_ms: float
    messages: int
    achieved_rate: float


class _Errors:
    """Collects client-level errors (error_cb) to explain a failure."""

    def __init__(self) -> None:
        self.last: str | None = None

    def __call__(self, err: KafkaError) -> None:
        self.last = str(err)

    def suffix(self) -> str:
        return f" (last client error: {self.last})" if self.last else ""


def _client_config(bootstrap: str, errors: _Errors, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "client.id": "brook-bench",
        "log_level": QUIET_LOG_LEVEL,
        "error_cb": errors,
        **extra,
    }


def create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> None:
    """Create the topic through CreateTopics, as the AdminClient does, and wait for it."""
    errors = _Errors()
    admin = AdminClient(_client_config(bootstrap, errors))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    try:
        futures[topic].result(timeout=timeout_s)
    except Exception as exc:  # KafkaException or a timeout: either way the phase cannot run
        raise WorkloadError(f"CreateTopics {topic!r} failed: {exc}{errors.suffix()}") from exc


def _wait_for_metadata(client: Producer | Consumer, topic: str, errors: _Errors) -> None:
    """Fetch the topic's metadata first so connection setup is not part of the measurement."""
    try:
        meta = client.list_topics(topic, timeout=METADATA_TIMEOUT_S)
    except Exception as exc:
        raise WorkloadError(f"metadata for {topic!r} failed: {exc}{errors.suffix()}") from exc
    info = meta.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        detail = info.error if info is not None else "absent"
        raise WorkloadError(f"topic {topic!r} not usable: {detail}{errors.suffix()}")


class _Sender:
    """One producer's timed run: sends, waits for acknowledgements, commits, and fails the phase
    (WorkloadError) on a refusal, a timeout or a broker that died."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        count: int,
        size: int,
        timeout_s: float,
        alive: Alive,
        **config: Any,
    ) -> None:
        self.errors = _Errors()
        self.producer = Producer(_client_config(bootstrap, self.errors, **config))
        # Metadata first, so connection setup is not part of the measurement.
        _wait_for_metadata(self.producer, topic, self.errors)
        self.topic = topic
        self.count = count
        self.size = size
        self.timeout_s = timeout_s
        self.alive = alive
        # Random bytes so that nothing on the path can profit from repetitive payloads.
        self.payload = os.urandom(size)
        self.failed = 0
        self.first_failure: str | None = None
        self.started = self.deadline = 0.0

    def on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.failed += 1
            self.first_failure = self.first_failure or str(err)

    def start_clock(self) -> None:
        self.started = time.perf_counter()
        self.deadline = self.started + self.timeout_s

    def send(self, messages: range) -> None:
        """produce() the messages numbered `messages` as fast as the local queue takes them."""
        for i in messages:
            while True:
                try:
                    self.producer.produce(self.topic, self.payload, on_delivery=self.on_delivery)
                    break
                except BufferError:
                    # The local queue is full: let librdkafka drain it and serve delivery reports.
                    self.producer.poll(0.005)
                    if not self.alive():
                        raise WorkloadError(
                            f"the broker exited after {i} of {self.count} messages"
                        ) from None
                    if time.perf_counter() > self.deadline:
                        raise WorkloadError(
                            f"timed out after {self.timeout_s:.0f}s with {i} of {self.count} "
                            f"messages queued{self.errors.suffix()}"
                        ) from None
            if i & 1023 == 0:
                self.producer.poll(0)

    def drain(self) -> None:
        """Wait until every queued message is acknowledged; any failed delivery fails the phase."""
        remaining = _flush(self.producer, self.deadline, self.alive)
        if remaining:
            raise WorkloadError(
                f"timed out after {self.timeout_s:.0f}s with {remaining} of {self.count} messages "
                f"unacknowledged{self.errors.suffix()}"
            )
        if self.failed:
            raise WorkloadError(
                f"{self.failed} of {self.count} messages failed, first: {self.first_failure}"
            )

    def transaction_call(self, name: str, *args: float) -> None:
        """init_transactions() or begin_transaction(), with the broker's refusal as the reason."""
        try:
            getattr(self.producer, name)(*args)
        except KafkaException as exc:
            raise WorkloadError(f"{name}() failed: {exc.args[0]}{self.errors.suffix()}") from exc

    def commit(self) -> None:
        """commit_transaction() in slices: librdkafka resumes a commit that timed out when it is
        called again, so a broker that died ends the wait at once instead of at the deadline."""
        while True:
            left = max(0.0, self.deadline - time.perf_counter())
            try:
                self.producer.commit_transaction(min(WAIT_SLICE_S, left))
                return
            except KafkaException as exc:
                err = exc.args[0]
                if not err.retriable() or time.perf_counter() >= self.deadline:
                    raise WorkloadError(
                        f"commit_transaction() failed: {err}{self.errors.suffix()}"
                    ) from exc
                if not self.alive():
                    raise WorkloadError("the broker exited during commit_transaction()") from exc

    def result(self) -> Throughput:
        return Throughput(self.count, self.count * self.size, time.perf_counter() - self.started)


def produce_throughput(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    acks: str,
    timeout_s: float,
    linger_ms: int = 5,
    alive: Alive = _assumed_alive,
) -> Throughput:
    """Send `count` messages of `size` bytes as fast as the client can and time until all are acked.

    batch.size and batch.num.messages stay at librdkafka's defaults, which is what users get.
    """
    sender = _Sender(
        bootstrap, topic, count, size, timeout_s, alive, acks=acks, **{"linger.ms": linger_ms}
    )
    sender.start_clock()
    sender.send(range(count))
    sender.drain()
    return sender.result()


def produce_transactional_throughput(
    bootstrap: str,
    topic: str,
    count: int,
    size: int,
    per_transaction: int,
    timeout_s: float,
    linger_ms: int = 5,
    alive: Alive = _assumed_alive,
) -> Throughput:
    """Send `count` messages in transactions of `per_transaction` and time until the last commits.

    Each transaction is begin_transaction(), its messages, commit_transaction(): the coordinator's
    AddPartitionsToTxn and EndTxn and the COMMIT markers are in the measurement.
    init_transactions() (FindCoordinator, InitProducerId) is set-up, like the metadata fetch, and
    is not. A transactional producer is idempotent, with acks=all, as librdkafka requires.
    """
    sender = _Sender(
        bootstrap,
        topic,
        count,
        size,
        timeout_s,
        alive,
        acks="all",
        **{"linger.ms": linger_ms, "transactional.id": f"brook-bench-{topic}"},
    )
    sender.transaction_call("init_transactions", METADATA_TIMEOUT_S)
    sender.start_clock()
    for first in range(0, count, per_transaction):
        sender.transaction_call("begin_transaction")
        sender.send(range(first, min(first + per_transaction, count)))
        # commit_transaction() flushes too, but without asking whether the broker is still alive;
        # flushing first leaves it only the EndTxn round trip.
        sender.drain()
        sender.commit()
    return sender.result()


def consume_throughput(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    size: int,
    timeout_s: float,
    isolation_level: str = "read_committed",
    alive: Alive = _assumed_alive,
) -> Throughput:
    """Read `expected` messages from the start of every partition and time it.

    assign() instead of subscribe(): no group rebalance in the measurement, and no commits.
    fetch.queue.backoff.ms is low so librdkafka fetches again at once and the client is not the cap.
    read_committed is librdkafka's default isolation.level, so it is what users get; on
    transactional data the client skips the COMMIT markers, which are not counted as messages.
    """
    errors = _Errors()
    consumer = Consumer(
        _client_config(
            bootstrap,
            errors,
            **{
                "group.id": "brook-bench",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "fetch.queue.backoff.ms": 1,
                "isolation.level": isolation_level,
            },
        )
    )
    try:
        _wait_for_metadata(consumer, topic, errors)
        received = 0
        payload_bytes = 0
        started = time.perf_counter()
        deadline = started + timeout_s
        last_progress = started
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while received < expected:
            # consume() waits until it has num_messages or the timeout passes, so never ask for
            # more than are left: the last batch would otherwise sit out the whole timeout.
            batch = consumer.consume(num_messages=min(10_000, expected - received), timeout=0.2)
            now = time.perf_counter()
            for msg in batch:
                err = msg.error()
                if err is not None:
                    raise WorkloadError(f"fetch error after {received} messages: {err}")
                payload_bytes += len(msg.value() or b"")
                received += 1
            if batch:
                last_progress = now
            elif not alive():
                raise WorkloadError(f"the broker exited after {received} of {expected} messages")
            elif now - last_progress > CONSUME_STALL_S:
                raise WorkloadError(
                    f"stalled: no message for {CONSUME_STALL_S:.0f}s after {received} of "
                    f"{expected}{errors.suffix()}"
                )
            if now > deadline:
                raise WorkloadError(
                    f"timed out after {timeout_s:.0f}s with {received} of {expected} messages"
                )
        elapsed = time.perf_counter() - started
    finally:
        consumer.close()
    if payload_bytes != expected * size:
        raise WorkloadError(f"read {payload_bytes} payload bytes, expected {expected * size}")
    return Throughput(received, payload_bytes, elapsed)


def produce_latency(
    bootstrap: str,
    topic: str,
    rate: int,
    seconds: float,
    size: int,
    timeout_s: float,
    alive: Alive = _assumed_alive,
) -> Latency:
    """Send at a fixed rate with acks=1 and linger.ms=0; latency is produce() to delivery report.

    A separate thread waits in poll() so a delivery report is handled as soon as it arrives rather
    than at the next send; Message.latency() is librdkafka's own produce()-to-report clock.
    """
    errors = _Errors()
    producer = Producer(_client_config(bootstrap, errors, acks="1", **{"linger.ms": 0}))
    _wait_for_metadata(producer, topic, errors)
    payload = os.urandom(size)

    # Warm-up: the first messages pay for connection setup and the partition leader lookup.
    for _ in range(50):
        producer.produce(topic, payload)
    if _flush(producer, time.perf_counter() + METADATA_TIMEOUT_S, alive):
        raise WorkloadError(f"warm-up messages were not acknowledged{errors.suffix()}")

    latencies: list[float] = []
    failed: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(str(err))
            return
        latency = msg.latency()
        if latency is not None and latency >= 0:
            latencies.append(latency)

    stop = threading.Event()

    def serve_reports() -> None:
        while not stop.is_set():
            producer.poll(0.05)

    poller = threading.Thread(target=serve_reports, name="bench-delivery-poller", daemon=True)
    poller.start()
    total = int(rate * seconds)
    interval = 1.0 / rate
    try:
        started = time.perf_counter()
        for i in range(total):
            # Pace against the schedule, not the previous send, so jitter does not lower the rate.
            delay = started + i * interval - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            producer.produce(topic, payload, on_delivery=on_delivery)
        sent_for = time.perf_counter() - started
        remaining = _flush(producer, time.perf_counter() + timeout_s, alive)
    finally:
        stop.set()
        poller.join()
    if remaining:
        raise WorkloadError(f"{remaining} of {total} messages unacknowledged{errors.suffix()}")
    if failed:
        raise WorkloadError(f"{len(failed)} of {total} messages failed, first: {failed[0]}")
    if len(latencies) < total:
        raise WorkloadError(f"only {len(latencies)} of {total} deliveries reported a latency")
    ordered = sorted(latencies)
    return Latency(
        p50_ms=percentile(ordered, 50) * 1e3,
        p99_ms=percentile(ordered, 99) * 1e3,
        max_ms=ordered[-1] * 1e3,
        messages=total,
        achieved_rate=total / sent_for,
    )


def percentile(ordered: list[float], pct: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty list."""
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def read_partition_to_end(config: dict[str, Any], topic: str) -> tuple[float, int]:
    """Seconds from assign() to the end of partition 0 of `topic`, and the records received
    (`config`: the client's connection settings, and isolation.level where it matters)."""
    consumer = Consumer(
        {
            **config,
            "group.id": "bench",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.queue.backoff.ms": 1,
        }
    )
    received = 0
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        while True:
            for message in consumer.consume(10_000, timeout=1.0):
                error = message.error()
                if error is None:
                    received += 1
                elif error.code() == KafkaError._PARTITION_EOF:
                    return time.perf_counter() - started, received
                else:
                    raise RuntimeError(str(error))
    finally:
        consumer.close()
