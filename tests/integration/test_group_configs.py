"""Group configs, the GROUP config resource (type 32) of DescribeConfigs and
(Incremental)AlterConfigs, over raw requests: Kafka's defaults and sources, its bounds
and errors with nothing stored, the override in force at the group's next heartbeat,
and kept across a restart."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.index import load_request_schema
from kio.schema.errors import ErrorCode

from brook.protocol.api_table import ApiKey

from .clients import create_topic
from .raw_client import RawClient, make, nested

GROUP = 32
OVERRIDES = {
    "group.consumer.min.session.timeout.ms": 500,
    "group.consumer.session.timeout.ms": 2000,
    "group.consumer.max.session.timeout.ms": 60_000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.heartbeat.interval.ms": 1000,
}
pytestmark = pytest.mark.brook_config(**{k.replace(".", "_"): v for k, v in OVERRIDES.items()})


def describe(port: int, group: str) -> tuple[ErrorCode, dict[str, Any]]:
    request_type = load_request_schema(ApiKey.DESCRIBE_CONFIGS, 4)
    resource_type = nested(request_type, "DescribeConfigsResource")
    request = make(
        request_type,
        resources=(
            make(resource_type, resource_type=GROUP, resource_name=group, configuration_keys=None),
        ),
        include_synonyms=True,
        include_documentation=True,
    )
    with RawClient(port) as client:
        (result,) = client.request(request).results
    return ErrorCode(result.error_code), {entry.name: entry for entry in result.configs}


def alter(
    port: int, group: str, *changes: tuple[str, str | None, int], validate_only: bool = False
) -> tuple[ErrorCode, str | None]:
    request_type = load_request_schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    resource_type = nested(request_type, "AlterConfigsResource")
    config_type = nested(request_type, "AlterableConfig")
    request = make(
        request_type,
        resources=(
            make(
                resource_type,
                resource_type=GROUP,
                resource_name=group,
                configs=tuple(
                    make(config_type, name=name, config_operation=op, value=value)
                    for name, value, op in changes
                ),
            ),
        ),
        validate_only=validate_only,
    )
    with RawClient(port) as client:
        (result,) = client.request(request).responses
    return ErrorCode(result.error_code), result.error_message


SET, DELETE = 0, 1


def test_a_group_without_overrides_has_the_brokers_values(brook_broker) -> None:
    error, entries = describe(brook_broker.port, "any-group")
    assert error == ErrorCode.none
    assert sorted(entries) == [
        "consumer.heartbeat.interval.ms",
        "consumer.session.timeout.ms",
        "share.auto.offset.reset",
        "share.delivery.count.limit",
        "share.heartbeat.interval.ms",
        "share.isolation.level",
        "share.partition.max.record.locks",
        "share.record.lock.duration.ms",
        "share.session.timeout.ms",
    ]
    # The string keys have defaults of their own, named by themselves, as Kafka's.
    reset = entries["share.auto.offset.reset"]
    assert (reset.value, reset.config_type) == ("latest", 2)
    assert [(s.name, s.value, s.source) for s in reset.synonyms] == [
        ("share.auto.offset.reset", "latest", 5)
    ]
    locks = entries["share.record.lock.duration.ms"]
    assert [(s.name, s.value) for s in locks.synonyms] == [
        ("group.share.record.lock.duration.ms", "30000")
    ]
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.config_source, session.read_only) == ("2000", 5, False)
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("group.consumer.session.timeout.ms", "2000", 5)
    ]
    assert session.config_type == 3  # INT
    assert session.documentation


def test_an_override_is_described_and_deleted(brook_broker) -> None:
    port = brook_broker.port
    assert alter(port, "orders", ("consumer.session.timeout.ms", "3000", SET)) == (
        ErrorCode.none,
        None,
    )
    _, entries = describe(port, "orders")
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.config_source) == ("3000", 8)  # DYNAMIC_GROUP_CONFIG
    assert [(s.name, s.value, s.source) for s in session.synonyms] == [
        ("consumer.session.timeout.ms", "3000", 8),
        ("group.consumer.session.timeout.ms", "2000", 5),
    ]
    # Another group is not touched.
    assert describe(port, "payments")[1]["consumer.session.timeout.ms"].value == "2000"
    assert alter(port, "orders", ("consumer.session.timeout.ms", None, DELETE))[0] == ErrorCode.none
    assert describe(port, "orders")[1]["consumer.session.timeout.ms"].config_source == 5


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(
            ("consumer.session.timeout.ms", "100", SET),
            "consumer.session.timeout.ms must be in the range 500 to 60000 inclusive.",
            id="below-the-brokers-minimum",
        ),
        pytest.param(
            ("consumer.heartbeat.interval.ms", "20000", SET),
            "consumer.heartbeat.interval.ms must be in the range 100 to 15000 inclusive.",
            id="above-the-brokers-maximum",
        ),
        pytest.param(
            ("consumer.heartbeat.interval.ms", "soon", SET),
            "Invalid value soon for configuration consumer.heartbeat.interval.ms: Not a number"
            " of type INT",
            id="not-a-number",
        ),
        pytest.param(
            ("consumer.assignment.interval.ms", "1", SET),
            "Unknown group config name: consumer.assignment.interval.ms",
            id="unknown-name",
        ),
        # The share keys, with Kafka 4.4's messages (checked against it).
        pytest.param(
            ("share.record.lock.duration.ms", "1", SET),
            "Invalid value 1 for configuration share.record.lock.duration.ms: Value must be at"
            " least 1000",
            id="under-a-keys-own-floor",
        ),
        pytest.param(
            ("share.delivery.count.limit", "100", SET),
            "share.delivery.count.limit must be in the range 2 to 10 inclusive.",
            id="share-above-the-brokers-maximum",
        ),
        pytest.param(
            ("share.auto.offset.reset", "by_duration:xx", SET),
            "Invalid value by_duration:xx for configuration share.auto.offset.reset: Invalid"
            " value `by_duration:xx` for configuration share.auto.offset.reset. The value must be"
            " either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
            id="not-a-reset-strategy",
        ),
        pytest.param(
            ("share.isolation.level", "bogus", SET),
            "Invalid value bogus for configuration share.isolation.level: String must be one of:"
            " read_committed, read_uncommitted",
            id="not-an-isolation-level",
        ),
    ],
)
def test_bad_values_get_kafkas_errors_and_nothing_is_stored(brook_broker, change, message) -> None:
    port = brook_broker.port
    assert (
        alter(port, "strict", ("consumer.heartbeat.interval.ms", "700", SET))[0] == ErrorCode.none
    )
    assert alter(port, "strict", change) == (ErrorCode.invalid_config, message)
    _, entries = describe(port, "strict")
    assert entries["consumer.heartbeat.interval.ms"].value == "700"
    assert entries["consumer.session.timeout.ms"].value == "2000"


def test_share_group_settings_are_kept(brook_broker) -> None:
    port = brook_broker.port
    changes = [
        ("share.auto.offset.reset", "by_duration:PT1H", SET),
        ("share.isolation.level", "read_committed", SET),
        ("share.record.lock.duration.ms", "45000", SET),
    ]
    assert alter(port, "queue", *changes) == (ErrorCode.none, None)
    _, entries = describe(port, "queue")
    assert {name: entries[name].value for name, _, _ in changes} == {
        "share.auto.offset.reset": "by_duration:PT1H",
        "share.isolation.level": "read_committed",
        "share.record.lock.duration.ms": "45000",
    }
    assert entries["share.isolation.level"].config_source == 8


def test_validate_only_stores_nothing(brook_broker) -> None:
    port = brook_broker.port
    answer = alter(port, "dry", ("consumer.session.timeout.ms", "9000", SET), validate_only=True)
    assert answer == (ErrorCode.none, None)
    assert describe(port, "dry")[1]["consumer.session.timeout.ms"].config_source == 5


def heartbeat(port: int, group: str, topic: str) -> Any:
    request_type = load_request_schema(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1)
    with RawClient(port) as client:
        return client.request(
            make(
                request_type,
                group_id=group,
                member_id="m-" + group,
                member_epoch=0,
                rebalance_timeout=datetime.timedelta(seconds=30),
                subscribed_topic_names=(topic,),
                topic_partitions=(),
            )
        )


def test_a_groups_heartbeat_interval_is_its_own_and_survives_a_restart(brokers, topic_name):
    broker = brokers.start(OVERRIDES)
    create_topic(broker.bootstrap, topic_name)
    assert heartbeat(broker.port, "quick", topic_name).heartbeat_interval == (
        datetime.timedelta(milliseconds=1000)
    )
    assert alter(broker.port, "quick", ("consumer.heartbeat.interval.ms", "250", SET))[0] == 0
    # A member of the group is told the group's interval; other groups keep the broker's.
    assert heartbeat(broker.port, "quick", topic_name).heartbeat_interval == (
        datetime.timedelta(milliseconds=250)
    )
    assert heartbeat(broker.port, "other", topic_name).heartbeat_interval == (
        datetime.timedelta(milliseconds=1000)
    )
    broker.stop()
    broker = brokers.restart(broker, OVERRIDES)
    assert describe(broker.port, "quick")[1]["consumer.heartbeat.interval.ms"].value == "250"
