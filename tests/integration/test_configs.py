"""Topic and broker configs through confluent-kafka's admin API: DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs as Kafka answers them, changes that apply at
once, and changes that survive a restart.
"""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

import pytest
from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    KafkaError,
    KafkaException,
    Producer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from brook.broker.config.topic_config import TOPIC_CONFIGS
from brook.broker.testing import BrokerThread

from .clients import CODECS, consume_all, create_topic, produce, stored_batches
from .processes import watermarks

SET = AlterConfigOpType.SET
DELETE = AlterConfigOpType.DELETE
APPEND = AlterConfigOpType.APPEND
SUBTRACT = AlterConfigOpType.SUBTRACT


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def describe(bootstrap: str, kind: ResourceType, name: str) -> dict[str, Any]:
    resource = ConfigResource(kind, name)
    admin = _admin(bootstrap)  # kept alive until the result is in
    return admin.describe_configs([resource])[resource].result(15)


def incremental(
    bootstrap: str,
    kind: ResourceType,
    name: str,
    ops: list[tuple[str, AlterConfigOpType, str | None]],
    validate_only: bool = False,
) -> None:
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, op, value in ops]
    resource = ConfigResource(kind, name, incremental_configs=entries)
    admin = _admin(bootstrap)
    admin.incremental_alter_configs([resource], validate_only=validate_only)[resource].result(15)


def legacy_alter(bootstrap: str, kind: ResourceType, name: str, configs: dict[str, str]) -> None:
    resource = ConfigResource(kind, name, set_config=configs)
    admin = _admin(bootstrap)
    with warnings.catch_warnings():  # deprecated in the client; tested on purpose
        warnings.simplefilter("ignore", DeprecationWarning)
        futures = admin.alter_configs([resource])
    futures[resource].result(15)


def kafka_error(call: Any, *args: Any, **kwargs: Any) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        call(*args, **kwargs)
    return raised.value.args[0]


def synonyms(entry: Any) -> list[tuple[str, str | None, ConfigSource]]:
    return [(s.name, s.value, ConfigSource(s.source)) for s in entry.synonyms.values()]


def produce_error(bootstrap: str, topic: str, value: bytes, **config: Any) -> Any:
    """Produce one message and return its delivery error (None when it was written)."""
    outcome: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, **config})
    producer.produce(topic, value=value, partition=0, on_delivery=lambda e, m: outcome.append(e))
    assert producer.flush(15) == 0
    return outcome[0]


# --- DescribeConfigs ---------------------------------------------------------------------


@pytest.mark.brook_config(log_retention_ms=3_600_000)
def test_describe_topic_lists_every_key_with_source_and_synonyms(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"retention.bytes": "5000"})
    described = describe(bootstrap, ResourceType.TOPIC, topic_name)
    assert set(described) == set(TOPIC_CONFIGS)
    assert not any(entry.is_read_only or entry.is_sensitive for entry in described.values())

    overridden = described["retention.bytes"]
    assert (overridden.value, ConfigSource(overridden.source)) == (
        "5000",
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
    )
    assert synonyms(overridden) == [
        ("retention.bytes", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("log.retention.bytes", "-1", ConfigSource.DEFAULT_CONFIG),
    ]
    # Set on the command line: the static broker value, then Kafka's default.
    static = described["retention.ms"]
    assert (static.value, ConfigSource(static.source)) == (
        "3600000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert synonyms(static) == [
        ("log.retention.ms", "3600000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]
    default = described["max.message.bytes"]
    assert (default.value, ConfigSource(default.source)) == ("1048588", ConfigSource.DEFAULT_CONFIG)
    assert synonyms(default) == [("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG)]
    # Kafka lists the synonyms of segment.ms from log.roll.ms on, which is unset: none.
    assert synonyms(described["segment.ms"]) == []
    assert described["segment.ms"].value == "604800000"
    assert described["cleanup.policy"].value == "delete"
    assert described["unclean.leader.election.enable"].value == "false"


def test_describe_unknown_and_invalid_topics(brook_broker):
    error = kafka_error(describe, brook_broker.bootstrap, ResourceType.TOPIC, "no-such-topic")
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    error = kafka_error(describe, brook_broker.bootstrap, ResourceType.TOPIC, "bad/name")
    assert error.code() == KafkaError.TOPIC_EXCEPTION


@pytest.mark.brook_config(num_partitions=3)
def test_describe_broker(brook_broker):
    described = describe(brook_broker.bootstrap, ResourceType.BROKER, "0")
    partitions = described["num.partitions"]
    assert (partitions.value, ConfigSource(partitions.source)) == (
        "3",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert partitions.is_read_only
    max_bytes = described["message.max.bytes"]
    assert (max_bytes.value, ConfigSource(max_bytes.source)) == (
        "1048588",
        ConfigSource.DEFAULT_CONFIG,
    )
    assert not max_bytes.is_read_only
    assert described["log.dirs"].value == str(brook_broker.data_dir)
    assert described["log.retention.ms"].value is None


# --- altering topic configs --------------------------------------------------------------


def test_incremental_set_append_subtract_delete(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"retention.bytes": "5000"})
    incremental(
        bootstrap,
        ResourceType.TOPIC,
        topic_name,
        [("retention.ms", SET, "120000"), ("cleanup.policy", APPEND, "compact")],
    )
    described = describe(bootstrap, ResourceType.TOPIC, topic_name)
    assert described["retention.ms"].value == "120000"
    assert ConfigSource(described["retention.ms"].source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert described["cleanup.policy"].value == "delete,compact"  # appended to the default
    assert described["retention.bytes"].value == "5000"  # untouched

    incremental(
        bootstrap,
        ResourceType.TOPIC,
        topic_name,
        [("cleanup.policy", SUBTRACT, "delete"), ("retention.bytes", DELETE, None)],
    )
    described = describe(bootstrap, ResourceType.TOPIC, topic_name)
    assert described["cleanup.policy"].value == "compact"
    assert described["retention.bytes"].value == "-1"
    assert ConfigSource(described["retention.bytes"].source) == ConfigSource.DEFAULT_CONFIG
    stored = json.loads((brook_broker.data_dir / "brook-topic-configs.json").read_text())
    assert stored[topic_name] == {"cleanup.policy": ["compact"], "retention.ms": 120000}


def test_legacy_alter_replaces_every_override(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"retention.bytes": "5000", "segment.ms": "60000"})
    legacy_alter(bootstrap, ResourceType.TOPIC, topic_name, {"max.message.bytes": "20000"})
    described = describe(bootstrap, ResourceType.TOPIC, topic_name)
    assert described["max.message.bytes"].value == "20000"
    overridden = {
        name
        for name, entry in described.items()
        if ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }
    assert overridden == {"max.message.bytes"}


@pytest.mark.parametrize(
    ("ops", "words"),
    [
        ([("retention.ms", SET, "soon")], ["retention.ms", "soon"]),
        ([("segment.bytes", SET, "10")], ["segment.bytes", "at least 14"]),
        ([("compression.type", SET, "brotli")], ["compression.type", "one of"]),
        ([("cleanup.policy", SET, "delete,shred")], ["cleanup.policy", "shred"]),
        ([("no.such.config", SET, "1")], ["Unknown topic config name: no.such.config"]),
        ([("retention.ms", APPEND, "5")], ["retention.ms", "not LIST"]),
    ],
)
def test_bad_topic_configs_are_invalid_config(brook_broker, topic_name, ops, words):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    before = describe(bootstrap, ResourceType.TOPIC, topic_name)
    error = kafka_error(incremental, bootstrap, ResourceType.TOPIC, topic_name, ops)
    assert error.code() == KafkaError.INVALID_CONFIG
    assert all(word in error.str() for word in words), error.str()
    after = describe(bootstrap, ResourceType.TOPIC, topic_name)
    assert {k: e.value for k, e in after.items()} == {k: e.value for k, e in before.items()}


def test_legacy_alter_rejects_unknown_keys(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    error = kafka_error(
        legacy_alter, brook_broker.bootstrap, ResourceType.TOPIC, topic_name, {"colour": "red"}
    )
    assert error.code() == KafkaError.INVALID_CONFIG
    assert "colour" in error.str()


def test_alter_unknown_topic(brook_broker):
    error = kafka_error(
        incremental,
        brook_broker.bootstrap,
        ResourceType.TOPIC,
        "no-such-topic",
        [("retention.ms", SET, "1000")],
    )
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_validate_only_changes_nothing(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    incremental(
        bootstrap,
        ResourceType.TOPIC,
        topic_name,
        [("max.message.bytes", SET, "100")],
        validate_only=True,
    )
    incremental(
        bootstrap,
        ResourceType.BROKER,
        "0",
        [("message.max.bytes", SET, "100")],
        validate_only=True,
    )
    assert describe(bootstrap, ResourceType.TOPIC, topic_name)["max.message.bytes"].value == (
        "1048588"
    )
    assert produce_error(bootstrap, topic_name, b"x" * 500) is None
    assert not (brook_broker.data_dir / "brook-topic-configs.json").exists()
    assert not (brook_broker.data_dir / "brook-broker-configs.json").exists()
    # validate_only still reports what a real change would get.
    error = kafka_error(
        incremental,
        bootstrap,
        ResourceType.TOPIC,
        topic_name,
        [("max.message.bytes", SET, "-1")],
        validate_only=True,
    )
    assert error.code() == KafkaError.INVALID_CONFIG


# --- changes apply without a restart -----------------------------------------------------


def test_lower_max_message_bytes_applies_to_the_next_produce(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    assert produce_error(bootstrap, topic_name, b"x" * 2000) is None
    incremental(bootstrap, ResourceType.TOPIC, topic_name, [("max.message.bytes", SET, "1000")])
    error = produce_error(bootstrap, topic_name, b"x" * 2000)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_error(bootstrap, topic_name, b"x" * 100) is None
    incremental(bootstrap, ResourceType.TOPIC, topic_name, [("max.message.bytes", DELETE, None)])
    assert produce_error(bootstrap, topic_name, b"x" * 2000) is None


def test_log_append_time_changes_what_consumers_see(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    old = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic_name, value=b"before", partition=0, timestamp=old)
    producer.flush(10)
    incremental(
        bootstrap,
        ResourceType.TOPIC,
        topic_name,
        [("message.timestamp.type", SET, "LogAppendTime")],
    )
    written_after = int(time.time() * 1000)
    producer.produce(topic_name, value=b"after", partition=0, timestamp=old)
    producer.flush(10)
    before, after = consume_all(bootstrap, topic_name, 2)
    assert before.timestamp() == (TIMESTAMP_CREATE_TIME, old)
    kind, stamped = after.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert written_after - 1000 <= stamped <= int(time.time() * 1000)


def test_compression_type_applies_to_the_next_batch(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"plain" * 20)])
    incremental(bootstrap, ResourceType.TOPIC, topic_name, [("compression.type", SET, "zstd")])
    produce(bootstrap, topic_name, [(None, b"squeezed" * 20)])
    codecs = [header.codec for header in stored_batches(brook_broker.data_dir, topic_name)]
    assert codecs == [CODECS["none"], CODECS["zstd"]]
    assert [m.value() for m in consume_all(bootstrap, topic_name, 2)] == [
        b"plain" * 20,
        b"squeezed" * 20,
    ]


def test_compression_type_uncompressed_stores_batches_uncompressed(brook_broker, topic_name):
    """Kafka's "uncompressed" (the codec whose id is 0) once made the produce path fail."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"compression.type": "uncompressed"})
    produce(bootstrap, topic_name, [(None, b"gzipped" * 20)], **{"compression.type": "gzip"})
    codecs = [header.codec for header in stored_batches(brook_broker.data_dir, topic_name)]
    assert codecs == [CODECS["none"]]
    assert [m.value() for m in consume_all(bootstrap, topic_name, 1)] == [b"gzipped" * 20]


def test_segment_bytes_applies_to_the_next_roll(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    for _ in range(3):
        assert produce_error(bootstrap, topic_name, b"x" * 400) is None
    segments = brook_broker.data_dir / f"{topic_name}-0"
    assert len(list(segments.glob("*.log"))) == 1
    incremental(bootstrap, ResourceType.TOPIC, topic_name, [("segment.bytes", SET, "1000")])
    for _ in range(6):
        assert produce_error(bootstrap, topic_name, b"x" * 400) is None
    assert len(list(segments.glob("*.log"))) >= 3


@pytest.mark.brook_config(log_retention_check_interval_ms=200)
@pytest.mark.parametrize("level", ["topic", "broker"])
def test_retention_ms_applies_at_the_next_check(brook_broker, topic_name, level):
    bootstrap = brook_broker.bootstrap
    create_topic(
        bootstrap, topic_name, config={"segment.bytes": "1000", "file.delete.delay.ms": "0"}
    )
    hour_ago = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(6):
        producer.produce(topic_name, value=b"x" * 400, partition=0, timestamp=hour_ago)
        producer.flush(10)
    time.sleep(0.5)  # two retention checks: a week's retention keeps everything
    assert _earliest(bootstrap, topic_name) == 0
    if level == "topic":
        incremental(bootstrap, ResourceType.TOPIC, topic_name, [("retention.ms", SET, "60000")])
    else:
        incremental(bootstrap, ResourceType.BROKER, "0", [("log.retention.ms", SET, "60000")])
    deadline = time.monotonic() + 15
    while _earliest(bootstrap, topic_name) == 0:
        assert time.monotonic() < deadline, "retention.ms did not apply"
        time.sleep(0.1)
    assert _earliest(bootstrap, topic_name) > 0


def _earliest(bootstrap: str, topic: str) -> int:
    return watermarks(bootstrap, topic, 1)[0][0]


# --- dynamic broker configs --------------------------------------------------------------


def test_broker_dynamic_config_applies_to_topics_without_an_override(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    pinned = f"{topic_name}-pinned"
    create_topic(bootstrap, topic_name)
    create_topic(bootstrap, pinned, config={"max.message.bytes": "100000"})
    incremental(bootstrap, ResourceType.BROKER, "0", [("message.max.bytes", SET, "1000")])

    broker = describe(bootstrap, ResourceType.BROKER, "0")["message.max.bytes"]
    assert (broker.value, ConfigSource(broker.source)) == (
        "1000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    topic = describe(bootstrap, ResourceType.TOPIC, topic_name)["max.message.bytes"]
    assert (topic.value, ConfigSource(topic.source)) == (
        "1000",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    error = produce_error(bootstrap, topic_name, b"x" * 2000)
    assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_error(bootstrap, pinned, b"x" * 2000) is None

    incremental(bootstrap, ResourceType.BROKER, "0", [("message.max.bytes", DELETE, None)])
    assert produce_error(bootstrap, topic_name, b"x" * 2000) is None


def test_broker_log_append_time_for_topics_without_an_override(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    incremental(
        bootstrap,
        ResourceType.BROKER,
        "0",
        [("log.message.timestamp.type", SET, "LogAppendTime")],
    )
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic_name, value=b"v", partition=0, timestamp=1_000)
    producer.flush(10)
    [message] = consume_all(bootstrap, topic_name, 1)
    assert message.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
    assert message.timestamp()[1] > 1_000


@pytest.mark.parametrize(
    ("ops", "words"),
    [
        ([("log.dirs", SET, "/elsewhere")], ["Cannot update these configs dynamically"]),
        ([("log.retention.hours", SET, "1")], ["log.retention.hours"]),
        ([("num.partitions", SET, "4")], ["num.partitions"]),
        ([("message.max.bytes", SET, "big")], ["message.max.bytes", "big"]),
        ([("log.segment.bytes", SET, "1")], ["log.segment.bytes", "at least 14"]),
    ],
)
def test_bad_broker_configs_are_invalid_requests(brook_broker, ops, words):
    # Kafka's broker answers INVALID_REQUEST for these, not INVALID_CONFIG (KAFKA-13609).
    error = kafka_error(incremental, brook_broker.bootstrap, ResourceType.BROKER, "0", ops)
    assert error.code() == KafkaError.INVALID_REQUEST
    assert all(word in error.str() for word in words), error.str()
    assert not (brook_broker.data_dir / "brook-broker-configs.json").exists()


def test_broker_append_to_a_list_key(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    incremental(bootstrap, ResourceType.BROKER, "0", [("log.cleanup.policy", APPEND, "compact")])
    described = describe(bootstrap, ResourceType.TOPIC, topic_name)["cleanup.policy"]
    assert (described.value, ConfigSource(described.source)) == (
        "delete,compact",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    error = kafka_error(
        incremental, bootstrap, ResourceType.BROKER, "0", [("message.max.bytes", APPEND, "1")]
    )
    assert error.code() == KafkaError.INVALID_CONFIG


# --- restarts ----------------------------------------------------------------------------


def test_topic_and_broker_configs_survive_a_restart(tmp_path, topic_name):
    data_dir = tmp_path / "data"
    first = BrokerThread(data_dir).start()
    try:
        create_topic(first.bootstrap, topic_name)
        incremental(
            first.bootstrap,
            ResourceType.TOPIC,
            topic_name,
            [("max.message.bytes", SET, "1000"), ("retention.ms", SET, "86400000")],
        )
        incremental(
            first.bootstrap,
            ResourceType.BROKER,
            "0",
            [("log.message.timestamp.type", SET, "LogAppendTime"), ("custom.plugin.key", SET, "x")],
        )
    finally:
        first.stop()

    second = BrokerThread(data_dir).start()
    try:
        topic = describe(second.bootstrap, ResourceType.TOPIC, topic_name)
        assert topic["max.message.bytes"].value == "1000"
        assert ConfigSource(topic["max.message.bytes"].source) == (
            ConfigSource.DYNAMIC_TOPIC_CONFIG
        )
        assert topic["retention.ms"].value == "86400000"
        assert topic["message.timestamp.type"].value == "LogAppendTime"
        assert ConfigSource(topic["message.timestamp.type"].source) == (
            ConfigSource.DYNAMIC_BROKER_CONFIG
        )
        broker = describe(second.bootstrap, ResourceType.BROKER, "0")
        assert broker["custom.plugin.key"].value == "x"
        assert ConfigSource(broker["custom.plugin.key"].source) == (
            ConfigSource.DYNAMIC_BROKER_CONFIG
        )
        # Still in force, not only described.
        error = produce_error(second.bootstrap, topic_name, b"x" * 2000)
        assert error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert produce_error(second.bootstrap, topic_name, b"x" * 10) is None
        [message] = consume_all(second.bootstrap, topic_name, 1)
        assert message.timestamp()[0] == TIMESTAMP_LOG_APPEND_TIME
    finally:
        second.stop()
