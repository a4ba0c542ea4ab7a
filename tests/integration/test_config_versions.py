"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs at every served version, over
a raw socket: the cases client libraries cannot shape (the cluster-wide default broker
resource "", another broker's id, duplicate keys, null values, key restriction).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.index import load_request_schema

from brook.protocol.api_table import ApiKey

from .clients import create_topic
from .raw_client import RawClient, make, nested, versions

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5
NONE, UNKNOWN_TOPIC, INVALID_TOPIC, INVALID_CONFIG, INVALID_REQUEST = 0, 3, 17, 40, 42


def describe(
    port: int,
    resources: list[tuple[int, str, tuple[str, ...] | None]],
    version: int = 4,
    synonyms: bool = True,
    documentation: bool = False,
) -> Any:
    request_type = load_request_schema(ApiKey.DESCRIBE_CONFIGS, version)
    resource_type = nested(request_type, "DescribeConfigsResource")
    request = make(
        request_type,
        resources=tuple(
            make(resource_type, resource_type=kind, resource_name=name, configuration_keys=keys)
            for kind, name, keys in resources
        ),
        include_synonyms=synonyms,
        include_documentation=documentation,
    )
    with RawClient(port) as client:
        return client.request(request).results


def alter(
    port: int,
    resources: list[tuple[int, str, list[tuple[str, str | None]]]],
    version: int = 2,
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    """AlterConfigs: (error code, message) for each resource."""
    configs = [
        (kind, name, [{"name": k, "value": v} for k, v in pairs]) for kind, name, pairs in resources
    ]
    return _alter(port, ApiKey.ALTER_CONFIGS, version, configs, validate_only)


def incremental(
    port: int,
    resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
    version: int = 1,
    validate_only: bool = False,
) -> list[tuple[int, str | None]]:
    """IncrementalAlterConfigs: (error code, message) for each resource."""
    configs = [
        (kind, name, [{"name": k, "config_operation": op, "value": v} for k, op, v in ops])
        for kind, name, ops in resources
    ]
    return _alter(port, ApiKey.INCREMENTAL_ALTER_CONFIGS, version, configs, validate_only)


def _alter(
    port: int,
    api_key: ApiKey,
    version: int,
    resources: list[tuple[int, str, list[dict[str, Any]]]],
    validate_only: bool,
) -> list[tuple[int, str | None]]:
    """The two alter APIs' requests differ only in the fields of a config."""
    request_type = load_request_schema(api_key, version)
    config_type = nested(request_type, "AlterableConfig")
    resource_type = nested(request_type, "AlterConfigsResource")
    request = make(
        request_type,
        resources=tuple(
            make(
                resource_type,
                resource_type=kind,
                resource_name=name,
                configs=tuple(make(config_type, **fields) for fields in configs),
            )
            for kind, name, configs in resources
        ),
        validate_only=validate_only,
    )
    with RawClient(port) as client:
        responses = client.request(request).responses
    return [(r.error_code.value, r.error_message) for r in responses]


def entries(result: Any) -> dict[str, Any]:
    assert result.error_code.value == 0, result.error_message
    return {entry.name: entry for entry in result.configs}


def synonym_list(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


@pytest.mark.parametrize("version", versions(ApiKey.DESCRIBE_CONFIGS))
def test_describe_configs_every_version(brook_broker, topic_name, version):
    create_topic(brook_broker.bootstrap, topic_name, config={"segment.bytes": "100000"})
    topic, broker, missing = describe(
        brook_broker.port,
        [(TOPIC, topic_name, None), (BROKER, "0", None), (TOPIC, "nope", None)],
        version=version,
        documentation=True,
    )
    assert (topic.resource_type, topic.resource_name) == (TOPIC, topic_name)
    segment = entries(topic)["segment.bytes"]
    assert (segment.value, segment.config_source, segment.read_only) == (
        "100000",
        DYNAMIC_TOPIC,
        False,
    )
    assert synonym_list(segment) == [
        ("segment.bytes", "100000", DYNAMIC_TOPIC),
        ("log.segment.bytes", "1073741824", DEFAULT),
    ]
    assert entries(broker)["broker.id"].read_only
    assert (missing.error_code.value, missing.error_message, missing.configs) == (
        UNKNOWN_TOPIC,
        None,
        (),
    )
    if version >= 3:
        assert segment.config_type == 3  # INT
        assert entries(topic)["cleanup.policy"].config_type == 7  # LIST
        assert entries(topic)["retention.ms"].config_type == 5  # LONG
        assert segment.documentation
    if version >= 4:
        assert entries(broker)["unclean.leader.election.enable"].config_type == 1  # BOOLEAN


def test_describe_without_synonyms_or_documentation(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    [topic] = describe(brook_broker.port, [(TOPIC, topic_name, None)], synonyms=False)
    assert all(e.synonyms == () and e.documentation is None for e in topic.configs)


def test_describe_restricted_to_keys(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    [topic, broker] = describe(
        brook_broker.port,
        [
            (TOPIC, topic_name, ("retention.ms", "no.such.key", "segment.bytes")),
            (BROKER, "0", ("message.max.bytes",)),
        ],
    )
    assert sorted(entries(topic)) == ["retention.ms", "segment.bytes"]
    assert list(entries(broker)) == ["message.max.bytes"]
    # An empty list means every key, as in Kafka.
    [everything] = describe(brook_broker.port, [(TOPIC, topic_name, ())])
    assert len(everything.configs) > 10


def test_describe_broker_errors(brook_broker):
    other, word, bad_topic = describe(
        brook_broker.port, [(BROKER, "7", None), (BROKER, "zero", None), (TOPIC, "a/b", None)]
    )
    assert other.error_code.value == INVALID_REQUEST
    assert other.error_message == (
        "Unexpected broker id, expected 0 or empty string, but received 7"
    )
    assert word.error_code.value == INVALID_REQUEST
    assert bad_topic.error_code.value == INVALID_TOPIC


def test_cluster_default_is_layered_below_the_broker_own(brook_broker, topic_name):
    port = brook_broker.port
    create_topic(brook_broker.bootstrap, topic_name)
    [cluster] = describe(port, [(BROKER, "", None)])
    assert entries(cluster) == {}  # only keys set at the cluster level are listed

    assert incremental(port, [(BROKER, "", [("message.max.bytes", SET, "50000")])]) == [
        (NONE, None)
    ]
    [cluster] = describe(port, [(BROKER, "", None)])
    default_entry = entries(cluster)["message.max.bytes"]
    assert (default_entry.value, default_entry.config_source) == ("50000", DYNAMIC_DEFAULT)
    assert synonym_list(default_entry) == [("message.max.bytes", "50000", DYNAMIC_DEFAULT)]

    assert incremental(port, [(BROKER, "0", [("message.max.bytes", SET, "40000")])]) == [
        (NONE, None)
    ]
    [broker, topic] = describe(port, [(BROKER, "0", None), (TOPIC, topic_name, None)])
    own = entries(broker)["message.max.bytes"]
    assert (own.value, own.config_source) == ("40000", DYNAMIC_BROKER)
    assert synonym_list(own) == [
        ("message.max.bytes", "40000", DYNAMIC_BROKER),
        ("message.max.bytes", "50000", DYNAMIC_DEFAULT),
        ("message.max.bytes", "1048588", DEFAULT),
    ]
    assert synonym_list(entries(topic)["max.message.bytes"]) == [
        ("message.max.bytes", "40000", DYNAMIC_BROKER),
        ("message.max.bytes", "50000", DYNAMIC_DEFAULT),
        ("message.max.bytes", "1048588", DEFAULT),
    ]
    assert entries(topic)["max.message.bytes"].value == "40000"

    # Remove this broker's own value: the cluster default shows through.
    assert incremental(port, [(BROKER, "0", [("message.max.bytes", DELETE, None)])]) == [
        (NONE, None)
    ]
    [topic] = describe(port, [(TOPIC, topic_name, None)])
    assert entries(topic)["max.message.bytes"].value == "50000"
    assert entries(topic)["max.message.bytes"].config_source == DYNAMIC_DEFAULT


@pytest.mark.parametrize("version", versions(ApiKey.ALTER_CONFIGS))
def test_alter_configs_every_version(brook_broker, topic_name, version):
    port = brook_broker.port
    create_topic(brook_broker.bootstrap, topic_name, config={"retention.ms": "100000"})
    results = alter(
        port,
        [
            (TOPIC, topic_name, [("segment.ms", "3600000")]),
            (BROKER, "0", [("log.retention.bytes", "1000000")]),
            (TOPIC, "nope", [("segment.ms", "3600000")]),
        ],
        version=version,
    )
    assert results == [
        (NONE, None),
        (NONE, None),
        (UNKNOWN_TOPIC, "The topic 'nope' does not exist."),
    ]
    [topic] = describe(port, [(TOPIC, topic_name, None)])
    described = entries(topic)
    assert described["segment.ms"].value == "3600000"
    assert described["retention.ms"].config_source == DEFAULT  # replaced, so gone
    assert described["retention.bytes"].value == "1000000"
    assert described["retention.bytes"].config_source == DYNAMIC_BROKER


@pytest.mark.parametrize("version", versions(ApiKey.INCREMENTAL_ALTER_CONFIGS))
def test_incremental_alter_configs_every_version(brook_broker, topic_name, version):
    port = brook_broker.port
    create_topic(brook_broker.bootstrap, topic_name, config={"cleanup.policy": "compact"})
    results = incremental(
        port,
        [
            (
                TOPIC,
                topic_name,
                [("cleanup.policy", APPEND, "delete"), ("flush.messages", SET, "5")],
            ),
            (BROKER, "0", [("log.roll.ms", SET, "7200000")]),
        ],
        version=version,
    )
    assert results == [(NONE, None), (NONE, None)]
    [topic] = describe(port, [(TOPIC, topic_name, None)])
    described = entries(topic)
    assert described["cleanup.policy"].value == "compact,delete"
    assert described["flush.messages"].value == "5"
    assert (described["segment.ms"].value, described["segment.ms"].config_source) == (
        "7200000",
        DYNAMIC_BROKER,
    )
    assert incremental(port, [(TOPIC, topic_name, [("cleanup.policy", SUBTRACT, "compact")])]) == [
        (NONE, None)
    ]
    [topic] = describe(port, [(TOPIC, topic_name, ("cleanup.policy",))])
    assert entries(topic)["cleanup.policy"].value == "delete"


def test_malformed_alter_requests(brook_broker, topic_name):
    port = brook_broker.port
    create_topic(brook_broker.bootstrap, topic_name)
    twice = incremental(
        port,
        [
            (TOPIC, topic_name, [("segment.ms", SET, "1000")]),
            (TOPIC, topic_name, [("segment.ms", SET, "2000")]),
        ],
    )
    assert twice == [(INVALID_REQUEST, "Each resource must appear at most once.")] * 2
    assert incremental(
        port, [(TOPIC, topic_name, [("segment.ms", SET, "1"), ("segment.ms", SET, "2")])]
    ) == [(INVALID_REQUEST, "Error due to duplicate config keys")]
    assert incremental(port, [(TOPIC, topic_name, [("segment.ms", SET, None)])]) == [
        (INVALID_REQUEST, "Null value not supported for : segment.ms")
    ]
    assert alter(port, [(TOPIC, topic_name, [("segment.ms", None)])]) == [
        (INVALID_REQUEST, "Null value not supported for : segment.ms")
    ]
    assert incremental(port, [(TOPIC, topic_name, [("segment.ms", 9, "1")])])[0][0] == (
        INVALID_REQUEST
    )
    assert incremental(port, [(TOPIC, "", [("segment.ms", SET, "1")])])[0][0] == INVALID_REQUEST
    assert incremental(port, [(99, "x", [("segment.ms", SET, "1")])])[0][0] == INVALID_REQUEST
    # Deleting a key that is not set is no error, as in Kafka.
    assert incremental(port, [(TOPIC, topic_name, [("segment.ms", DELETE, None)])]) == [
        (NONE, None)
    ]


def test_broker_resource_errors(brook_broker):
    port = brook_broker.port
    assert incremental(port, [(BROKER, "7", [("message.max.bytes", SET, "1000")])]) == [
        (INVALID_REQUEST, "Unexpected broker id, expected 0, but received 7")
    ]
    assert alter(port, [(BROKER, "", [("log.dirs", "/x"), ("num.partitions", "3")])]) == [
        (INVALID_REQUEST, "Cannot update these configs dynamically: [log.dirs, num.partitions]")
    ]
    assert alter(port, [(BROKER, "", [("listeners", "PLAINTEXT://:1")])])[0][0] == INVALID_REQUEST
    [(code, message)] = incremental(port, [(BROKER, "0", [("log.retention.ms", SET, "soon")])])
    assert code == INVALID_REQUEST
    assert "log.retention.ms" in message
    assert incremental(port, [(BROKER, "0", [("no.such.key", APPEND, "x")])]) == [
        (INVALID_CONFIG, "Unknown config name: no.such.key")
    ]


def test_unknown_broker_keys_are_kept_as_kafka_keeps_plugin_configs(brook_broker):
    port = brook_broker.port
    assert alter(port, [(BROKER, "0", [("my.plugin.setting", "on")])]) == [(NONE, None)]
    [broker] = describe(port, [(BROKER, "0", ("my.plugin.setting",))])
    plugin = entries(broker)["my.plugin.setting"]
    assert (plugin.value, plugin.config_source, plugin.read_only) == ("on", DYNAMIC_BROKER, True)


def test_validate_only_alters_nothing(brook_broker, topic_name):
    port = brook_broker.port
    create_topic(brook_broker.bootstrap, topic_name, config={"retention.ms": "100000"})
    assert alter(port, [(TOPIC, topic_name, [("segment.ms", "5000")])], validate_only=True) == [
        (NONE, None)
    ]
    assert alter(port, [(BROKER, "", [("log.roll.ms", "5000")])], validate_only=True) == [
        (NONE, None)
    ]
    [(code, _)] = alter(port, [(TOPIC, topic_name, [("segment.ms", "0")])], validate_only=True)
    assert code == INVALID_CONFIG
    [topic, cluster] = describe(port, [(TOPIC, topic_name, None), (BROKER, "", None)])
    assert entries(topic)["retention.ms"].value == "100000"
    assert entries(topic)["segment.ms"].config_source == DEFAULT
    assert entries(cluster) == {}


@pytest.mark.brook_config(log_retention_hours=24)
def test_create_topics_reports_config_sources_as_kafka(brook_broker, topic_name):
    request_type = load_request_schema(ApiKey.CREATE_TOPICS, 7)
    topic_type = nested(request_type, "CreatableTopic")
    config_type = nested(request_type, "CreatableTopicConfig")
    assert incremental(
        brook_broker.port, [(BROKER, "", [("log.segment.bytes", SET, "900000")])]
    ) == [(NONE, None)]
    request = make(
        request_type,
        topics=(
            make(
                topic_type,
                name=topic_name,
                num_partitions=1,
                replication_factor=1,
                assignments=(),
                configs=(make(config_type, name="retention.bytes", value="5000"),),
            ),
        ),
        timeout=datetime.timedelta(seconds=10),
        validate_only=False,
    )
    with RawClient(brook_broker.port) as client:
        [created] = client.request(request).topics
    sources = {config.name: (config.value, config.config_source) for config in created.configs}
    assert sources["retention.bytes"] == ("5000", DYNAMIC_TOPIC)
    # Kafka's controller looks through every synonym: log.retention.hours counts.
    assert sources["retention.ms"] == ("86400000", STATIC)
    assert sources["segment.bytes"] == ("900000", DYNAMIC_DEFAULT)
    assert sources["max.message.bytes"] == ("1048588", DEFAULT)
