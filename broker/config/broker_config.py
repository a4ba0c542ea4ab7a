"""Broker configuration by Kafka's names: definitions, defaults, parsing and validation.

Values come from, lowest precedence first: Kafka's defaults (or Brook's documented
test-broker default), a server.properties file, environment variables
`BROOK_<KEY>` (the key upper-cased, dots as underscores: BROOK_LOG_DIRS=/data), and
`--override key=value` on the command line. An unknown key or a bad value stops
start-up with a message naming the key.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from brook.protocol.releases import KNOWN_RELEASES

from .values import config_to_string

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
ENV_PREFIX = "BROOK_"
# Environment variables under the prefix that Brook's own scripts read and that are not
# broker configs: the log level, a test's crash point (broker/server/crash_points.py), test.sh's
# venv and worker count, the fuzz tests' settings. They are passed over in silence; any
# other BROOK_* that names no config gets one warning at start (BrokerConfig.ignored_env).
NON_CONFIG_ENV = frozenset(
    {"BROOK_LOG_LEVEL", "BROOK_CRASH_POINT", "BROOK_VENV", "BROOK_TEST_WORKERS"}
)
NON_CONFIG_ENV_PREFIXES = ("BROOK_FUZZ_",)
MAX_PORT = 65535


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid."""


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ValueError("expected true or false")


def _parse_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


_PARSERS: dict[str, Callable[[str], Any]] = {
    "int": lambda text: int(text.strip()),
    "long": lambda text: int(text.strip()),
    "boolean": _parse_bool,
    "string": lambda text: text.strip(),
    "list": _parse_list,
    "double": lambda text: float(text.strip()),
    "password": lambda text: text.strip(),
}
_BOUNDS = {"int": (-(2**31), INT_MAX), "long": (-(2**63), LONG_MAX)}


class ConfigKey(NamedTuple):
    name: str
    type: str  # int, long, double, boolean, string, list
    default: Any
    doc: str
    at_least: int | None = None
    at_most: float | None = None  # Kafka's Range.between
    choices: tuple[str, ...] | None = None
    kafka_default: Any = None  # set where Brook's default differs from Kafka's, with why
    why_different: str = ""
    # A validator of Kafka's beyond the ranges above: the rule broken, or None.
    check: Callable[[Any], str | None] | None = None

    def parse(self, raw: Any) -> Any:
        if raw is None:
            return None
        if isinstance(raw, str):
            try:
                value = _PARSERS[self.type](raw)
            except ValueError as exc:
                # Kafka's wording for a number that does not parse.
                rule = (
                    f"Not a number of type {self.type.upper()}"
                    if self.type in _BOUNDS or self.type == "double"
                    else exc
                )
                raise ConfigError(
                    f"Invalid value {raw!r} for configuration {self.name}: {rule}"
                ) from None
        else:
            value = raw
        self.validate(value)
        return value

    def _check_range(self, value: float, shown_as: Callable[[float], Any]) -> None:
        """Kafka's Range validator; bounds shown as Java prints the key's type."""
        if self.at_least is not None and value < self.at_least:
            raise ConfigError(
                f"Invalid value {value} for configuration {self.name}:"
                f" Value must be at least {shown_as(self.at_least)}"
            )
        if self.at_most is not None and value > self.at_most:
            raise ConfigError(
                f"Invalid value {value} for configuration {self.name}:"
                f" Value must be no more than {shown_as(self.at_most)}"
            )

    def validate(self, value: Any) -> None:
        if value is None:
            return
        if self.type in _BOUNDS:
            low, high = _BOUNDS[self.type]
            if not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(
                    f"Invalid value {value!r} for configuration {self.name}: not a {self.type}"
                )
            self._check_range(value, int)
        if self.type == "double":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(
                    f"Invalid value {value!r} for configuration {self.name}: not a double"
                )
            self._check_range(value, float)
        if self.choices is not None and self.type == "list":
            # A list key with choices (cleanup.policy) checks each element, as Kafka's
            # ValidList does.
            for item in value:
                if item not in self.choices:
                    raise ConfigError(
                        f"Invalid value {item!r} for configuration {self.name}:"
                        f" String must be one of: {', '.join(self.choices)}"
                    )
        elif self.choices is not None and value not in self.choices:
            raise ConfigError(
                f"Invalid value {value!r} for configuration {self.name}:"
                f" String must be one of: {', '.join(self.choices)}"
            )
        rule = self.check(value) if self.check is not None else None
        if rule is not None:
            raise ConfigError(
                f"Invalid value {config_to_string(value)!r} for configuration {self.name}: {rule}"
            )


def _check_zookeeper_connect(value: Any) -> str | None:
    if not value:
        return None  # empty: no ZooKeeper, as unset
    from ..zookeeper.connect_string import parse_connect_string  # only when one is set

    try:
        parse_connect_string(value)
    except ValueError as exc:
        return str(exc)
    return None


def _check_rebalance_protocols(value: Any) -> str | None:
    return None if "classic" in value else "The classic protocol must be enabled."


MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def _check_migration_policy(value: Any) -> str | None:
    """Kafka's check: one of the policies, in any case."""
    if str(value).lower() in MIGRATION_POLICIES:
        return None
    return "String must be one of (case insensitive): " + ", ".join(
        policy.upper() for policy in MIGRATION_POLICIES
    )


def _check_not_empty(value: Any) -> str | None:
    return None if value else "The list must not be empty."


def _key(name: str, type_: str, default: Any, doc: str, **kwargs: Any) -> ConfigKey:
    return ConfigKey(name, type_, default, doc, **kwargs)


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
STORE_TYPES = ("JKS", "PKCS12", "PEM")
# The mechanisms Brook serves; Kafka's others (GSSAPI, OAUTHBEARER) may be listed in
# sasl.enabled.mechanisms, as they are by default, and are refused at the handshake.
SERVED_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def parse_connection_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: `address:count,...` (an IPv6 address's own colons
    come before the last one); a host name stands for the address it resolves to now."""
    overrides: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{item!r} is not address:count")
        overrides[_address(host.strip().strip("[]"))] = int(count)
    return overrides


def _address(host: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        import socket

        try:
            return socket.gethostbyname(host)
        except OSError:
            raise ValueError(f"{host} is not an address and does not resolve") from None


def _check_connection_overrides(value: Any) -> str | None:
    try:
        parse_connection_overrides(str(value or ""))
    except ValueError as exc:
        return f"Expected a comma-separated list of address:count ({exc})"
    return None


def _check_tls_versions(value: Any) -> str | None:
    unknown = [item for item in value if item not in ("TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1")]
    return f"unknown TLS protocol(s) {', '.join(unknown)}" if unknown else None


def _check_mapping_rules(value: Any) -> str | None:
    from ..security.certificate_names import parse_mapping_rules  # only when the key is set

    try:
        parse_mapping_rules(value)
    except ValueError as exc:
        return str(exc)
    return None


# Kafka's SSL and SASL broker keys. Each may also be set for one listener as
# `listener.name.<lower-case listener name>.<key>`, which wins over the plain key for
# that listener (LISTENER_PREFIXED_CONFIGS); SASL's JAAS config and re-authentication
# limit also per mechanism, `listener.name.<l>.<mechanism>.<key>`. Type "password":
# Kafka's PASSWORD, never shown by DescribeConfigs.
SECURITY_CONFIGS = [
    ConfigKey(
        "ssl.keystore.type",
        "string",
        "JKS",
        "Format of the key store: PEM (or PKCS12); Kafka's default JKS is refused with a"
        " message naming PEM.",
        choices=STORE_TYPES,
    ),
    ConfigKey(
        "ssl.keystore.location",
        "string",
        None,
        "The key store: with PEM, a file holding the private key and the certificate chain.",
    ),
    ConfigKey("ssl.keystore.password", "password", None, "Password of the key store file."),
    ConfigKey("ssl.key.password", "password", None, "Password of the private key."),
    ConfigKey(
        "ssl.keystore.key",
        "password",
        None,
        "The private key in PEM (PKCS#8), inline, instead of ssl.keystore.location.",
    ),
    ConfigKey(
        "ssl.keystore.certificate.chain",
        "password",
        None,
        "The certificate chain in PEM, inline, with ssl.keystore.key.",
    ),
    ConfigKey(
        "ssl.truststore.type",
        "string",
        "JKS",
        "Format of the trust store: PEM (or PKCS12).",
        choices=STORE_TYPES,
    ),
    ConfigKey(
        "ssl.truststore.location",
        "string",
        None,
        "The trust store: with PEM, a file of CA certificates.",
    ),
    ConfigKey("ssl.truststore.password", "password", None, "Password of the trust store file."),
    ConfigKey(
        "ssl.truststore.certificates",
        "password",
        None,
        "Trusted CA certificates in PEM, inline, instead of ssl.truststore.location.",
    ),
    ConfigKey(
        "ssl.client.auth",
        "string",
        "none",
        "Whether TLS clients must present a certificate (required), may (requested) or are"
        " not asked (none).",
        choices=("required", "requested", "none"),
    ),
    ConfigKey(
        "ssl.enabled.protocols",
        "list",
        ["TLSv1.2", "TLSv1.3"],
        "The TLS versions accepted.",
        check=_check_tls_versions,
    ),
    ConfigKey(
        "ssl.protocol",
        "string",
        "TLSv1.3",
        "The TLS protocol of the SSL context (the highest version offered).",
        choices=("TLSv1.3", "TLSv1.2", "TLS"),
    ),
    ConfigKey(
        "ssl.cipher.suites",
        "list",
        [],
        "The TLS 1.2 cipher suites accepted, by OpenSSL's or IANA's names; empty: the defaults.",
    ),
    ConfigKey(
        "ssl.principal.mapping.rules",
        "string",
        "DEFAULT",
        "Rules mapping a client certificate's distinguished name to a principal name:"
        " RULE:pattern/replacement/[LU], ..., DEFAULT.",
        check=_check_mapping_rules,
    ),
    ConfigKey(
        "ssl.endpoint.identification.algorithm",
        "string",
        "https",
        "How the inter-broker client checks the server's host name: https, or empty for no check.",
    ),
    ConfigKey(
        "sasl.enabled.mechanisms",
        "list",
        ["GSSAPI"],
        "The SASL mechanisms a SASL listener accepts; Brook serves PLAIN, SCRAM-SHA-256 and"
        " SCRAM-SHA-512.",
    ),
    ConfigKey(
        "sasl.mechanism.inter.broker.protocol",
        "string",
        "GSSAPI",
        "The SASL mechanism brokers authenticate to each other with.",
    ),
    ConfigKey(
        "sasl.jaas.config",
        "password",
        None,
        'JAAS login configuration: PlainLoginModule with user_<name>="<password>" entries'
        " (and username/password for the inter-broker client), or ScramLoginModule.",
    ),
    ConfigKey(
        "connections.max.reauth.ms",
        "long",
        0,
        "Longest a SASL session lasts before the client must re-authenticate (KIP-368); 0: for"
        " ever.",
    ),
    ConfigKey(
        "connection.failed.authentication.delay.ms",
        "int",
        100,
        "How long a connection that failed authentication is held before it is closed (ms).",
        at_least=0,
    ),
    ConfigKey(
        "sasl.server.max.receive.size",
        "int",
        524288,
        "Largest request accepted before SASL authentication completes.",
    ),
]
# ACLs: off unless authorizer.class.name names one of Kafka's authorizers.
AUTHORIZER_CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
)
AUTHORIZER_CONFIGS = [
    ConfigKey(
        "authorizer.class.name",
        "string",
        "",
        "The authorizer: Kafka's AclAuthorizer or StandardAuthorizer class name turns ACLs on"
        " (both act the same here); empty, every request is allowed.",
        check=lambda value: (
            None
            if value in ("", *AUTHORIZER_CLASS_NAMES)
            else f"Brook's authorizer is one of {', '.join(AUTHORIZER_CLASS_NAMES)}"
        ),
    ),
    ConfigKey(
        "super.users",
        "string",
        "",
        "Principals allowed every operation whatever the ACLs say, semicolon-separated"
        " (User:admin;User:broker).",
    ),
    ConfigKey(
        "allow.everyone.if.no.acl.found",
        "boolean",
        False,
        "With an authorizer: whether a resource no ACL applies to is open to everyone.",
    ),
]


# The keys that may be set per listener, `listener.name.<l>.<key>`.
LISTENER_PREFIXED_CONFIGS = frozenset(key.name for key in SECURITY_CONFIGS) - {
    "sasl.mechanism.inter.broker.protocol",
    "ssl.endpoint.identification.algorithm",
}
# The keys that may be set per listener and SASL mechanism, `listener.name.<l>.<mech>.<key>`.
MECHANISM_PREFIXED_CONFIGS = frozenset({"sasl.jaas.config", "connections.max.reauth.ms"})
_LISTENER_PREFIXED = re.compile(r"^listener\.name\.(?P<listener>[a-z0-9_]+)\.(?P<rest>.+)$")


def prefixed_key(name: str) -> ConfigKey | None:
    """The definition of a per-listener key (`listener.name.<l>.[<mech>.]<key>`), or None.

    Kafka requires the listener name in lower case there."""
    match = _LISTENER_PREFIXED.match(name)
    if not match:
        return None
    rest = match["rest"]
    if rest in LISTENER_PREFIXED_CONFIGS:
        return BROKER_CONFIGS[rest]
    mechanism, _, key = rest.partition(".")
    if key in MECHANISM_PREFIXED_CONFIGS and mechanism.upper().replace("_", "-") in (
        *SERVED_SASL_MECHANISMS,
        "GSSAPI",
        "OAUTHBEARER",
    ):
        return BROKER_CONFIGS[key]
    return None


BROKER_CONFIGS: dict[str, ConfigKey] = {
    key.name: key
    for key in [
        _key(
            "broker.id",
            "int",
            0,
            "The id of this broker.",
            at_least=0,
            kafka_default=-1,
            why_different="a single test broker needs a fixed id without ZooKeeper",
        ),
        # KRaft's names, so that a Kafka server.properties of either flavour starts Brook:
        # node.id is the broker id when broker.id is not given; the controller listeners
        # are not bound (Brook needs no KRaft controller and Kafka serves no client there).
        _key(
            "node.id",
            "int",
            -1,
            "KRaft's id of this node; the broker id when broker.id is not set.",
            at_least=-1,
        ),
        _key(
            "process.roles",
            "list",
            None,
            "KRaft's roles of this node (broker, controller); Brook runs the broker role.",
            choices=("broker", "controller"),
        ),
        _key(
            "controller.listener.names",
            "list",
            None,
            "Listeners of the KRaft controller; Brook does not bind them.",
        ),
        _key(
            "listeners",
            "list",
            ["PLAINTEXT://:9092"],
            "Where the broker listens: comma-separated NAME://host:port.",
        ),
        _key(
            "advertised.listeners",
            "list",
            None,
            "What the broker tells clients of each listener to connect to, NAME://host:port;"
            " defaults to listeners.",
        ),
        _key(
            "listener.security.protocol.map",
            "list",
            [
                "SASL_SSL:SASL_SSL",
                "PLAINTEXT:PLAINTEXT",
                "SSL:SSL",
                "SASL_PLAINTEXT:SASL_PLAINTEXT",
            ],
            "The security protocol of each listener name, NAME:PROTOCOL.",
        ),
        _key(
            "inter.broker.listener.name",
            "string",
            None,
            "The listener brokers use to talk to each other (one of advertised.listeners).",
        ),
        _key(
            "security.inter.broker.protocol",
            "string",
            "PLAINTEXT",
            "The security protocol between brokers, when inter.broker.listener.name is not set.",
            choices=SECURITY_PROTOCOLS,
        ),
        _key(
            "broker.rack",
            "string",
            None,
            "The rack of this broker, listed in Metadata (and for rack-aware replica assignment).",
        ),
        _key(
            "zookeeper.connect",
            "string",
            None,
            "The ZooKeeper of the cluster, host:port[,host:port...][/chroot] (the chroot"
            " made where missing); unset, the broker runs alone without ZooKeeper.",
            check=_check_zookeeper_connect,
        ),
        _key(
            "zookeeper.session.timeout.ms",
            "int",
            18000,
            "ZooKeeper session timeout: how long a broker that stopped answering stays registered.",
        ),
        _key(
            "zookeeper.connection.timeout.ms",
            "int",
            None,
            "How long to wait for a ZooKeeper connection at start; defaults to"
            " zookeeper.session.timeout.ms.",
        ),
        _key(
            "admin.listener",
            "string",
            None,
            "Brook's admin endpoint, http://HOST:PORT or https://HOST:PORT (/metrics, the"
            " health probes, fault injection); off when unset. https uses the broker's"
            " ssl.keystore.* (or listener.name.admin.ssl.*).",
        ),
        _key(
            "admin.fault.injection.enable",
            "boolean",
            False,
            "Brook's own: serve fault injection (/v1/faults, `brook faults`, the fixture's"
            " faults). Off unless switched on; the pytest fixture and the test image do.",
        ),
        _key(
            "admin.auth.token",
            "password",
            None,
            "Brook's own: a bearer token for the admin endpoint (Authorization: Bearer ...)."
            " The endpoint asks for it, or for HTTP basic credentials of a broker user, when"
            " it is set or when a listener uses SASL or TLS or an authorizer is configured.",
        ),
        _key(
            "log.format",
            "string",
            "text",
            "Brook's own: the broker's log lines as Kafka-like text, or one JSON object per"
            " line (json) for log shippers.",
            choices=("text", "json"),
        ),
        _key(
            "brook.emulate.release",
            "string",
            None,
            "Brook's own: advertise and serve the API versions of this Apache Kafka release"
            " (within Brook's), to test a client's fallbacks; off when unset.",
            choices=KNOWN_RELEASES,
        ),
        _key(
            "brook.log.file.idle.close.ms",
            "long",
            60_000,
            "Brook's own: a segment file (log or index) not read or written for about this"
            " long has its descriptor closed, reopened on next use, so idle partitions hold"
            " none (Kafka keeps one per segment).",
            at_least=1000,
        ),
        _key(
            "log.dir",
            "string",
            "/tmp/brook-logs",
            "The data directory, used when log.dirs is not set.",
            kafka_default="/tmp/kafka-logs",
            why_different="not to touch a Kafka's data on the same machine",
        ),
        _key("log.dirs", "list", None, "Comma-separated data directories."),
        _key("num.partitions", "int", 1, "Partitions of an auto-created topic.", at_least=1),
        _key(
            "default.replication.factor",
            "int",
            1,
            "Replication factor of an auto-created topic.",
            at_least=1,
        ),
        _key(
            "auto.create.topics.enable",
            "boolean",
            True,
            "Create a topic when a client asks for its metadata.",
        ),
        _key("delete.topic.enable", "boolean", True, "Allow DeleteTopics."),
        _key(
            "max.request.partition.size.limit",
            "int",
            2000,
            "The most partitions a DescribeTopicPartitions answer holds.",
            at_least=1,
        ),
        _key("log.segment.bytes", "int", 1073741824, "Size at which a segment rolls.", at_least=14),
        _key("log.roll.ms", "long", None, "Age at which a segment rolls (ms).", at_least=1),
        _key("log.roll.hours", "int", 168, "Age at which a segment rolls (hours).", at_least=1),
        _key(
            "log.index.interval.bytes",
            "int",
            4096,
            "Bytes between offset-index entries.",
            at_least=0,
        ),
        _key(
            "log.index.size.max.bytes",
            "int",
            10485760,
            "Maximum size of an index file.",
            at_least=4,
        ),
        _key(
            "message.max.bytes",
            "int",
            1048588,
            "Largest record batch the broker accepts (after compression).",
            at_least=0,
        ),
        _key(
            "fetch.max.bytes",
            "int",
            57671680,
            "Most bytes a Fetch response returns (beyond the first batch), whatever it asks.",
            at_least=1024,
        ),
        _key(
            "socket.request.max.bytes",
            "int",
            104857600,
            "Largest request; a bigger one closes the connection.",
            at_least=1,
        ),
        _key(
            "max.connections.per.ip",
            "int",
            2147483647,
            "Most connections open at once from one address; a new one over it is closed at"
            " once. 0 only with max.connections.per.ip.overrides.",
            at_least=0,
        ),
        _key(
            "max.connections.per.ip.overrides",
            "string",
            "",
            "Per-address limits overriding max.connections.per.ip: address:count,...",
            check=_check_connection_overrides,
        ),
        _key(
            "quota.window.num",
            "int",
            11,
            "Samples kept in memory for client quotas.",
            at_least=1,
        ),
        _key(
            "quota.window.size.seconds",
            "int",
            1,
            "Time span of each sample for client quotas (seconds).",
            at_least=1,
        ),
        _key(
            "log.flush.interval.messages",
            "long",
            LONG_MAX,
            "Messages appended before a log is fsynced.",
            at_least=1,
        ),
        _key(
            "log.flush.interval.ms",
            "long",
            None,
            "Longest a message stays unflushed (ms); defaults to the scheduler interval.",
            at_least=0,
        ),
        _key(
            "log.flush.scheduler.interval.ms",
            "long",
            LONG_MAX,
            "How often the flusher checks logs (ms).",
            at_least=0,
        ),
        _key("log.retention.hours", "int", 168, "Retention by time (hours)."),
        _key("log.retention.minutes", "int", None, "Retention by time (minutes)."),
        _key("log.retention.ms", "long", None, "Retention by time (ms); -1 keeps forever."),
        _key("log.retention.bytes", "long", -1, "Retention by size per partition; -1: none."),
        _key(
            "log.retention.check.interval.ms",
            "long",
            300000,
            "How often retention is checked (ms).",
            at_least=1,
        ),
        _key(
            "compression.type",
            "string",
            "producer",
            "Codec the broker stores batches in; producer keeps the producer's.",
            choices=COMPRESSION_TYPES,
        ),
        _key(
            "log.message.timestamp.type",
            "string",
            "CreateTime",
            "Timestamp type of new topics.",
            choices=("CreateTime", "LogAppendTime"),
        ),
        _key(
            "min.insync.replicas",
            "int",
            1,
            "Replicas that must have an acks=all write.",
            at_least=1,
        ),
        _key(
            "log.message.timestamp.before.max.ms",
            "long",
            LONG_MAX,
            "How far in the past a CreateTime timestamp may be (KIP-937).",
            at_least=0,
        ),
        _key(
            "log.message.timestamp.after.max.ms",
            "long",
            3600000,
            "How far in the future a CreateTime timestamp may be (KIP-937).",
            at_least=0,
        ),
        _key(
            "log.message.timestamp.difference.max.ms",
            "long",
            LONG_MAX,
            "Deprecated: both timestamp bounds, used where the two keys above are unset.",
            at_least=0,
        ),
        _key(
            "log.flush.offset.checkpoint.interval.ms",
            "int",
            60000,
            "How often recovery points and log start offsets are checkpointed.",
            at_least=0,
        ),
        _key(
            "replica.high.watermark.checkpoint.interval.ms",
            "int",
            5000,
            "How often the high watermarks are written to replication-offset-checkpoint.",
            at_least=0,
        ),
        _key(
            "group.initial.rebalance.delay.ms",
            "int",
            0,
            "How long a new group waits for more members before its first rebalance.",
            at_least=0,
            kafka_default=3000,
            why_different="a test broker's groups should form at once",
        ),
        _key(
            "group.min.session.timeout.ms",
            "int",
            6000,
            "Smallest session timeout a member may ask for.",
            at_least=0,
        ),
        _key(
            "group.max.session.timeout.ms",
            "int",
            1800000,
            "Largest session timeout a member may ask for.",
            at_least=0,
        ),
        _key("group.max.size", "int", INT_MAX, "Most members a group may have.", at_least=1),
        _key(
            "group.coordinator.rebalance.protocols",
            "list",
            ["classic", "consumer"],
            "The group protocols served: classic (JoinGroup/SyncGroup) and consumer"
            " (KIP-848's ConsumerGroupHeartbeat); classic is required.",
            choices=("classic", "consumer"),
            check=_check_rebalance_protocols,
        ),
        _key(
            "group.consumer.assignors",
            "list",
            ["uniform", "range"],
            "The server-side assignors of consumer groups; the first is the default.",
            choices=("uniform", "range"),
            check=_check_not_empty,
        ),
        _key(
            "group.consumer.session.timeout.ms",
            "int",
            45000,
            "A consumer group member is fenced after this long without a heartbeat.",
            at_least=1,
        ),
        _key(
            "group.consumer.min.session.timeout.ms",
            "int",
            45000,
            "Smallest session timeout a consumer group may be configured with.",
            at_least=1,
        ),
        _key(
            "group.consumer.max.session.timeout.ms",
            "int",
            60000,
            "Largest session timeout a consumer group may be configured with.",
            at_least=1,
        ),
        _key(
            "group.consumer.heartbeat.interval.ms",
            "int",
            5000,
            "How often consumer group members heartbeat.",
            at_least=1,
        ),
        _key(
            "group.consumer.min.heartbeat.interval.ms",
            "int",
            5000,
            "Smallest heartbeat interval a consumer group may be configured with.",
            at_least=1,
        ),
        _key(
            "group.consumer.max.heartbeat.interval.ms",
            "int",
            15000,
            "Largest heartbeat interval a consumer group may be configured with.",
            at_least=1,
        ),
        _key(
            "group.share.session.timeout.ms",
            "int",
            45000,
            "A share group's member is fenced after this long without a heartbeat"
            " (a group's share.session.timeout.ms overrides it).",
            at_least=1,
        ),
        _key(
            "group.share.min.session.timeout.ms",
            "int",
            45000,
            "Smallest share.session.timeout.ms a group may set.",
            at_least=1,
        ),
        _key(
            "group.share.max.session.timeout.ms",
            "int",
            60000,
            "Largest share.session.timeout.ms a group may set.",
            at_least=1,
        ),
        _key(
            "group.share.heartbeat.interval.ms",
            "int",
            5000,
            "How often share group members heartbeat"
            " (a group's share.heartbeat.interval.ms overrides it).",
            at_least=1,
        ),
        _key(
            "group.share.min.heartbeat.interval.ms",
            "int",
            5000,
            "Smallest share.heartbeat.interval.ms a group may set.",
            at_least=1,
        ),
        _key(
            "group.share.max.heartbeat.interval.ms",
            "int",
            15000,
            "Largest share.heartbeat.interval.ms a group may set.",
            at_least=1,
        ),
        _key(
            "group.share.record.lock.duration.ms",
            "int",
            30000,
            "How long a record delivered to a share group's member stays acquired by it.",
            at_least=1000,
            at_most=3600000,
        ),
        _key(
            "group.share.min.record.lock.duration.ms",
            "int",
            15000,
            "Smallest share.record.lock.duration.ms a group may set.",
            at_least=1000,
            at_most=30000,
        ),
        _key(
            "group.share.max.record.lock.duration.ms",
            "int",
            60000,
            "Largest share.record.lock.duration.ms a group may set.",
            at_least=30000,
            at_most=3600000,
        ),
        _key(
            "group.share.delivery.count.limit",
            "int",
            5,
            "How often a record is delivered to a share group before it is archived.",
            at_least=2,
            at_most=10,
        ),
        _key(
            "group.share.min.delivery.count.limit",
            "int",
            2,
            "Smallest share.delivery.count.limit a group may set.",
            at_least=2,
            at_most=5,
        ),
        _key(
            "group.share.max.delivery.count.limit",
            "int",
            10,
            "Largest share.delivery.count.limit a group may set.",
            at_least=5,
            at_most=25,
        ),
        _key(
            "group.share.partition.max.record.locks",
            "int",
            2000,
            "How many records of a partition a share group keeps acquired at most.",
            at_least=100,
            at_most=10000,
        ),
        _key(
            "group.share.min.partition.max.record.locks",
            "int",
            100,
            "Smallest share.partition.max.record.locks a group may set.",
            at_least=100,
            at_most=2000,
        ),
        _key(
            "group.share.max.partition.max.record.locks",
            "int",
            4000,
            "Largest share.partition.max.record.locks a group may set.",
            at_least=2000,
            at_most=10000,
        ),
        _key(
            "group.share.max.share.sessions",
            "int",
            2000,
            "How many share sessions (a share-group member fetching from this broker) the"
            " broker keeps at once.",
            at_least=1,
        ),
        _key(
            "group.share.max.size",
            "int",
            200,
            "Most members a share group may have.",
            at_least=1,
            at_most=1000,
        ),
        _key(
            "group.share.assignors",
            "list",
            ["simple"],
            "The server-side assignor of share groups.",
            choices=("simple",),
            check=_check_not_empty,
        ),
        _key(
            "share.coordinator.state.topic.num.partitions",
            "int",
            50,
            "Partitions of __share_group_state (fixed once created).",
            at_least=1,
        ),
        _key(
            "share.coordinator.state.topic.replication.factor",
            "int",
            1,
            "Replication factor of __share_group_state.",
            at_least=1,
            kafka_default=3,
            why_different="a single broker cannot hold three replicas",
        ),
        _key(
            "share.coordinator.state.topic.min.isr",
            "int",
            1,
            "min.insync.replicas of __share_group_state, set when it is created.",
            at_least=1,
            kafka_default=2,
            why_different="a single broker holds one replica",
        ),
        _key(
            "share.coordinator.state.topic.segment.bytes",
            "int",
            104857600,
            "Segment size of __share_group_state.",
            at_least=1,
        ),
        _key(
            "share.coordinator.snapshot.update.records.per.snapshot",
            "int",
            500,
            "How many ShareUpdate records a share partition's state gets before the share"
            " coordinator writes a whole ShareSnapshot again.",
            at_least=0,
            at_most=500,
        ),
        _key(
            "group.consumer.migration.policy",
            "string",
            "bidirectional",
            "Which online conversions between classic and consumer groups are allowed:"
            " bidirectional, upgrade (classic to consumer), downgrade, disabled.",
            check=_check_migration_policy,
        ),
        _key(
            "group.consumer.max.size",
            "int",
            INT_MAX,
            "Most members a consumer group may have.",
            at_least=1,
        ),
        _key(
            "offsets.topic.num.partitions",
            "int",
            50,
            "Partitions of __consumer_offsets (fixed once created).",
            at_least=1,
        ),
        _key(
            "offsets.topic.replication.factor",
            "int",
            1,
            "Replication factor of __consumer_offsets.",
            at_least=1,
            kafka_default=3,
            why_different="a single broker cannot hold three replicas",
        ),
        _key(
            "offsets.topic.segment.bytes",
            "int",
            104857600,
            "Segment size of __consumer_offsets.",
            at_least=1,
        ),
        _key(
            "transaction.state.log.num.partitions",
            "int",
            50,
            "Partitions of __transaction_state (fixed once created).",
            at_least=1,
        ),
        _key(
            "transaction.state.log.replication.factor",
            "int",
            1,
            "Replication factor of __transaction_state.",
            at_least=1,
            kafka_default=3,
            why_different="a single broker cannot hold three replicas",
        ),
        _key(
            "transaction.state.log.min.isr",
            "int",
            1,
            "min.insync.replicas of __transaction_state, set when it is created: its writes"
            " are refused (and the producer retries) while fewer replicas are in sync.",
            at_least=1,
            kafka_default=2,
            why_different="a single broker holds one replica",
        ),
        _key(
            "transaction.state.log.segment.bytes",
            "int",
            104857600,
            "Segment size of __transaction_state.",
            at_least=1,
        ),
        _key(
            "transaction.max.timeout.ms",
            "int",
            900000,
            "Largest transaction.timeout.ms a producer may ask for.",
            at_least=1,
        ),
        _key(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "int",
            10000,
            "How often transactions past their timeout are aborted.",
            at_least=1,
        ),
        _key(
            "transactional.id.expiration.ms",
            "int",
            604800000,
            "How long an idle transactional id is kept.",
            at_least=1,
        ),
        _key(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "int",
            3600000,
            "How often idle transactional ids are removed.",
            at_least=1,
        ),
        _key(
            "offsets.retention.minutes",
            "int",
            10080,
            "How long an empty group's committed offsets are kept.",
            at_least=1,
        ),
        _key(
            "offsets.retention.check.interval.ms",
            "long",
            600000,
            "How often expired offsets are removed.",
            at_least=1,
        ),
        _key(
            "producer.id.expiration.ms",
            "int",
            86400000,
            "How long a producer id with no open transaction is remembered after its last write.",
            at_least=1,
        ),
        _key(
            "producer.id.expiration.check.interval.ms",
            "int",
            600000,
            "How often producer ids past producer.id.expiration.ms are removed.",
            at_least=1,
        ),
        _key(
            "offset.metadata.max.bytes",
            "int",
            4096,
            "Largest metadata string of an offset commit.",
            at_least=0,
        ),
        # The broker defaults of topic keys that have no other broker setting; Kafka
        # names them so, and DescribeConfigs lists them as the topic keys' synonyms.
        _key(
            "log.cleanup.policy",
            "list",
            ["delete"],
            "Cleanup policy of topics that set none: delete and/or compact.",
            choices=("compact", "delete"),
        ),
        _key(
            "log.cleaner.delete.retention.ms",
            "long",
            86400000,
            "How long tombstones are kept in compacted topics (ms).",
            at_least=0,
        ),
        _key(
            "log.cleaner.min.compaction.lag.ms",
            "long",
            0,
            "Minimum age of a record before it may be compacted (ms).",
            at_least=0,
        ),
        _key(
            "log.cleaner.max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "Longest a record may stay uncompacted in a compacted topic (ms).",
            at_least=1,
        ),
        _key(
            "log.cleaner.min.cleanable.ratio",
            "double",
            0.5,
            "Share of a compacted log that must be dirty before it is cleaned.",
            at_least=0,
            at_most=1.0,
        ),
        _key(
            "log.cleaner.enable",
            "boolean",
            True,
            "Whether the log cleaner compacts topics whose cleanup.policy includes compact.",
        ),
        _key(
            "log.cleaner.backoff.ms",
            "long",
            15000,
            "How long the log cleaner sleeps when no log needs cleaning (ms).",
            at_least=0,
        ),
        _key(
            "log.cleaner.threads",
            "int",
            1,
            "Threads of the log cleaner, each cleaning one log at a time.",
            at_least=0,
        ),
        _key(
            "log.cleaner.dedupe.buffer.size",
            "long",
            134217728,
            "Memory of the cleaner's offset maps, split between its threads (bytes).",
        ),
        _key(
            "log.cleaner.io.max.bytes.per.second",
            "double",
            1.7976931348623157e308,
            "Most bytes a second the cleaner threads read and write, all together.",
        ),
        _key(
            "log.segment.delete.delay.ms",
            "long",
            60000,
            "How long a deleted segment waits as .deleted before its files go (ms).",
            at_least=0,
        ),
        _key(
            "unclean.leader.election.enable",
            "boolean",
            False,
            "Allow a replica outside the ISR to become leader.",
        ),
        # The controller's rebalance of leaders back to their preferred replicas.
        _key(
            "auto.leader.rebalance.enable",
            "boolean",
            True,
            "The controller moves leaders back to their preferred replicas when imbalanced.",
        ),
        _key(
            "leader.imbalance.check.interval.seconds",
            "long",
            300,
            "How often the controller checks the leaders' balance (s).",
            at_least=1,
        ),
        _key(
            "leader.imbalance.per.broker.percentage",
            "int",
            10,
            "Share of a broker's preferred partitions led elsewhere that triggers a rebalance (%).",
            at_least=0,
        ),
        # Controlled shutdown: a broker stopping in a cluster hands its leaders over first.
        _key(
            "controlled.shutdown.enable",
            "boolean",
            True,
            "Ask the controller to move this broker's leaders away before it stops.",
        ),
        _key(
            "controlled.shutdown.max.retries",
            "int",
            3,
            "ControlledShutdown attempts before the broker stops anyway.",
        ),
        _key(
            "controlled.shutdown.retry.backoff.ms",
            "long",
            5000,
            "Wait between ControlledShutdown attempts (ms).",
        ),
        # Replication (a follower's fetches from its leaders, the leader's ISR upkeep).
        _key(
            "num.replica.fetchers",
            "int",
            1,
            "Fetchers per source broker that copy its partitions to this one.",
            at_least=1,
        ),
        _key(
            "replica.fetch.max.bytes",
            "int",
            1048576,
            "Bytes a follower asks for per partition in one fetch.",
            at_least=0,
        ),
        _key(
            "replica.fetch.min.bytes",
            "int",
            1,
            "Bytes a follower's fetch waits for (up to replica.fetch.wait.max.ms).",
        ),
        _key(
            "replica.fetch.response.max.bytes",
            "int",
            10485760,
            "Bytes a follower asks for in one fetch, all partitions together.",
            at_least=0,
        ),
        _key(
            "replica.fetch.wait.max.ms",
            "int",
            500,
            "How long a follower's fetch may wait at the leader for data (ms).",
        ),
        _key(
            "replica.fetch.backoff.ms",
            "int",
            1000,
            "How long a follower waits after a failed fetch (ms).",
            at_least=0,
        ),
        _key(
            "replica.lag.time.max.ms",
            "long",
            30000,
            "A follower not caught up for this long leaves the ISR (ms).",
        ),
        _key(
            "replica.socket.timeout.ms",
            "int",
            30000,
            "How long a follower waits for a fetch response (ms).",
        ),
        *SECURITY_CONFIGS,
        *AUTHORIZER_CONFIGS,
    ]
}

_ADMIN_URL = re.compile(r"^https?://(\[[^\]]*\]|[^:/]*):(?P<port>\d+)/?$")
_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


class Listener(NamedTuple):
    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, text: str, key: str) -> Listener:
        match = _LISTENER.match(text.strip())
        if not match:
            raise ConfigError(
                f"Invalid value {text!r} for configuration {key}: expected NAME://host:port"
            )
        _check_port(int(match["port"]), text, key)
        return cls(match["name"].upper(), match["host"].strip("[]"), int(match["port"]))


def _check_port(port: int, text: str, key: str) -> None:
    # Kafka's bind fails with "port out of range"; say so before anything starts.
    if port > MAX_PORT:
        raise ConfigError(
            f"Invalid value {text!r} for configuration {key}: port {port} is out of range"
            f" (0-{MAX_PORT})"
        )


def _security_protocol_map(entries: list[str]) -> dict[str, str]:
    protocols: dict[str, str] = {}
    for entry in entries:
        name, sep, protocol = entry.partition(":")
        if not sep or not name.strip() or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {entry!r} for configuration listener.security.protocol.map:"
                f" expected LISTENER_NAME:PROTOCOL with PROTOCOL one of"
                f" {', '.join(SECURITY_PROTOCOLS)}"
            )
        protocols[name.strip().upper()] = protocol.strip().upper()
    return protocols


def _check_listeners(
    listeners: list[Listener], protocols: Mapping[str, str], controller_names: set[str]
) -> None:
    """Kafka's checks of `listeners`: names and ports once each, and a security protocol
    for each listener bound (not a KRaft controller's, which Kafka maps to PLAINTEXT when
    unmapped)."""
    text = ",".join(f"{item.name}://{item.host}:{item.port}" for item in listeners)
    names = [item.name for item in listeners]
    if len(set(names)) != len(names):
        raise ConfigError(f"Each listener must have a different name, listeners: {text}")
    ports = [item.port for item in listeners if item.port != 0]
    if len(set(ports)) != len(ports):
        raise ConfigError(f"Each listener must have a different port, listeners: {text}")
    for item in listeners:
        if item.name in controller_names:
            continue
        protocol = protocols.get(item.name)
        if protocol is None:
            raise ConfigError(f"No security protocol defined for listener {item.name}")


def _check_advertised(advertised: list[Listener], listeners: list[Listener]) -> None:
    names = [item.name for item in listeners]
    unknown = [item.name for item in advertised if item.name not in names]
    if unknown:
        raise ConfigError(
            "advertised.listeners listener names must be equal to or a subset of the ones"
            f" defined in listeners. Found {','.join(unknown)}. The valid options based on"
            f" currently configured listeners are {','.join(names)}"
        )
    if len({item.name for item in advertised}) != len(advertised):
        raise ConfigError("Each advertised listener must have a different name")
    for item in advertised:
        if item.host in ("0.0.0.0", "::"):
            raise ConfigError(
                "advertised.listeners cannot use the nonroutable meta-address"
                f" {item.host}. Use a routable IP address."
            )


def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file, as Kafka reads server.properties (storage's one parser)."""
    from brook.storage.checkpoints import parse_java_properties

    return parse_java_properties(path.read_text("utf-8"))


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Config keys from BROOK_* environment variables (BROOK_LOG_DIRS -> log.dirs)."""
    return {
        name[len(ENV_PREFIX) :].lower().replace("_", "."): value
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX)
        and len(name) > len(ENV_PREFIX)
        and name not in NON_CONFIG_ENV
        and not name.startswith(NON_CONFIG_ENV_PREFIXES)
    }


def warn_unknown_keys(
    config: BrokerConfig,
    properties_path: str | None,
    say: Callable[[str], None] | None = None,
) -> None:
    """One warning per source of keys that name no config (a file's or --override's), as
    Kafka's "was supplied but isn't a known config", with the known key a typo is
    closest to; to `say` (a tool's stderr), else the log."""
    import difflib
    import logging

    by_source: dict[str, list[str]] = {}
    for name, source in config.unknown_keys:
        by_source.setdefault(source, []).append(name)
    for source, names in by_source.items():
        where = f"{properties_path}" if source == "the config file" and properties_path else source
        described = []
        for name in names:
            close = difflib.get_close_matches(name, BROKER_CONFIGS, n=1, cutoff=0.85)
            described.append(f"{name} (did you mean {close[0]}?)" if close else name)
        message = (
            f"Passing over {len(names)} key(s) of {where} that Brook does not know (Kafka warns"
            f' "was supplied but isn\'t a known config"): {", ".join(described)}'
        )
        if say is not None:
            say(message)
        else:
            logging.getLogger("brook.cli").warning("%s", message)


def _env_name(key: str) -> str:
    """The environment variable of a config key (log.dirs -> BROOK_LOG_DIRS)."""
    return ENV_PREFIX + key.upper().replace(".", "_")


class BrokerConfig:
    """The validated broker configuration. Read values with `config["key"]`."""

    def __init__(
        self, values: Mapping[str, Any], explicit: Iterable[str] = (), build_security: bool = True
    ) -> None:
        self._values = dict(values)
        # What build() passed over: keys of the properties file and BROOK_* variables
        # that name no config (the caller logs one warning for each list).
        # (key, where it came from) of keys that name no config: passed over, warned of.
        self.unknown_keys: list[tuple[str, str]] = []
        self.ignored_env: list[str] = []
        # Keys given by the operator, as opposed to defaults: deprecated keys apply only
        # where their successors were not given.
        self.explicit = frozenset(explicit)
        self._resolve_broker_id()
        roles = self["process.roles"]
        if roles is not None and "broker" not in roles:
            raise ConfigError(
                f"process.roles={','.join(roles)} has no broker role: Brook runs as a broker"
                " (it needs no KRaft controller)"
            )
        self.listener_security_protocols = _security_protocol_map(
            self["listener.security.protocol.map"]
        )
        configured = [Listener.parse(item, "listeners") for item in self["listeners"]]
        # A KRaft file lists the controller's listener among `listeners` (a combined
        # node). Kafka serves no client there, and Brook has no controller: it is not
        # bound, nor advertised (Broker.start says so in one line).
        controller_names = {name.upper() for name in self["controller.listener.names"] or []}
        _check_listeners(configured, self.listener_security_protocols, controller_names)
        self.controller_listeners = [item for item in configured if item.name in controller_names]
        self.listeners = [item for item in configured if item.name not in controller_names]
        if not self.listeners:
            raise ConfigError(
                "listeners names no listener but the controller's"
                f" (controller.listener.names={','.join(sorted(controller_names))}):"
                " Brook would serve no client"
            )
        advertised = self["advertised.listeners"]
        if advertised:
            parsed = [Listener.parse(item, "advertised.listeners") for item in advertised]
            _check_advertised(parsed, configured)
            self.advertised_listeners = [
                item for item in parsed if item.name not in controller_names
            ]
        else:
            # A listener on every interface is advertised as localhost: a test broker's
            # clients run on the same machine (Kafka takes the host's canonical name).
            self.advertised_listeners = [
                Listener(
                    item.name,
                    item.host if item.host not in ("", "0.0.0.0", "::") else "localhost",
                    item.port,
                )
                for item in self.listeners
            ]
        self.inter_broker_listener_name = self._inter_broker_listener_name()
        if self["max.connections.per.ip"] == 0 and not self["max.connections.per.ip.overrides"]:
            raise ConfigError(
                "max.connections.per.ip can be set to zero only if"
                " max.connections.per.ip.overrides property is set."
            )
        # What each TLS or SASL listener asks of its clients (broker/security/), built
        # here so that a missing key store or JAAS config stops start-up with its key
        # (an AlterConfigs builds it after Kafka's listener checks, which come first).
        self.listener_security: dict[str, Any] = {}
        if build_security:
            self.build_listener_security()
        admin = self["admin.listener"]
        if admin:
            match = _ADMIN_URL.match(admin)
            if not match:
                raise ConfigError(
                    f"Invalid value {admin!r} for configuration admin.listener: expected"
                    " http://HOST:PORT or https://HOST:PORT"
                )
            _check_port(int(match["port"]), admin, "admin.listener")

    def build_listener_security(self) -> None:
        secured = [
            item.name for item in self.listeners if self.security_protocol(item.name) != "PLAINTEXT"
        ]
        if secured:
            from ..security.listener_security import build_listener_security

            self.listener_security = {name: build_listener_security(self, name) for name in secured}
        if self.security_protocol(self.inter_broker_listener_name) != "PLAINTEXT":
            # The inter-broker client's login and TLS context, checked as Kafka checks them.
            from ..security.client_security import inter_broker_security

            inter_broker_security(self)

    def _resolve_broker_id(self) -> None:
        """KRaft names the broker id node.id: it stands for broker.id when that is not
        given, and the two must agree when both are."""
        node_id = self["node.id"]
        if "node.id" not in self.explicit or node_id < 0:
            return
        if "broker.id" in self.explicit and self["broker.id"] != node_id:
            raise ConfigError(
                f"broker.id ({self['broker.id']}) and node.id ({node_id}) must be the same"
                " when both are set"
            )
        self._values["broker.id"] = node_id

    def _inter_broker_listener_name(self) -> str:
        """Kafka's rule: inter.broker.listener.name, or the listener named after
        security.inter.broker.protocol; either must be advertised."""
        named = self["inter.broker.listener.name"]
        if named and "security.inter.broker.protocol" in self.explicit:
            raise ConfigError(
                "Only one of inter.broker.listener.name and security.inter.broker.protocol"
                " should be set."
            )
        name = (named or self["security.inter.broker.protocol"]).upper()
        advertised = [listener.name for listener in self.advertised_listeners]
        if name not in advertised:
            raise ConfigError(
                "inter.broker.listener.name must be a listener name defined in"
                " advertised.listeners. The valid options based on currently configured"
                f" listeners are {','.join(advertised)}"
            )
        return str(name)

    @classmethod
    def build(
        cls,
        properties: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Iterable[str] | Mapping[str, Any] = (),
    ) -> BrokerConfig:
        layers: list[tuple[str, Mapping[str, Any]]] = [
            ("the config file", properties or {}),
            ("the environment", env_overrides(environ if environ is not None else os.environ)),
            (
                "--override",
                overrides if isinstance(overrides, Mapping) else _parse_overrides(overrides),
            ),
        ]
        values = {name: key.default for name, key in BROKER_CONFIGS.items()}
        explicit: set[str] = set()
        # Keys of a properties file or --override and BROOK_* variables that name no
        # config do not stop the broker: Kafka starts with unknown keys from either (each
        # "was supplied but isn't a known config"), and a real Kafka server.properties
        # sets many keys Brook has no use for (num.network.threads, zookeeper.set.acl,
        # ...). The caller warns once about each list, naming close matches of typos.
        unknown_keys: list[tuple[str, str]] = []
        ignored_env: list[str] = []
        for source, layer in layers:
            for name, raw in layer.items():
                # The operator set a variable, not a key: name the variable.
                origin = (
                    f"the environment variable {_env_name(name)}"
                    if source == "the environment"
                    else source
                )
                key = BROKER_CONFIGS.get(name) or prefixed_key(name)
                if key is None:
                    if source == "the environment":
                        ignored_env.append(_env_name(name))
                    else:
                        unknown_keys.append((name, source))
                    continue
                try:
                    values[name] = key.parse(raw)
                except ConfigError as exc:
                    raise ConfigError(f"{exc} (from {origin})") from None
                explicit.add(name)
        config = cls(values, explicit)
        config.unknown_keys = unknown_keys
        config.ignored_env = sorted(ignored_env)
        return config

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def listener_value(self, listener_name: str, name: str, mechanism: str | None = None) -> Any:
        """A key's value for one listener, as Kafka resolves it: the listener's and
        mechanism's (`listener.name.<l>.<mech>.<key>`), the listener's
        (`listener.name.<l>.<key>`), then the plain key."""
        prefix = f"listener.name.{listener_name.lower()}."
        if mechanism is not None:
            value = self._values.get(f"{prefix}{mechanism.lower()}.{name}")
            if value is not None:
                return value
        value = self._values.get(prefix + name)
        return value if value is not None else self._values[name]

    def security_protocol(self, listener_name: str) -> str:
        return self.listener_security_protocols.get(listener_name, "PLAINTEXT")

    def items(self) -> Iterable[tuple[str, Any]]:
        return self._values.items()

    @property
    def broker_id(self) -> int:
        return int(self["broker.id"])

    @property
    def log_dirs(self) -> list[Path]:
        return [Path(item) for item in (self["log.dirs"] or [self["log.dir"]])]

    @property
    def segment_ms(self) -> int:
        roll_ms: int | None = self["log.roll.ms"]
        if roll_ms is not None:
            return roll_ms
        roll_hours: int = self["log.roll.hours"]
        return roll_hours * 3600 * 1000

    @property
    def flush_interval_ms(self) -> int:
        flush_ms: int | None = self["log.flush.interval.ms"]
        if flush_ms is not None:
            return flush_ms
        scheduler_ms: int = self["log.flush.scheduler.interval.ms"]
        return scheduler_ms

    @property
    def retention_ms(self) -> int:
        # The smallest unit that is set wins, as in Kafka.
        ms: int | None = self["log.retention.ms"]
        if ms is not None:
            return ms
        minutes: int | None = self["log.retention.minutes"]
        if minutes is not None:
            return minutes * 60 * 1000
        hours: int = self["log.retention.hours"]
        return hours * 3600 * 1000


def _parse_overrides(items: Iterable[str]) -> dict[str, str]:
    parsed = {}
    for item in items:
        name, separator, value = item.partition("=")
        if not separator or not name.strip():
            raise ConfigError(f"--override takes key=value, got {item!r}")
        parsed[name.strip()] = value
    return parsed
