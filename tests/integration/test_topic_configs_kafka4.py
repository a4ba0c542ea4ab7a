"""Every topic-level config Kafka 4.x defines (its LogConfig) is accepted, stored and
described through a real admin client; bad values get INVALID_CONFIG naming the key; a
missing topic gets UNKNOWN_TOPIC_OR_PARTITION whatever Kafka key it is asked to set;
the compression levels are acted on when the broker recompresses.
"""

from __future__ import annotations

import gzip
import random

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import ConfigSource, ResourceType

from brook.protocol.record_batch import records_section

from .clients import create_topic, stored_batches
from .test_configs import SET, describe, incremental, kafka_error

# Kafka 4.x's topic keys (storage's LogConfig, TopicConfig) with a value other than
# the default. message.timestamp.difference.max.ms, deprecated, is Brook's too.
KAFKA_4_TOPIC_CONFIGS = {
    "cleanup.policy": "compact,delete",
    "compression.gzip.level": "5",
    "compression.lz4.level": "12",
    "compression.type": "zstd",
    "compression.zstd.level": "-5",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "2000",
    "flush.messages": "1000",
    "flush.ms": "3000",
    "follower.replication.throttled.replicas": "0:0,1:0",
    "index.interval.bytes": "2048",
    "leader.replication.throttled.replicas": "*",
    "local.retention.bytes": "-1",
    "local.retention.ms": "-1",
    "max.compaction.lag.ms": "600000",
    "max.message.bytes": "500000",
    "message.timestamp.after.max.ms": "1000",
    "message.timestamp.before.max.ms": "2000",
    "message.timestamp.type": "LogAppendTime",
    "min.cleanable.dirty.ratio": "0.25",
    "min.compaction.lag.ms": "100",
    "min.insync.replicas": "1",
    "preallocate": "true",
    "remote.log.copy.disable": "true",
    "remote.log.delete.on.disable": "true",
    "remote.storage.enable": "false",
    "retention.bytes": "100000000",
    "retention.ms": "86400000",
    "segment.bytes": "2000000",
    "segment.index.bytes": "4096",
    "segment.jitter.ms": "60000",
    "segment.ms": "3600000",
    "unclean.leader.election.enable": "true",
}


def test_every_kafka_4_topic_config_is_accepted_stored_and_described(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config=KAFKA_4_TOPIC_CONFIGS)
    described = describe(bootstrap, ResourceType.TOPIC, topic_name)
    for name, value in KAFKA_4_TOPIC_CONFIGS.items():
        entry = described[name]
        assert (entry.value, ConfigSource(entry.source)) == (
            value,
            ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ), name
    # Changed later, one key at a time, as kafka-configs.sh --alter does.
    incremental(bootstrap, ResourceType.TOPIC, topic_name, [("preallocate", SET, "false")])
    incremental(bootstrap, ResourceType.TOPIC, topic_name, [("segment.jitter.ms", SET, "5")])
    described = describe(bootstrap, ResourceType.TOPIC, topic_name)
    assert described["preallocate"].value == "false"
    assert described["segment.jitter.ms"].value == "5"
    # The log took it: its segments draw their roll jitter from it.
    log_config = brook_broker.call(
        lambda: brook_broker.broker.replicas.partition(topic_name, 0).log.config
    )
    assert log_config.segment_jitter_ms == 5


def test_kafka_4_keys_left_unset_are_described_with_kafka_defaults(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    described = describe(brook_broker.bootstrap, ResourceType.TOPIC, topic_name)
    defaults = {
        "compression.gzip.level": "-1",
        "compression.lz4.level": "9",
        "compression.zstd.level": "3",
        "preallocate": "false",
        "segment.jitter.ms": "0",
        "leader.replication.throttled.replicas": "",
        "local.retention.ms": "-2",
        "remote.storage.enable": "false",
    }
    for name, value in defaults.items():
        entry = described[name]
        assert (entry.value, ConfigSource(entry.source)) == (value, ConfigSource.DEFAULT_CONFIG)


def test_a_missing_topic_is_unknown_whatever_kafka_key_is_set(brook_broker, topic_name):
    """Kafka validates the keys, then looks the topic up: a valid key on a missing
    topic is UNKNOWN_TOPIC_OR_PARTITION (these keys were INVALID_CONFIG before)."""
    for name in ("preallocate", "segment.jitter.ms", "compression.gzip.level"):
        value = KAFKA_4_TOPIC_CONFIGS[name]
        error = kafka_error(
            incremental,
            brook_broker.bootstrap,
            ResourceType.TOPIC,
            topic_name,
            [(name, SET, value)],
        )
        assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART, (name, error)


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("compression.gzip.level", "0", "between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "no more than 17"),
        ("compression.zstd.level", "-131073", "at least -131072"),
        ("segment.jitter.ms", "-1", "at least 0"),
        ("local.retention.ms", "-3", "at least -2"),
        ("leader.replication.throttled.replicas", "0-1", "[partitionId]:[brokerId]"),
        ("preallocate", "sometimes", "true or false"),
        ("remote.storage.enable", "true", "Tiered Storage functionality is disabled"),
    ],
)
def test_a_bad_kafka_4_value_is_invalid_config_naming_the_key(
    brook_broker, topic_name, name, value, rule
):
    create_topic(brook_broker.bootstrap, topic_name)
    error = kafka_error(
        incremental, brook_broker.bootstrap, ResourceType.TOPIC, topic_name, [(name, SET, value)]
    )
    assert error.code() == KafkaError.INVALID_CONFIG
    assert name in error.str() and rule in error.str(), error.str()
    described = describe(brook_broker.bootstrap, ResourceType.TOPIC, topic_name)
    assert ConfigSource(described[name].source) == ConfigSource.DEFAULT_CONFIG  # unchanged


def _compressible_value() -> bytes:
    """100 kB of text that each codec's levels compress to different sizes."""
    rng = random.Random(12)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(6)) for _ in range(500)]
    return " ".join(rng.choice(words) for _ in range(15_000)).encode()[:100_000]


def _stored_first_batch(brook_broker, topic: str, value: bytes) -> tuple[int, bytes]:
    """Produce `value` uncompressed and return the stored batch's size and records."""
    producer = Producer({"bootstrap.servers": brook_broker.bootstrap, "compression.type": "none"})
    producer.produce(topic, value=value, partition=0)
    assert producer.flush(15) == 0
    segment = sorted((brook_broker.data_dir / f"{topic}-0").glob("*.log"))[0]
    header = stored_batches(brook_broker.data_dir, topic)[0]
    return header.size, bytes(records_section(segment.read_bytes(), header))


@pytest.mark.parametrize(
    ("codec", "fast", "strong"),
    [("gzip", "1", "9"), ("lz4", "1", "17"), ("zstd", "1", "19")],
)
def test_the_compression_level_is_used_when_the_broker_recompresses(
    brook_broker, topic_name, codec, fast, strong
):
    value = _compressible_value()
    sizes = {}
    for level in (fast, strong):
        topic = f"{topic_name}-{codec}-{level}"
        create_topic(
            brook_broker.bootstrap,
            topic,
            config={"compression.type": codec, f"compression.{codec}.level": level},
        )
        size, records = _stored_first_batch(brook_broker, topic, value)
        sizes[level] = size
        if codec == "gzip":
            # gzip's header records the level's family: 4 fastest, 2 best (RFC 1952).
            assert records[8] == (4 if level == "1" else 2)
            assert len(gzip.decompress(records)) > len(value)  # the record, framed
    assert sizes[strong] < sizes[fast], sizes
