"""The security configs as Kafka reads them: per-listener keys falling back to the plain
ones, key material in PEM files, inline PEM or PKCS12, the JAAS config, the principal
mapping rules -- and the message that stops start-up when one is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from brook.broker.config.broker_config import BrokerConfig, ConfigError
from brook.broker.security.certificate_names import (
    NoMatchingRule,
    distinguished_name,
    map_distinguished_name,
    parse_mapping_rules,
)
from brook.broker.security.jaas import parse_jaas_config
from brook.broker.security.tls import openssl_cipher_name

from .certs import KEY_PASSWORD
from .conftest import SecureBroker, plain_jaas
from .modes import MODES
from .test_clients import test_confluent_kafka as confluent_round_trip


def _config(tmp_path: Path, **overrides: str) -> BrokerConfig:
    values = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
        "advertised.listeners": "PLAINTEXT://127.0.0.1:1,SECURE://127.0.0.1:2",
        "log.dirs": str(tmp_path),
        **overrides,
    }
    return BrokerConfig.build({}, {}, values)


def _tls(pki, **more: str) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.server.keystore),
        "ssl.key.password": KEY_PASSWORD,
        **more,
    }


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL"},
            "Listener SECURE uses TLS but has no key store: set"
            " listener.name.secure.ssl.keystore.location",
        ),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SSL",
                "ssl.keystore.location": "/nowhere.jks",
            },
            "ssl.keystore.type=JKS is a Java key store Brook cannot read: convert it to PEM",
        ),
        (
            {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT"},
            "Listener SECURE uses SASL, but sasl.enabled.mechanisms (GSSAPI) enables no"
            " mechanism Brook serves",
        ),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
            },
            "Listener SECURE enables SASL/PLAIN but has no JAAS config: set"
            " listener.name.secure.plain.sasl.jaas.config",
        ),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule"
                ' required user_a="b"',
            },
            "the login module entry must end with ';'",
        ),
        (
            {"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1/X"},
            "Invalid rule",
        ),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "inter.broker.listener.name": "SECURE",
            },
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms",
        ),
        (
            {
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                "inter.broker.listener.name": "SECURE",
            },
            "The inter-broker listener SECURE uses SASL SCRAM-SHA-256: set"
            " listener.name.secure.scram-sha-256.sasl.jaas.config",
        ),
    ],
)
def test_bad_security_configs_stop_start_up_naming_the_key(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=None) as raised:
        _config(tmp_path, **overrides)
    assert message in str(raised.value)


def test_a_listener_key_wins_over_the_plain_one(tmp_path, pki):
    config = _config(
        tmp_path,
        **_tls(pki, **{"listener.name.secure.ssl.client.auth": "required"}),
        **{"ssl.client.auth": "requested"},
    )
    assert config.listener_value("SECURE", "ssl.client.auth") == "required"
    assert config.listener_value("PLAINTEXT", "ssl.client.auth") == "requested"
    security = config.listener_security["SECURE"]
    import ssl

    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_a_wrong_key_password_is_refused(tmp_path, pki):
    with pytest.raises(ConfigError, match="Cannot load the key store"):
        _config(tmp_path, **_tls(pki, **{"ssl.key.password": "wrong"}))


def test_tls_versions_follow_the_enabled_protocols(tmp_path, pki):
    import ssl

    config = _config(tmp_path, **_tls(pki, **{"ssl.enabled.protocols": "TLSv1.2"}))
    context = config.listener_security["SECURE"].ssl_context
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2
    config = _config(tmp_path, **_tls(pki, **{"ssl.protocol": "TLSv1.2"}))
    assert config.listener_security["SECURE"].ssl_context.maximum_version == (
        ssl.TLSVersion.TLSv1_2
    )
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == (
        "ECDHE-RSA-AES128-GCM-SHA256"
    )
    with pytest.raises(ConfigError, match="none of NOPE-CIPHER is a cipher suite"):
        _config(tmp_path, **_tls(pki, **{"ssl.cipher.suites": "NOPE-CIPHER"}))


def _inline_and_pkcs12(tmp_path: Path, pki) -> dict[str, dict[str, str]]:
    cert = x509.load_pem_x509_certificate(pki.server.cert_pem.encode())
    key = serialization.load_pem_private_key(
        pki.server.key_pem.encode(), password=KEY_PASSWORD.encode()
    )
    store = tmp_path / "server.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"server",
            key,
            cert,
            [x509.load_pem_x509_certificate(pki.ca.cert_pem.encode())],
            serialization.BestAvailableEncryption(b"store-secret"),
        )
    )
    return {
        "inline": {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": pki.server.key_pem,
            "ssl.keystore.certificate.chain": pki.server.cert_pem + pki.ca.cert_pem,
            "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": pki.ca.cert_pem,
        },
        "pkcs12": {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(store),
            "ssl.keystore.password": "store-secret",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca.cert_path),
        },
    }


@pytest.mark.parametrize("form", ["inline", "pkcs12"])
def test_key_material_inline_or_pkcs12_serves_clients(tmp_path, pki, form):
    settings = _inline_and_pkcs12(tmp_path, pki)[form]
    broker = SecureBroker(
        tmp_path / "data",
        pki,
        {
            "ssl.keystore.location": None,
            "ssl.key.password": None,
            "ssl.truststore.location": None,
            **settings,
        },
    )
    broker.start()
    try:
        mtls = next(mode for mode in MODES if mode.name == "mtls")
        confluent_round_trip(broker, pki, mtls)
    finally:
        broker.stop()


# --- the pure parts ------------------------------------------------------------------------


def test_distinguished_names_are_written_as_java_writes_them():
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Brook, Inc."),),
        (("organizationalUnitName", "Eng"), ("commonName", "alice")),
        (("emailAddress", "a@b.c"),),
    )
    assert distinguished_name(subject) == (
        "1.2.840.113549.1.9.1=#16056140622e63,OU=Eng+CN=alice,O=Brook\\, Inc.,C=US"
    )


def test_mapping_rules_as_kafka_applies_them():
    rules = parse_mapping_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, RULE:^CN=([a-z]+),O=(.*)$/$1@$2/U, DEFAULT"
    )
    assert map_distinguished_name(rules, "CN=svc,OU=ServiceUsers,O=x") == "svc"
    assert map_distinguished_name(rules, "CN=bob,O=acme") == "BOB@ACME"
    assert map_distinguished_name(rules, "CN=Other,OU=x") == "CN=Other,OU=x"  # DEFAULT
    only = parse_mapping_rules("RULE:^CN=([a-z]+)$/$1/L")
    with pytest.raises(NoMatchingRule):
        map_distinguished_name(only, "O=nobody")
    # A back reference past the groups stays literal, as in Kafka.
    assert map_distinguished_name(parse_mapping_rules("RULE:^CN=(a)$/$1$3/"), "CN=a") == "a$3"
    for bad in ("RULE:x", "NOPE", "RULE:a/b/Q"):
        with pytest.raises(ValueError, match="Invalid rule"):
            parse_mapping_rules(bad)


def test_jaas_configs_as_kafka_reads_them():
    entry = parse_jaas_config(
        plain_jaas({"alice": 'quote"d', "bob": "x"}).replace('quote"d', 'quote\\"d'), "k"
    )
    assert entry.plain_users == {"alice": 'quote"d', "bob": "x"}
    scram = parse_jaas_config(
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=admin"
        ' password="admin secret";',
        "k",
    )
    assert scram.options == {"username": "admin", "password": "admin secret"}
    for bad in ("PlainLoginModule", "M flag;", 'M required a="b"', 'M required a="b"; N required;'):
        with pytest.raises(ConfigError):
            parse_jaas_config(bad, "k")


def test_security_keys_cannot_change_at_runtime(secure_broker):
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": secure_broker.bootstrap("PLAINTEXT")})
    for key in ("ssl.client.auth", "listener.name.mtls.ssl.client.auth"):
        resource = ConfigResource(
            "BROKER",
            "0",
            incremental_configs=[
                ConfigEntry(key, "none", incremental_operation=AlterConfigOpType.SET)
            ],
        )
        future = admin.incremental_alter_configs([resource])[resource]
        with pytest.raises(Exception, match="Cannot update these configs dynamically"):
            future.result(15)
    # Nothing changed: the MTLS listener still asks for a certificate.
    security = secure_broker.call(
        lambda: secure_broker.broker.services.config.listener_security["MTLS"]
    )
    import ssl

    assert security.ssl_context.verify_mode == ssl.CERT_REQUIRED


def test_describe_configs_never_shows_a_password(secure_broker):
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": secure_broker.bootstrap("PLAINTEXT")})
    resource = ConfigResource("BROKER", "0")
    entries = admin.describe_configs([resource])[resource].result(15)
    key_password = entries["ssl.key.password"]
    assert key_password.is_sensitive and key_password.value is None
    assert entries["sasl.jaas.config"].is_sensitive
    assert entries["ssl.client.auth"].value == "none"
    assert not entries["ssl.client.auth"].is_sensitive


def test_an_unknown_listener_key_is_passed_over_as_any_unknown_key(tmp_path):
    """As Kafka: a key that names no config, prefixed by a listener or not, is reported
    (the caller warns once) and changes nothing."""
    config = _config(
        tmp_path,
        **{
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:PLAINTEXT",
            "listener.name.secure.ssl.no.such.key": "x",
        },
    )
    assert config.unknown_keys == [("listener.name.secure.ssl.no.such.key", "--override")]
