"""What a listener asks of its clients, built once from the config: the TLS context of an
SSL or SASL_SSL listener, the principal mapping rules, and the SASL settings of a
SASL_PLAINTEXT or SASL_SSL listener. A listener's settings are Kafka's keys, each looked up
as `listener.name.<l>.<key>` first, then `<key>` (BrokerConfig.listener_value).

Built while the config is validated, so a missing key store or an unreadable JAAS config
stops start-up (or an AlterConfigs) with a message naming the key.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config.broker_config import (
    SASL_PROTOCOLS,
    SERVED_SASL_MECHANISMS,
    TLS_PROTOCOLS,
    ConfigError,
)
from .certificate_names import MappingRule, parse_mapping_rules
from .jaas import PLAIN_LOGIN_MODULE, parse_jaas_config

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig

log = logging.getLogger("brook.security")


@dataclass(frozen=True, slots=True)
class SaslSettings:
    # The mechanisms served, in the order sasl.enabled.mechanisms lists them.
    mechanisms: tuple[str, ...]
    # PLAIN's users (user_<name>="<password>"), when PLAIN is enabled.
    plain_users: dict[str, str] = field(default_factory=dict)
    # connections.max.reauth.ms per mechanism (0: sessions do not expire).
    max_reauth_ms: dict[str, int] = field(default_factory=dict)
    failed_authentication_delay_ms: int = 100
    max_receive_size: int = 524288


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    listener_name: str
    protocol: str
    ssl_context: ssl.SSLContext | None
    principal_rules: tuple[MappingRule, ...]
    sasl: SaslSettings | None


def build_listener_security(config: BrokerConfig, listener_name: str) -> ListenerSecurity:
    protocol = config.security_protocol(listener_name)
    context = None
    if protocol in TLS_PROTOCOLS:
        from .tls import server_context

        context = server_context(config, listener_name)
    rules = parse_mapping_rules(
        str(config.listener_value(listener_name, "ssl.principal.mapping.rules"))
    )
    sasl = _sasl_settings(config, listener_name) if protocol in SASL_PROTOCOLS else None
    return ListenerSecurity(listener_name, protocol, context, rules, sasl)


def _sasl_settings(config: BrokerConfig, listener_name: str) -> SaslSettings:
    enabled = [
        item.upper() for item in config.listener_value(listener_name, "sasl.enabled.mechanisms")
    ]
    served = tuple(item for item in enabled if item in SERVED_SASL_MECHANISMS)
    if not served:
        raise ConfigError(
            f"Listener {listener_name} uses SASL, but sasl.enabled.mechanisms"
            f" ({','.join(enabled) or 'empty'}) enables no mechanism Brook serves: set"
            f" listener.name.{listener_name.lower()}.sasl.enabled.mechanisms (or"
            f" sasl.enabled.mechanisms) to some of {', '.join(SERVED_SASL_MECHANISMS)}"
        )
    refused = [item for item in enabled if item not in SERVED_SASL_MECHANISMS]
    if refused:
        log.warning(
            "Listener %s: SASL mechanism(s) %s are enabled but not served by Brook; clients"
            " asking for them get UNSUPPORTED_SASL_MECHANISM",
            listener_name,
            ", ".join(refused),
        )
    plain_users: dict[str, str] = {}
    if "PLAIN" in served:
        plain_users = _plain_users(config, listener_name)
    return SaslSettings(
        mechanisms=served,
        plain_users=plain_users,
        max_reauth_ms={
            mechanism: int(
                config.listener_value(listener_name, "connections.max.reauth.ms", mechanism)
            )
            for mechanism in served
        },
        failed_authentication_delay_ms=int(
            config.listener_value(listener_name, "connection.failed.authentication.delay.ms")
        ),
        max_receive_size=int(config.listener_value(listener_name, "sasl.server.max.receive.size")),
    )


def _plain_users(config: BrokerConfig, listener_name: str) -> dict[str, str]:
    key = f"listener.name.{listener_name.lower()}.plain.sasl.jaas.config"
    text = config.listener_value(listener_name, "sasl.jaas.config", "PLAIN")
    if not text:
        raise ConfigError(
            f"Listener {listener_name} enables SASL/PLAIN but has no JAAS config: set {key}"
            f' (or sasl.jaas.config) to {PLAIN_LOGIN_MODULE} required user_<name>="<password>";'
        )
    entry = parse_jaas_config(str(text), key)
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise ConfigError(f"{key}: SASL/PLAIN needs {PLAIN_LOGIN_MODULE}, not {entry.login_module}")
    return entry.plain_users
