"""Seed a topic and read back what it holds, through a real Kafka client.

The pytest fixtures' helpers (`brook_broker.produce(...)`, `brook_broker.records(...)`,
`create_topic`) use confluent-kafka over the broker's listener, exactly as the code under
test talks to it: what they read is what any consumer would read, and what they write
goes through the broker's full produce path (validation, offsets, indexes). Their
contract is that client's: `config` takes its (librdkafka's) names, a refused record
carries its KafkaError, a missing topic raises its KafkaException.

confluent-kafka is the `testing` extra (`pip install 'brook-broker[testing]'`), not a
dependency of the broker: the fixtures start brokers without it, and a helper called
without it says what to install.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A record to produce: a value; a (key, value) pair; or a mapping with any of key,
# value, headers, partition and timestamp (ms). str is encoded as UTF-8.
Bytes = bytes | str | None
RecordLike = Bytes | tuple[Bytes, Bytes] | Mapping[str, Any]

DEFAULT_TIMEOUT_S = 30.0
MISSING_CLIENT = (
    "brook_broker.produce(), records() and create_topic() seed and read topics through"
    " confluent-kafka, which is not installed: pip install 'brook-broker[testing]'"
)


class ClientLibraryMissingError(ImportError):
    """confluent-kafka, which the helpers drive, is not installed."""


def require_client_library() -> None:
    """Import confluent-kafka, or say which extra brings it."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as exc:
        raise ClientLibraryMissingError(MISSING_CLIENT) from exc


class ProduceError(Exception):
    """A record the broker did not take; `error` is the client's KafkaError."""

    def __init__(self, topic: str, error: Any) -> None:
        super().__init__(f"producing to {topic} failed: {error}")
        self.error = error


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """A record as a consumer reads it back."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    timestamp: int = -1


@dataclass(frozen=True, slots=True)
class Produced:
    """Where the broker put a produced record."""

    partition: int
    offset: int


def _encode(item: Bytes) -> bytes | None:
    return item.encode() if isinstance(item, str) else item


def _as_fields(record: RecordLike) -> dict[str, Any]:
    if isinstance(record, Mapping):
        unknown = set(record) - {"key", "value", "headers", "partition", "timestamp"}
        if unknown:
            raise ValueError(f"unknown record fields {sorted(unknown)}")
        fields = dict(record)
    elif isinstance(record, tuple):
        key, value = record
        fields = {"key": key, "value": value}
    else:
        fields = {"value": record}
    fields["key"] = _encode(fields.get("key"))
    fields["value"] = _encode(fields.get("value"))
    if fields.get("headers") is not None:
        headers = fields["headers"]
        items = headers.items() if isinstance(headers, Mapping) else headers
        fields["headers"] = [(name, _encode(value)) for name, value in items]
    return fields


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[RecordLike],
    partition: int | None = None,
    config: Mapping[str, Any] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[Produced]:
    """Produce `records` in order (acks=all, idempotent) and wait until the broker has
    them; returns each record's partition and offset. A record the broker refuses
    raises ProduceError. `partition` applies to records that name none; `config` is
    more producer configuration by librdkafka's names (e.g. compression.type)."""
    require_client_library()
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 5,
            **(config or {}),
        }
    )
    outcomes: list[Any] = []
    for number, record in enumerate(records):
        fields = _as_fields(record)
        if fields.get("partition") is None and partition is not None:
            fields["partition"] = partition
        outcomes.append(None)

        def delivered(error: Any, message: Any, number: int = number) -> None:
            outcomes[number] = error if error is not None else message

        kwargs = {name: value for name, value in fields.items() if value is not None}
        producer.produce(topic, on_delivery=delivered, **kwargs)
        producer.poll(0)
    if producer.flush(timeout) != 0:
        raise TimeoutError(f"records to {topic} not delivered within {timeout} s")
    produced = []
    for outcome in outcomes:
        if outcome is None or not hasattr(outcome, "offset"):
            raise ProduceError(topic, outcome)
        produced.append(Produced(outcome.partition(), outcome.offset()))
    return produced


def read_records(
    bootstrap: str,
    topic: str,
    partitions: Sequence[int] | None = None,
    isolation_level: str = "read_uncommitted",
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[ConsumedRecord]:
    """Every record of the topic (or of `partitions`) from the log start up to the high
    watermark at the time of the call, partition by partition in offset order. No group
    is joined and no offset committed. A topic that does not exist raises KafkaException
    (UNKNOWN_TOPIC_OR_PART). read_committed leaves aborted records out and waits for
    open transactions below the high watermark to end (up to `timeout`)."""
    require_client_library()
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            # Consumer needs a group id, though assign() joins no group.
            "group.id": f"brook-records-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": isolation_level,
            "allow.auto.create.topics": False,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout).topics[topic]
        if metadata.error is not None:
            raise KafkaException(metadata.error)
        chosen = sorted(metadata.partitions) if partitions is None else list(partitions)
        # What to read: from the log start to the high watermark, as of now.
        ends: dict[int, int] = {}
        starts: dict[int, int] = {}
        for index in chosen:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, index), timeout=timeout
            )
            starts[index], ends[index] = low, high
        wanted = [index for index in chosen if ends[index] > starts[index]]
        consumer.assign([TopicPartition(topic, index, starts[index]) for index in wanted])
        found: dict[int, list[ConsumedRecord]] = {index: [] for index in chosen}
        done: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(done) < len(wanted):
            if time.monotonic() > deadline:
                raise TimeoutError(f"records of {topic} not read within {timeout} s")
            message = consumer.poll(0.2)
            if message is not None:
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                if error is None:
                    partition, offset = message.partition(), message.offset()
                    # A message without error always carries its partition and offset.
                    assert partition is not None and offset is not None
                    if offset < ends[partition]:
                        found[partition].append(_consumed(message))
            # The client's position passes transaction markers (and, read_committed,
            # aborted records), which no message shows: done once it reaches the end.
            reading = [TopicPartition(topic, index) for index in wanted if index not in done]
            for position in consumer.position(reading):
                if position.offset >= ends[position.partition]:
                    done.add(position.partition)
        return [record for index in chosen for record in found[index]]
    finally:
        consumer.close()


def _consumed(message: Any) -> ConsumedRecord:
    _, timestamp = message.timestamp()
    return ConsumedRecord(
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        key=message.key(),
        value=message.value(),
        headers=list(message.headers() or []),
        timestamp=timestamp,
    )


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = -1,
    config: Mapping[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> None:
    """Create a topic; `partitions` -1 takes the broker's num.partitions, as Kafka's
    CreateTopics does. Raises KafkaException as the admin client does, e.g.
    TOPIC_ALREADY_EXISTS."""
    require_client_library()
    from confluent_kafka.admin import AdminClient

    # NewTopic is confluent_kafka.admin's, whose names mypy sees only in cimpl's stub.
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = NewTopic(name, partitions, -1, config=dict(config or {}))
    admin.create_topics([new], operation_timeout=timeout)[name].result(timeout)
