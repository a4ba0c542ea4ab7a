"""How this broker connects to the others: the inter-broker listener's protocol, with its
TLS context (trust store, and key store as client certificate) and its SASL login
(`sasl.mechanism.inter.broker.protocol`, username and password from the JAAS config of
that listener and mechanism, as Kafka's inter-broker client reads them).

Used by every broker-to-broker connection (the replica fetchers, the transaction
markers, the controller's requests: broker/client.py's Client.connect), and, built from a
client properties file instead, by the tools that speak the protocol themselves.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config.broker_config import (
    SASL_PROTOCOLS,
    SERVED_SASL_MECHANISMS,
    TLS_PROTOCOLS,
    ConfigError,
)
from .jaas import parse_jaas_config

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig


@dataclass(frozen=True, slots=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    ssl_context: ssl.SSLContext | None
    sasl: SaslLogin | None


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """The inter-broker client's security (None: PLAINTEXT), built once per config."""
    cached = config.__dict__.get("_inter_broker_security", False)
    if cached is not False:
        return cached  # type: ignore[no-any-return]
    security = build_client_security(config)
    config.__dict__["_inter_broker_security"] = security
    return security


def build_client_security(config: BrokerConfig) -> ClientSecurity | None:
    listener = config.inter_broker_listener_name

    def context() -> ssl.SSLContext:
        from .tls import client_context

        return client_context(config, listener)

    return _security(
        config.security_protocol(listener), context, lambda: _sasl_login(config, listener)
    )


def _security(
    protocol: str,
    context: Callable[[], ssl.SSLContext],
    login: Callable[[], SaslLogin],
) -> ClientSecurity | None:
    """What a protocol needs: a TLS context, a SASL login, both, or nothing (PLAINTEXT)."""
    if protocol == "PLAINTEXT":
        return None
    return ClientSecurity(
        context() if protocol in TLS_PROTOCOLS else None,
        login() if protocol in SASL_PROTOCOLS else None,
    )


def _sasl_login(config: BrokerConfig, listener: str) -> SaslLogin:
    mechanism = str(config["sasl.mechanism.inter.broker.protocol"]).upper()
    enabled = [item.upper() for item in config.listener_value(listener, "sasl.enabled.mechanisms")]
    if mechanism not in enabled:
        raise ConfigError(
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms"
            " when SASL is used for inter-broker communication"
        )
    if mechanism not in SERVED_SASL_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism.inter.broker.protocol={mechanism}: Brook's inter-broker client"
            f" speaks {', '.join(SERVED_SASL_MECHANISMS)}"
        )
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_value(listener, "sasl.jaas.config", mechanism)
    if not text:
        raise ConfigError(
            f"The inter-broker listener {listener} uses SASL {mechanism}: set {key} (or"
            ' sasl.jaas.config) with username="..." password="..." for brokers to log in with'
        )
    options = parse_jaas_config(str(text), key).options
    if "username" not in options or "password" not in options:
        raise ConfigError(
            f"{key} must hold username and password: the inter-broker client logs in with them"
        )
    return SaslLogin(mechanism, options["username"], options["password"])


def client_security_from_properties(
    properties: Mapping[str, str], source: str
) -> ClientSecurity | None:
    """A tool's security from its client properties (None: PLAINTEXT): security.protocol,
    sasl.mechanism with sasl.username / sasl.password (librdkafka's names) or
    sasl.jaas.config (Kafka's), and the ssl.* keys (tls.client_context_from_properties)."""
    protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in ("PLAINTEXT", *TLS_PROTOCOLS, *SASL_PROTOCOLS):
        raise ConfigError(
            f"security.protocol={protocol} ({source}): one of PLAINTEXT, SSL, SASL_PLAINTEXT,"
            " SASL_SSL"
        )

    def context() -> ssl.SSLContext:
        from .tls import client_context_from_properties

        return client_context_from_properties(properties, source)

    return _security(protocol, context, lambda: _properties_login(properties, source))


def _properties_login(properties: Mapping[str, str], source: str) -> SaslLogin:
    # librdkafka spells it sasl.mechanisms too; both name the one mechanism used.
    mechanism = (
        (properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "GSSAPI")
        .strip()
        .upper()
    )
    if mechanism not in SERVED_SASL_MECHANISMS:
        raise ConfigError(
            f"sasl.mechanism={mechanism} ({source}): Brook's tools log in with"
            f" {', '.join(SERVED_SASL_MECHANISMS)}"
        )
    username, password = properties.get("sasl.username"), properties.get("sasl.password")
    jaas = properties.get("sasl.jaas.config")
    if (username is None or password is None) and jaas:
        options = parse_jaas_config(jaas, f"sasl.jaas.config in {source}").options
        username = options.get("username")
        password = options.get("password")
    if username is None or password is None:
        raise ConfigError(
            f"{source} uses SASL {mechanism}: set sasl.username and sasl.password, or"
            ' sasl.jaas.config with username="..." password="..."'
        )
    return SaslLogin(mechanism, username, password)
