"""The ways a client reaches the secure broker, as each client library spells them."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any

from .certs import Identity, TestPki
from .conftest import PLAIN_USERS, SCRAM_USERS


@dataclass(frozen=True)
class Mode:
    name: str
    listener: str
    tls: bool
    mechanism: str | None = None  # SASL
    client_identity: str | None = None  # "client", "expired", "untrusted"
    username: str = ""
    password: str = ""

    @property
    def protocol(self) -> str:
        if self.mechanism:
            return "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        return "SSL"


def _scram(mechanism: str, listener: str, tls: bool) -> Mode:
    user, password = SCRAM_USERS[mechanism]
    return Mode(
        f"{listener.lower()}-{mechanism.lower()}", listener, tls, mechanism, None, user, password
    )


MODES = [
    Mode("ssl", "SSL", True),
    Mode("mtls", "MTLS", True, client_identity="client"),
    Mode(
        "sasl_plaintext-plain",
        "SASL_PLAINTEXT",
        False,
        "PLAIN",
        None,
        "alice",
        PLAIN_USERS["alice"],
    ),
    Mode("sasl_ssl-plain", "SASL_SSL", True, "PLAIN", None, "alice", PLAIN_USERS["alice"]),
    _scram("SCRAM-SHA-256", "SASL_PLAINTEXT", False),
    _scram("SCRAM-SHA-512", "SASL_SSL", True),
]


def identity(pki: TestPki, mode: Mode) -> Identity | None:
    return {
        None: None,
        "client": pki.client,
        "expired": pki.expired_client,
        "untrusted": pki.untrusted_client,
    }[mode.client_identity]


def librdkafka_config(pki: TestPki, mode: Mode) -> dict[str, str]:
    """confluent-kafka's and kcat's (librdkafka's) settings."""
    config = {"security.protocol": mode.protocol}
    if mode.tls:
        config["ssl.ca.location"] = str(pki.ca.cert_path)
    own = identity(pki, mode)
    if own is not None:
        config["ssl.certificate.location"] = str(own.cert)
        config["ssl.key.location"] = str(own.key)
    if mode.mechanism:
        config.update(
            {
                "sasl.mechanism": mode.mechanism,
                "sasl.username": mode.username,
                "sasl.password": mode.password,
            }
        )
    return config


def kafka_python_config(pki: TestPki, mode: Mode) -> dict[str, Any]:
    config: dict[str, Any] = {"security_protocol": mode.protocol}
    if mode.tls:
        config["ssl_cafile"] = str(pki.ca.cert_path)
    own = identity(pki, mode)
    if own is not None:
        config["ssl_certfile"] = str(own.cert)
        config["ssl_keyfile"] = str(own.key)
    if mode.mechanism:
        config.update(
            sasl_mechanism=mode.mechanism,
            sasl_plain_username=mode.username,
            sasl_plain_password=mode.password,
        )
    return config


def aiokafka_config(pki: TestPki, mode: Mode) -> dict[str, Any]:
    config: dict[str, Any] = {"security_protocol": mode.protocol}
    if mode.tls:
        context = ssl.create_default_context(cafile=str(pki.ca.cert_path))
        own = identity(pki, mode)
        if own is not None:
            context.load_cert_chain(str(own.cert), str(own.key))
        config["ssl_context"] = context
    if mode.mechanism:
        config.update(
            sasl_mechanism=mode.mechanism,
            sasl_plain_username=mode.username,
            sasl_plain_password=mode.password,
        )
    return config
