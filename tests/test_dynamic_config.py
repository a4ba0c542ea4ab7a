"""Dynamic broker configs and DescribeConfigs' sources and synonyms, without a socket."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from brook.broker.config.broker_config import BrokerConfig
from brook.broker.config.describe import ConfigDescriber, ConfigSource
from brook.broker.config.dynamic import DYNAMIC_CONFIGS_FILE, DynamicBrokerConfig
from brook.broker.config.topic_config import effective_topic_config
from brook.protocol.errors import InvalidRequestError


def _dynamic(tmp_path: Path, **static: str) -> DynamicBrokerConfig:
    overrides = {"log.dirs": str(tmp_path), **{k.replace("_", "."): v for k, v in static.items()}}
    dynamic = DynamicBrokerConfig(BrokerConfig.build({}, {}, overrides))
    dynamic.load()
    return dynamic


def _topic_entry(dynamic: DynamicBrokerConfig, name: str, overrides: dict | None = None):
    overrides = overrides or {}
    effective = effective_topic_config(dynamic.current, overrides)
    entries = ConfigDescriber(dynamic).topic(overrides, effective)
    return next(entry for entry in entries if entry.name == name)


def _synonyms(entry) -> list[tuple[str, str | None, ConfigSource]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def test_layers_win_in_kafka_order(tmp_path):
    dynamic = _dynamic(tmp_path, log_segment_bytes="5000000")
    assert dynamic.current["log.segment.bytes"] == 5000000
    dynamic.replace({"log.segment.bytes": "4000000"}, per_broker=False)
    assert dynamic.current["log.segment.bytes"] == 4000000
    dynamic.replace({"log.segment.bytes": "3000000"}, per_broker=True)
    assert dynamic.current["log.segment.bytes"] == 3000000
    entry = _topic_entry(dynamic, "segment.bytes")
    assert (entry.value, entry.source) == ("3000000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert _synonyms(entry) == [
        ("log.segment.bytes", "3000000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.segment.bytes", "4000000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.segment.bytes", "5000000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    ]
    dynamic.replace({}, per_broker=True)
    assert dynamic.current["log.segment.bytes"] == 4000000


def test_retention_synonyms_start_at_log_retention_ms_as_in_kafka(tmp_path):
    dynamic = _dynamic(tmp_path, log_retention_hours="24")
    entry = _topic_entry(dynamic, "retention.ms")
    # The value follows log.retention.hours, but Kafka lists synonyms from
    # log.retention.ms on; unset, it leaves none, and the source is the default.
    assert (entry.value, entry.source, entry.synonyms) == (
        "86400000",
        ConfigSource.DEFAULT_CONFIG,
        (),
    )
    # CreateTopics, answered by Kafka's controller, looks through every synonym.
    describer = ConfigDescriber(dynamic)
    assert describer.created_topic_source("retention.ms", {}) == ConfigSource.STATIC_BROKER_CONFIG
    assert describer.created_topic_source("segment.ms", {}) == ConfigSource.DEFAULT_CONFIG

    dynamic.replace({"log.retention.ms": "60000"}, per_broker=True)
    entry = _topic_entry(dynamic, "retention.ms")
    assert (entry.value, entry.source) == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert _synonyms(entry) == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.retention.hours", "24", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    ]


def test_broker_entries(tmp_path):
    dynamic = _dynamic(tmp_path)
    dynamic.replace({"log.roll.ms": "1000", "x.plugin": "y"}, per_broker=False)
    describer = ConfigDescriber(dynamic)
    cluster = {entry.name: entry for entry in describer.cluster_default()}
    assert set(cluster) == {"log.roll.ms", "x.plugin"}
    assert cluster["log.roll.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert cluster["x.plugin"].read_only and cluster["x.plugin"].config_type == 0
    broker = {entry.name: entry for entry in describer.broker()}
    assert broker["x.plugin"].value == "y"
    hours = broker["log.roll.hours"]  # its group starts at log.roll.ms: cut to its own
    assert (hours.value, hours.source) == ("168", ConfigSource.DEFAULT_CONFIG)
    assert _synonyms(hours) == [("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG)]
    assert broker["broker.id"].read_only and not broker["log.roll.ms"].read_only


def test_validation_as_kafka_reports_it(tmp_path):
    dynamic = _dynamic(tmp_path)
    with pytest.raises(InvalidRequestError) as static_only:
        dynamic.validate({"num.partitions": "2", "broker.id": "3"}, per_broker=True)
    assert static_only.value.message == (
        "Cannot update these configs dynamically: [broker.id, num.partitions]"
    )
    with pytest.raises(InvalidRequestError) as bad:
        dynamic.validate({"log.retention.bytes": "lots"}, per_broker=False)
    assert "log.retention.bytes" in bad.value.message
    assert "Not a number of type LONG" in bad.value.message
    dynamic.validate({"some.plugin.key": "anything"}, per_broker=True)


def test_stored_layers_load_and_bad_entries_are_dropped(tmp_path, caplog):
    (tmp_path / DYNAMIC_CONFIGS_FILE).write_text(
        json.dumps(
            {
                "cluster_default": {"message.max.bytes": "2000", "log.dirs": "/elsewhere"},
                "brokers": {
                    "0": {"compression.type": "brotli", "min.insync.replicas": "2"},
                    "5": {"message.max.bytes": "9"},
                },
            }
        )
    )
    with caplog.at_level(logging.WARNING):
        dynamic = _dynamic(tmp_path)
    assert dynamic.cluster_default == {"message.max.bytes": "2000"}
    assert dynamic.per_broker == {"min.insync.replicas": "2"}  # another broker's not applied
    assert dynamic.current["message.max.bytes"] == 2000
    assert "log.dirs" in caplog.text and "compression.type" in caplog.text
    # A change keeps other brokers' layers in the file.
    dynamic.replace({}, per_broker=True)
    stored = json.loads((tmp_path / DYNAMIC_CONFIGS_FILE).read_text())
    assert stored["brokers"] == {"0": {}, "5": {"message.max.bytes": "9"}}
