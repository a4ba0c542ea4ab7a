"""Configs through the admin clients of kafka-python and aiokafka: describe with
sources and synonyms, alter (incremental and legacy), errors, validate_only, changes
that apply at once, and configs that survive a killed broker process. aiokafka
scenarios run under asyncio.run, as in test_aiokafka.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource as AioConfigResource
from aiokafka.admin.config_resource import ConfigResourceType as AioResourceType
from aiokafka.structs import TopicPartition
from kafka.admin import ConfigResource, KafkaAdminClient
from kafka.errors import MessageSizeTooLargeError

from brook.broker.testing import BrokerProcess

from .clients import (
    aiokafka_consumer,
    aiokafka_poll,
    aiokafka_producer,
    create_topic,
    kafka_python_producer,
)

INVALID_CONFIG = 40
INVALID_REQUEST = 42


# --- kafka-python ------------------------------------------------------------------------


def _kafka_python_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)


def test_kafka_python_describe_with_sources_and_synonyms(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, config={"retention.bytes": "5000"})
    admin = _kafka_python_admin(brook_broker.bootstrap)
    try:
        described = admin.describe_configs(
            [ConfigResource("TOPIC", topic_name)], include_synonyms=True, config_filter="all"
        )["topic"][topic_name]
        modified = admin.describe_configs([ConfigResource("TOPIC", topic_name)])["topic"]
        broker = admin.describe_configs(
            [ConfigResource("BROKER", "0", ["message.max.bytes", "broker.id"])],
            config_filter="all",
        )["broker"]["0"]
    finally:
        admin.close()
    assert described["retention.bytes"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert described["retention.bytes"]["config_type"] == "LONG"
    assert described["retention.bytes"]["synonyms"] == [
        {"name": "retention.bytes", "value": "5000", "source": "DYNAMIC_TOPIC_CONFIG"},
        {"name": "log.retention.bytes", "value": "-1", "source": "DEFAULT_CONFIG"},
    ]
    assert described["compression.type"]["value"] == "producer"
    assert described["compression.type"]["config_source"] == "DEFAULT_CONFIG"
    # The default filter keeps only what was set on the topic.
    assert list(modified[topic_name]) == ["retention.bytes"]
    assert set(broker) == {"message.max.bytes", "broker.id"}
    assert broker["broker.id"]["read_only"] and not broker["message.max.bytes"]["read_only"]


def test_kafka_python_alter_incremental_legacy_and_reset(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, config={"retention.bytes": "5000"})
    admin = _kafka_python_admin(brook_broker.bootstrap)
    topic = [ConfigResource("TOPIC", topic_name)]
    try:
        assert admin.alter_configs(
            [ConfigResource("TOPIC", topic_name, {"retention.ms": "120000"})]
        ) == {"topic": {topic_name: "OK"}}
        assert admin.alter_configs(
            [ConfigResource("TOPIC", topic_name, {"cleanup.policy": ("APPEND", "compact")})]
        ) == {"topic": {topic_name: "OK"}}
        after_incremental = admin.describe_configs(topic)["topic"][topic_name]
        # Legacy AlterConfigs replaces the whole set; kafka-python re-sends what is set.
        assert admin.alter_configs(
            [ConfigResource("TOPIC", topic_name, {"segment.ms": "3600000"})], incremental=False
        ) == {"topic": {topic_name: "OK"}}
        after_legacy = admin.describe_configs(topic)["topic"][topic_name]
        assert admin.reset_configs([ConfigResource("TOPIC", topic_name, ["retention.ms"])]) == {
            "topic": {topic_name: "OK"}
        }
        after_reset = admin.describe_configs(topic)["topic"][topic_name]
    finally:
        admin.close()
    assert {k: v["value"] for k, v in after_incremental.items()} == {
        "cleanup.policy": "delete,compact",
        "retention.bytes": "5000",
        "retention.ms": "120000",
    }
    assert {k: v["value"] for k, v in after_legacy.items()} == {
        "cleanup.policy": "delete,compact",
        "retention.bytes": "5000",
        "retention.ms": "120000",
        "segment.ms": "3600000",
    }
    assert set(after_reset) == {"cleanup.policy", "retention.bytes", "segment.ms"}


def test_kafka_python_errors_and_validate_only(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    admin = _kafka_python_admin(brook_broker.bootstrap)
    try:
        bad_value = admin.alter_configs(
            [ConfigResource("TOPIC", topic_name, {"segment.bytes": "ten"})]
        )["topic"][topic_name]
        unknown = admin.alter_configs(
            [ConfigResource("TOPIC", topic_name, {"no.such.key": "1"})],
            raise_on_unknown=False,
        )["topic"][topic_name]
        static_only = admin.alter_configs(
            [ConfigResource("BROKER", "0", {"log.dirs": "/elsewhere"})], raise_on_unknown=False
        )["broker"]["0"]
        checked = admin.alter_configs(
            [ConfigResource("TOPIC", topic_name, {"max.message.bytes": "10"})],
            validate_only=True,
        )
        after = admin.describe_configs([ConfigResource("TOPIC", topic_name)])["topic"]
    finally:
        admin.close()
    assert "InvalidConfigurationError" in bad_value and "segment.bytes" in bad_value
    assert "InvalidConfigurationError" in unknown and "no.such.key" in unknown
    assert "InvalidRequestError" in static_only and "log.dirs" in static_only
    assert checked == {"topic": {topic_name: "OK"}}
    assert after == {topic_name: {}}


def test_kafka_python_change_applies_to_the_next_produce(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    admin = _kafka_python_admin(brook_broker.bootstrap)
    producer = kafka_python_producer(brook_broker.bootstrap)
    try:
        producer.send(topic_name, b"x" * 3000, partition=0).get(15)
        admin.alter_configs([ConfigResource("BROKER", "0", {"message.max.bytes": "2000"})])
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic_name, b"x" * 3000, partition=0).get(15)
        producer.send(topic_name, b"x" * 100, partition=0).get(15)
    finally:
        producer.close()
        admin.close()


def test_configs_survive_a_killed_broker_process(tmp_path, topic_name):
    data_dir = tmp_path / "data"
    first = BrokerProcess(data_dir).start()
    try:
        create_topic(first.bootstrap, topic_name)
        admin = _kafka_python_admin(first.bootstrap)
        try:
            assert admin.alter_configs(
                [
                    ConfigResource("TOPIC", topic_name, {"segment.bytes": "5000"}),
                    ConfigResource("BROKER", "0", {"log.retention.bytes": "70000"}),
                ]
            ) == {"topic": {topic_name: "OK"}, "broker": {"0": "OK"}}
        finally:
            admin.close()
    finally:
        first.kill()  # no clean shutdown: the configs were stored before the answer
    second = BrokerProcess(data_dir).start()
    try:
        admin = _kafka_python_admin(second.bootstrap)
        try:
            described = admin.describe_configs([ConfigResource("TOPIC", topic_name)])["topic"]
        finally:
            admin.close()
    finally:
        second.stop()
    assert {k: (v["value"], v["config_source"]) for k, v in described[topic_name].items()} == {
        "segment.bytes": ("5000", "DYNAMIC_TOPIC_CONFIG"),
        "retention.bytes": ("70000", "DYNAMIC_BROKER_CONFIG"),
    }


# --- aiokafka ----------------------------------------------------------------------------


async def _aiokafka_admin(bootstrap: str) -> AIOKafkaAdminClient:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    return admin


def _entries(response: Any) -> dict[str, dict[str, Any]]:
    [resource] = response.to_object()["resources"]
    assert resource["error_code"] == 0, resource["error_message"]
    return {entry["config_names"]: entry for entry in resource["config_entries"]}


def _errors(responses: list[Any]) -> list[tuple[int, str | None]]:
    return [
        (resource["error_code"], resource["error_message"])
        for response in responses
        for resource in response.to_object()["resources"]
    ]


def test_aiokafka_describe_and_alter(brook_broker, topic_name):
    asyncio.run(_aiokafka_describe_and_alter(brook_broker, topic_name))


async def _aiokafka_describe_and_alter(brook_broker: Any, topic_name: str) -> None:
    create_topic(brook_broker.bootstrap, topic_name, config={"retention.ms": "100000"})
    admin = await _aiokafka_admin(brook_broker.bootstrap)
    try:
        [described] = await admin.describe_configs(
            [AioConfigResource(AioResourceType.TOPIC, topic_name, {"retention.ms": None})],
            include_synonyms=True,
        )
        altered = await admin.alter_configs(
            [
                AioConfigResource(AioResourceType.TOPIC, topic_name, {"segment.ms": "7200000"}),
                AioConfigResource(AioResourceType.BROKER, "0", {"log.roll.ms": "3600000"}),
            ]
        )
        [after] = await admin.describe_configs(
            [
                AioConfigResource(
                    AioResourceType.TOPIC, topic_name, {"retention.ms": None, "segment.ms": None}
                )
            ]
        )
        [broker] = await admin.describe_configs(
            [AioConfigResource(AioResourceType.BROKER, "0", {"log.roll.ms": None})],
            include_synonyms=True,
        )
    finally:
        await admin.close()
    retention = _entries(described)["retention.ms"]
    assert (retention["config_value"], retention["config_source"]) == ("100000", 1)
    # As in Kafka, the broker synonyms of retention.ms start at log.retention.ms, which is
    # unset, so only the topic's own value is listed.
    assert retention["config_synonyms"] == [
        {"config_name": "retention.ms", "config_value": "100000", "config_source": 1},
    ]
    assert _errors(altered) == [(0, None), (0, None)]
    # AlterConfigs replaced the topic's overrides: retention.ms is back to the default.
    assert {k: (v["config_value"], v["config_source"]) for k, v in _entries(after).items()} == {
        "retention.ms": ("604800000", 5),
        "segment.ms": ("7200000", 1),
    }
    roll = _entries(broker)["log.roll.ms"]
    assert roll["config_synonyms"] == [
        {"config_name": "log.roll.ms", "config_value": "3600000", "config_source": 2},
        {"config_name": "log.roll.hours", "config_value": "168", "config_source": 5},
    ]


def test_aiokafka_errors(brook_broker, topic_name):
    asyncio.run(_aiokafka_errors(brook_broker, topic_name))


async def _aiokafka_errors(brook_broker: Any, topic_name: str) -> None:
    create_topic(brook_broker.bootstrap, topic_name)
    admin = await _aiokafka_admin(brook_broker.bootstrap)
    try:
        bad = await admin.alter_configs(
            [AioConfigResource(AioResourceType.TOPIC, topic_name, {"retention.ms": "-5"})]
        )
        unknown = await admin.alter_configs(
            [AioConfigResource(AioResourceType.TOPIC, topic_name, {"retention.days": "5"})]
        )
        missing = await admin.alter_configs(
            [AioConfigResource(AioResourceType.TOPIC, "no-such-topic", {"retention.ms": "5"})]
        )
        [described] = await admin.describe_configs(
            [AioConfigResource(AioResourceType.TOPIC, "no-such-topic")]
        )
    finally:
        await admin.close()
    [(code, message)] = _errors(bad)
    assert code == INVALID_CONFIG and "retention.ms" in message and "at least -1" in message
    assert _errors(unknown) == [(INVALID_CONFIG, "Unknown topic config name: retention.days")]
    assert _errors(missing) == [(3, "The topic 'no-such-topic' does not exist.")]
    assert described.to_object()["resources"][0]["error_code"] == 3


def test_aiokafka_log_append_time_without_restart(brook_broker, topic_name):
    asyncio.run(_aiokafka_log_append_time_without_restart(brook_broker, topic_name))


async def _aiokafka_log_append_time_without_restart(brook_broker: Any, topic_name: str) -> None:
    create_topic(brook_broker.bootstrap, topic_name)
    admin = await _aiokafka_admin(brook_broker.bootstrap)
    try:
        async with aiokafka_producer(brook_broker.bootstrap) as producer:
            await producer.send_and_wait(topic_name, b"create", partition=0, timestamp_ms=1000)
            assert _errors(
                await admin.alter_configs(
                    [
                        AioConfigResource(
                            AioResourceType.TOPIC,
                            topic_name,
                            {"message.timestamp.type": "LogAppendTime"},
                        )
                    ]
                )
            ) == [(0, None)]
            before = int(time.time() * 1000)
            await producer.send_and_wait(topic_name, b"append", partition=0, timestamp_ms=1000)
    finally:
        await admin.close()
    async with aiokafka_consumer(brook_broker.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic_name, 0)])
        records = await aiokafka_poll(consumer, 2)
    assert [(r.value, r.timestamp_type) for r in records] == [(b"create", 0), (b"append", 1)]
    assert records[0].timestamp == 1000
    assert records[1].timestamp >= before - 1000
