"""A broker with every kind of listener, and the test PKI its TLS listeners use.

Listeners: PLAINTEXT (the tests' own admin path), SSL (no client certificate asked),
MTLS (SSL, ssl.client.auth=required, principal mapping rules), SASL_PLAINTEXT and
SASL_SSL (PLAIN with alice/alice-secret from the JAAS config, SCRAM-SHA-256/512 users
made by AlterUserScramCredentials).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from brook.broker.testing import BrokerThread, free_port

from .certs import KEY_PASSWORD, TestPki, make_pki

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
SCRAM_USERS = {
    "SCRAM-SHA-256": ("bob", "bob-secret"),
    "SCRAM-SHA-512": ("carol", "carol-secret"),
}
MTLS_RULES = "RULE:^CN=([a-zA-Z]+),OU=Engineering,O=Brook Tests,C=US$/$1@engineering/L,DEFAULT"
SECURED = ("SSL", "MTLS", "SASL_PLAINTEXT", "SASL_SSL")


def plain_jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


class SecureBroker:
    def __init__(self, data_dir: Path, pki: TestPki, extra: dict[str, Any] | None = None) -> None:
        self.pki = pki
        self.ports = {"PLAINTEXT": free_port(), **{name: free_port() for name in SECURED}}
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in self.ports.items())
        jaas = plain_jaas(PLAIN_USERS)
        overrides: dict[str, Any] = {
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,"
            "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.server.keystore),
            "ssl.key.password": KEY_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca.cert_path),
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.mtls.ssl.principal.mapping.rules": MTLS_RULES,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
            **(extra or {}),
        }
        # An extra key given as None is left out (a test replacing the key store's form).
        overrides = {key: value for key, value in overrides.items() if value is not None}
        self.thread = BrokerThread(data_dir, overrides, port=self.ports["PLAINTEXT"])

    def start(self) -> SecureBroker:
        self.thread.start()
        admin = AdminClient({"bootstrap.servers": self.bootstrap("PLAINTEXT")})
        upsertions = [
            UserScramCredentialUpsertion(
                user,
                ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 8192),
                pw.encode(),
            )
            for m, (user, pw) in SCRAM_USERS.items()
        ]
        for future in admin.alter_user_scram_credentials(upsertions).values():
            future.result(15)
        return self

    def stop(self) -> None:
        self.thread.stop()

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    @property
    def broker(self) -> Any:
        return self.thread.broker

    def call(self, function: Any, *args: Any) -> Any:
        return self.thread.call(function, *args)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> TestPki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, pki: TestPki) -> Iterator[SecureBroker]:
    broker = SecureBroker(tmp_path_factory.mktemp("secure-broker"), pki).start()
    try:
        yield broker
    finally:
        broker.stop()
