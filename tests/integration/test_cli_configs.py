"""`brook configs` against a real broker, run as the console script: configs set and
deleted through IncrementalAlterConfigs, read back both through the tool and through
confluent-kafka's own describe_configs, kept across a restart, and bad values refused
with the broker's error on one line."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
from kio.index import load_request_schema

from brook.broker.testing import BrokerProcess, BrokerThread
from brook.protocol.api_table import ApiKey

from .cli import assert_one_line_error, brook
from .clients import create_topic
from .raw_client import RawClient, make, nested


def configs(broker: BrokerThread | BrokerProcess, *args: str):
    return brook("configs", "--bootstrap-server", broker.bootstrap, *args)


def read_back(bootstrap: str, kind: ResourceType, name: str) -> dict:
    """Configs as confluent-kafka's AdminClient sees them, independent of the tool."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = next(iter(admin.describe_configs([ConfigResource(kind, name)]).values()))
    return future.result(15)


def test_alter_and_describe_topic_configs(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    ran = configs(
        brook_broker,
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic_name,
        "--add-config",
        "retention.ms=60000,cleanup.policy=[compact,delete]",
        "--add-config",
        "max.message.bytes=20000",
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (
        0,
        f"Completed updating config for topic {topic_name}.\n",
        "",
    )
    entries = read_back(brook_broker.bootstrap, ResourceType.TOPIC, topic_name)
    for name, value in {
        "retention.ms": "60000",
        "cleanup.policy": "compact,delete",
        "max.message.bytes": "20000",
    }.items():
        assert entries[name].value == value
        assert entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    ran = configs(
        brook_broker, "--describe", "--entity-type", "topics", "--entity-name", topic_name
    )
    assert ran.returncode == 0, ran
    assert ran.lines[0] == f"Dynamic configs for topic {topic_name} are:"
    shown = {line.split("=", 1)[0].strip(): line for line in ran.lines[1:]}
    assert sorted(shown) == ["cleanup.policy", "max.message.bytes", "retention.ms"]
    assert shown["retention.ms"].startswith("  retention.ms=60000 sensitive=false synonyms={")
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=60000" in shown["retention.ms"]
    assert shown["cleanup.policy"].startswith("  cleanup.policy=compact,delete sensitive=false")

    # kafka-topics.sh shows a topic's non-default configs in its describe line.
    described = brook(
        "topics", "--bootstrap-server", brook_broker.bootstrap, "--describe", "--topic", topic_name
    )
    assert "retention.ms=60000" in described.lines[0]
    assert "max.message.bytes=20000" in described.lines[0]


def test_delete_config_goes_back_to_the_default(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, config={"retention.ms": "60000"})
    ran = configs(brook_broker, "--alter", "--topic", topic_name, "--delete-config", "retention.ms")
    assert ran.returncode == 0, ran
    entry = read_back(brook_broker.bootstrap, ResourceType.TOPIC, topic_name)["retention.ms"]
    assert entry.source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entry.value == str(7 * 24 * 3600 * 1000)  # from log.retention.hours=168
    ran = configs(brook_broker, "describe", "--topic", topic_name)  # the action as a word
    assert ran.lines == [f"Dynamic configs for topic {topic_name} are:"]


def test_describe_all_shows_defaults(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    ran = configs(brook_broker, "--describe", "--topic", topic_name, "--all")
    assert ran.returncode == 0, ran
    assert ran.lines[0] == f"All configs for topic {topic_name} are:"
    segment = next(line for line in ran.lines if line.startswith("  segment.bytes="))
    assert segment.startswith("  segment.bytes=1073741824 sensitive=false synonyms={")
    assert "log.segment.bytes=1073741824" in segment


def test_describe_every_topic(brook_broker):
    create_topic(brook_broker.bootstrap, "a-topic", config={"retention.ms": "1000"})
    create_topic(brook_broker.bootstrap, "b-topic")
    ran = configs(brook_broker, "--describe", "--entity-type", "topics")
    assert ran.returncode == 0, ran
    assert [line for line in ran.lines if not line.startswith("  ")] == [
        "Dynamic configs for topic a-topic are:",
        "Dynamic configs for topic b-topic are:",
    ]
    assert ran.lines[1].startswith("  retention.ms=1000 ")


def test_bad_value_is_refused_and_nothing_changes(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, config={"retention.ms": "60000"})
    ran = configs(
        brook_broker,
        "--alter",
        "--topic",
        topic_name,
        "--add-config",
        "retention.ms=soon,max.message.bytes=20000",
    )
    assert_one_line_error(ran, topic_name, "retention.ms", "INVALID_CONFIG", code=1)
    entries = read_back(brook_broker.bootstrap, ResourceType.TOPIC, topic_name)
    assert entries["retention.ms"].value == "60000"
    assert entries["max.message.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value


def test_unknown_topic(brook_broker):
    ran = configs(brook_broker, "--alter", "--topic", "nowhere", "--add-config", "retention.ms=1")
    assert_one_line_error(ran, "nowhere", "UNKNOWN_TOPIC_OR_PART", code=1)
    ran = configs(brook_broker, "--describe", "--topic", "nowhere")
    assert_one_line_error(ran, "nowhere", code=1)


def test_broker_configs(brook_broker):
    ran = configs(
        brook_broker,
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "0",
        "--add-config",
        "log.retention.ms=3600000",
    )
    assert (ran.returncode, ran.stdout) == (0, "Completed updating config for broker 0.\n"), ran
    entry = read_back(brook_broker.bootstrap, ResourceType.BROKER, "0")["log.retention.ms"]
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    ran = configs(brook_broker, "--describe", "--broker", "0")
    assert ran.lines[0] == "Dynamic configs for broker 0 are:"
    assert ran.lines[1].startswith("  log.retention.ms=3600000 sensitive=false synonyms={")
    everything = configs(brook_broker, "--describe", "--entity-type", "brokers")
    assert everything.returncode == 0, everything
    assert "Dynamic configs for broker 0 are:" in everything.lines
    assert "Default configs for brokers in the cluster are:" in everything.lines

    ran = configs(brook_broker, "--alter", "--broker", "0", "--delete-config", "log.retention.ms")
    assert ran.returncode == 0, ran
    assert configs(brook_broker, "--describe", "--broker", "0").lines == [
        "Dynamic configs for broker 0 are:"
    ]


def set_cluster_default(port: int, name: str, value: str) -> None:
    """IncrementalAlterConfigs on the cluster-wide broker resource "": librdkafka refuses
    to name it, so the test sends this one request over a raw socket."""
    request_type = load_request_schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1)
    config = make(
        nested(request_type, "AlterableConfig"), name=name, config_operation=0, value=value
    )
    resource = make(
        nested(request_type, "AlterConfigsResource"),
        resource_type=4,  # BROKER
        resource_name="",
        configs=(config,),
    )
    request = make(request_type, resources=(resource,), validate_only=False)
    with RawClient(port) as client:
        [response] = client.request(request).responses
    assert response.error_code.value == 0, response


def test_cluster_wide_broker_defaults_are_described(brook_broker):
    set_cluster_default(brook_broker.port, "log.retention.ms", "7200000")
    ran = configs(brook_broker, "--describe", "--entity-type", "brokers", "--entity-default")
    assert ran.returncode == 0, ran
    assert ran.lines[0] == "Default configs for brokers in the cluster are:"
    assert ran.lines[1].startswith("  log.retention.ms=7200000 sensitive=false synonyms={")
    assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" in ran.lines[1]
    everything = configs(brook_broker, "--describe", "--entity-type", "brokers")
    assert everything.lines == [
        "Dynamic configs for broker 0 are:",
        "Default configs for brokers in the cluster are:",
        ran.lines[1],
    ]


def test_the_cluster_wide_broker_default_is_altered_as_kafka_configs_alters_it(brook_broker):
    """--entity-default names the cluster-wide broker resource "", as kafka-configs.sh does:
    every broker takes the value (as DYNAMIC_DEFAULT_BROKER_CONFIG) until it is deleted."""
    default = ["--entity-type", "brokers", "--entity-default"]
    ran = configs(brook_broker, "--alter", *default, "--add-config", "log.retention.ms=7200000")
    assert (ran.returncode, ran.stdout, ran.stderr) == (
        0,
        "Completed updating default config for brokers in the cluster.\n",
        "",
    )
    entry = read_back(brook_broker.bootstrap, ResourceType.BROKER, "0")["log.retention.ms"]
    assert (entry.value, entry.source) == (
        "7200000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value,
    )
    shown = configs(brook_broker, "--describe", "--broker-defaults")
    assert shown.lines[0] == "Default configs for brokers in the cluster are:"
    assert "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" in shown.lines[1]
    ran = configs(brook_broker, "--alter", *default, "--delete-config", "log.retention.ms")
    assert ran.returncode == 0, ran
    assert configs(brook_broker, "--describe", "--broker-defaults").lines == [
        "Default configs for brokers in the cluster are:"
    ]


def test_configs_survive_a_restart(tmp_path, topic_name):
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(broker.bootstrap, topic_name)
        ran = configs(broker, "--alter", "--topic", topic_name, "--add-config", "segment.ms=600000")
        assert ran.returncode == 0, ran
        broker.stop()
        broker.start()
        ran = configs(broker, "--describe", "--topic", topic_name)
        assert ran.lines[0] == f"Dynamic configs for topic {topic_name} are:"
        assert ran.lines[1].startswith("  segment.ms=600000 ")
    finally:
        broker.stop()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--alter", "--topic", "t"], "--alter needs --add-config"),
        (["--alter", "--topic", "t", "--add-config", "a=1", "--delete-config", "a"], "both"),
        (["--alter", "--topic", "t", "--add-config", "oops"], "is not KEY=VALUE"),
        (["--describe"], "name what to configure"),
        (["--describe", "--entity-name", "t"], "need --entity-type"),
        (
            ["--describe", "--entity-type", "topics", "--entity-default"],
            "only for --entity-type brokers",
        ),
        (["--describe", "--broker", "zero"], "not a broker id"),
        (["--describe", "--topic", "t", "--add-config", "a=1"], "only for --alter"),
        (["--alter", "--entity-type", "topics", "--add-config", "a=1"], "needs --entity-name"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(brook_broker, args, fragment):
    assert_one_line_error(configs(brook_broker, *args), fragment, code=2)


def test_unreachable_broker():
    from brook.broker.testing import free_port

    ran = brook(
        "configs", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--describe", "--topic", "t"
    )
    assert_one_line_error(ran, "cannot connect to the broker", code=1)
