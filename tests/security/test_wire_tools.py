"""The tools that speak the protocol themselves (brook transactions, brook reassign,
client quotas in brook configs, brook groups --delete-offsets) over every kind of
secured listener, from the same --command-config that librdkafka's tools read: in
librdkafka's property names and in Kafka's client ones; and their one-line errors when
the login or the TLS handshake fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.cli import assert_one_line_error, brook

from .certs import KEY_PASSWORD, TestPki
from .conftest import SCRAM_USERS, SecureBroker
from .modes import MODES, Mode, librdkafka_config

TRANSACTIONAL_ID = "wire-tools-tx"
TOPIC = "wire-tools"
GROUP = "wire-tools-group"


@pytest.fixture(scope="module")
def prepared(secure_broker: SecureBroker) -> SecureBroker:
    """A committed transaction and a group with a committed offset, made over PLAINTEXT."""
    plaintext = {"bootstrap.servers": secure_broker.bootstrap("PLAINTEXT")}
    admin = AdminClient(plaintext)  # referenced while its future runs
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    producer = Producer({**plaintext, "transactional.id": TRANSACTIONAL_ID})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(TOPIC, b"committed", partition=0)
    producer.commit_transaction(15)
    consumer = Consumer({**plaintext, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    consumer.close()
    return secure_broker


def _properties(path: Path, settings: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path


def _kafka_names(pki: TestPki, mode: Mode) -> dict[str, str]:
    """The same settings as a Java client's properties file spells them."""
    settings = {"security.protocol": mode.protocol}
    if mode.tls:
        settings["ssl.truststore.type"] = "PEM"
        settings["ssl.truststore.location"] = str(pki.ca.cert_path)
    if mode.client_identity == "client":
        settings["ssl.keystore.type"] = "PEM"
        settings["ssl.keystore.location"] = str(pki.client.keystore)
        settings["ssl.key.password"] = KEY_PASSWORD
    if mode.mechanism:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if mode.mechanism == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        settings["sasl.mechanism"] = mode.mechanism
        settings["sasl.jaas.config"] = (
            f'{module} required username="{mode.username}" password="{mode.password}";'
        )
    return settings


def _transactions(prepared: Any, mode: Mode, config: Path, *args: str) -> Any:
    """`brook transactions ARGS` against the mode's listener with `config` as its
    --command-config."""
    bootstrap = prepared.bootstrap(mode.listener)
    return brook(
        "transactions", "--bootstrap-server", bootstrap, "--command-config", str(config), *args
    )


@pytest.mark.parametrize("mode", MODES, ids=lambda mode: mode.name)
def test_brook_transactions_over_each_listener(prepared, pki, tmp_path, mode):
    config = _properties(tmp_path / "client.properties", librdkafka_config(pki, mode))
    ran = _transactions(prepared, mode, config, "list")
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert TRANSACTIONAL_ID in ran.stdout


@pytest.mark.parametrize(
    "mode", [m for m in MODES if m.name in ("mtls", "sasl_ssl-scram-sha-512")], ids=str
)
def test_kafkas_client_property_names_serve_as_well(prepared, pki, tmp_path, mode):
    config = _properties(tmp_path / "client.properties", _kafka_names(pki, mode))
    bootstrap = prepared.bootstrap(mode.listener)
    common = ["--bootstrap-server", bootstrap, "--command-config", str(config)]
    described = brook("transactions", *common, "describe", "--transactional-id", TRANSACTIONAL_ID)
    assert (described.returncode, described.stderr) == (0, ""), described
    assert "CompleteCommit" in described.stdout
    listed = brook("reassign", *common, "--list")
    assert (listed.returncode, listed.stderr) == (0, ""), listed
    assert listed.stdout.strip() == "No partition reassignments found."
    client = f"wire-{mode.name}"
    altered = brook(
        "configs",
        *common,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        client,
        "--add-config",
        "producer_byte_rate=4096",
    )
    assert (altered.returncode, altered.stderr) == (0, ""), altered
    shown = brook(
        "configs", *common, "--describe", "--entity-type", "clients", "--entity-name", client
    )
    assert (shown.returncode, shown.stderr) == (0, ""), shown
    assert "producer_byte_rate=4096" in shown.stdout


def test_a_jaas_config_split_over_lines_is_read_as_java_reads_it(prepared, pki, tmp_path):
    """Kafka's documentation writes sasl.jaas.config over several lines, each ending in a
    backslash: the properties file goes on in the next line, as java.util.Properties
    reads it."""
    mode = next(m for m in MODES if m.name == "sasl_ssl-scram-sha-512")
    settings = _kafka_names(pki, mode)
    jaas = settings.pop("sasl.jaas.config")
    module, _, credentials = jaas.partition(" required ")
    username, password = credentials.rstrip(";").split(" ")
    config = _properties(tmp_path / "client.properties", settings)
    with config.open("a") as file:
        file.write(f"sasl.jaas.config={module} required \\\n    {username} \\\n    {password};\n")
    ran = _transactions(prepared, mode, config, "describe", "--transactional-id", TRANSACTIONAL_ID)
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert "CompleteCommit" in ran.stdout


def test_delete_offsets_over_sasl(prepared, pki, tmp_path):
    mode = next(m for m in MODES if m.name == "sasl_plaintext-scram-sha-256")
    config = _properties(tmp_path / "client.properties", librdkafka_config(pki, mode))
    ran = brook(
        "groups",
        "--bootstrap-server",
        prepared.bootstrap(mode.listener),
        "--command-config",
        str(config),
        "--delete-offsets",
        "--group",
        GROUP,
        "--topic",
        TOPIC,
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert f"Request succeeded for deleting offsets of topic {TOPIC} in group {GROUP}" in ran.stdout
    plaintext = {"bootstrap.servers": prepared.bootstrap("PLAINTEXT"), "group.id": GROUP}
    consumer = Consumer(plaintext)
    try:
        (left,) = consumer.committed([TopicPartition(TOPIC, 0)], timeout=15)
    finally:
        consumer.close()
    assert left.offset < 0  # nothing committed any more


def test_a_wrong_password_is_one_line(prepared, pki, tmp_path):
    user, _ = SCRAM_USERS["SCRAM-SHA-256"]
    config = _properties(
        tmp_path / "client.properties",
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": "not-the-password",
        },
    )
    ran = brook(
        "transactions",
        "--bootstrap-server",
        prepared.bootstrap("SASL_PLAINTEXT"),
        "--command-config",
        str(config),
        "list",
    )
    assert_one_line_error(ran, "authentication to", "SASL_AUTHENTICATION_FAILED", code=1)


def test_an_untrusted_broker_certificate_is_one_line(prepared, tmp_path):
    # No trust store: the system's CAs, which did not sign the test broker's certificate.
    config = _properties(tmp_path / "client.properties", {"security.protocol": "SSL"})
    ran = brook(
        "reassign",
        "--bootstrap-server",
        prepared.bootstrap("SSL"),
        "--command-config",
        str(config),
        "--list",
    )
    assert_one_line_error(ran, "TLS handshake with", "CERTIFICATE_VERIFY_FAILED", code=1)


def test_a_mechanism_the_tools_cannot_speak_is_refused_before_connecting(tmp_path):
    config = _properties(
        tmp_path / "client.properties",
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
    )
    ran = brook(
        "configs",
        "--bootstrap-server",
        "127.0.0.1:1",
        "--command-config",
        str(config),
        "--describe",
        "--entity-type",
        "clients",
    )
    assert_one_line_error(ran, "sasl.mechanism=OAUTHBEARER", code=2)


@pytest.mark.parametrize(
    ("listener", "needs"),
    [
        ("SASL_PLAINTEXT", "likely needs SASL"),
        ("SSL", "needs TLS"),
        ("SASL_SSL", "needs TLS"),
    ],
)
@pytest.mark.parametrize(
    "tool",
    [["topics", "--list"], ["groups", "--list"], ["transactions", "list"]],
    ids=lambda tool: tool[0],
)
def test_a_secured_listener_without_command_config_names_the_likely_cause(
    prepared, listener, needs, tool
):
    """librdkafka alone says "_TRANSPORT" or waits out --timeout: the tool says at once
    that the listener needs SASL or TLS, and to pass --command-config."""
    ran = brook(tool[0], "--bootstrap-server", prepared.bootstrap(listener), *tool[1:])
    assert_one_line_error(ran, needs, "--command-config", "security.protocol=", code=1)
    assert "_TRANSPORT" not in ran.stderr


def test_a_plaintext_listener_is_served_as_before_without_command_config(prepared):
    ran = brook("topics", "--bootstrap-server", prepared.bootstrap("PLAINTEXT"), "--list")
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert TOPIC in ran.lines
