"""TLS contexts from Kafka's ssl.* keys, for a listener (server side) and for the
inter-broker client, with Python's ssl module (OpenSSL): no cryptography by hand.

Key material as Kafka reads it: `ssl.keystore.type=PEM` with `ssl.keystore.location` (one
file, private key and certificate chain, the key encrypted under `ssl.key.password` or
not) or inline `ssl.keystore.key` + `ssl.keystore.certificate.chain`; trust anchors from
`ssl.truststore.location` or inline `ssl.truststore.certificates`. PKCS12 stores are read
with the `cryptography` package when it is installed; JKS, a Java format, is refused with
a message that names PEM.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.broker_config import ConfigError

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig

_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {
    "required": ssl.CERT_REQUIRED,
    "requested": ssl.CERT_OPTIONAL,
    "none": ssl.CERT_NONE,
}


class _Keys:
    """One listener's (or the inter-broker client's) ssl.* values."""

    def __init__(self, config: BrokerConfig, listener_name: str) -> None:
        self.listener_name = listener_name
        self._config = config

    def __getitem__(self, name: str) -> object:
        return self._config.listener_value(self.listener_name, name)

    def name(self, key: str) -> str:
        """The key as the operator set it (prefixed or not), for messages."""
        prefixed = f"listener.name.{self.listener_name.lower()}.{key}"
        return prefixed if prefixed in self._config.explicit else key


# A tool's client properties (--command-config): Kafka's client defaults where unset.
_CLIENT_DEFAULTS: dict[str, object] = {
    "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"],
    "ssl.protocol": "TLSv1.3",
    "ssl.cipher.suites": [],
    "ssl.endpoint.identification.algorithm": "https",
}
_LIST_KEYS = ("ssl.enabled.protocols", "ssl.cipher.suites")


class _PropertyKeys(_Keys):
    """The ssl.* values of a client properties file, as Kafka's clients read them."""

    def __init__(self, properties: Mapping[str, str], source: str) -> None:
        self._properties = properties
        self._source = source

    def __getitem__(self, name: str) -> object:
        if name in self._properties:
            value = self._properties[name].strip()
            if name in _LIST_KEYS:
                return [item.strip() for item in value.split(",") if item.strip()]
            return value
        if name.endswith(".type") and name.startswith(("ssl.keystore", "ssl.truststore")):
            return _store_type(self._properties.get(name.replace(".type", ".location")))
        return _CLIENT_DEFAULTS.get(name)

    def name(self, key: str) -> str:
        return f"{key} in {self._source}"


def _store_type(location: str | None) -> str:
    """An unset store type: PEM for a PEM file, else PKCS12 (librdkafka's store format;
    Java's default, JKS, is a format Brook cannot read anyway)."""
    if not location:
        return "PEM"
    try:
        with open(location, "rb") as handle:
            head = handle.read(64)
    except OSError:
        return "PEM"  # loading it reports the error, with the key's name
    return "PEM" if b"-----BEGIN" in head else "PKCS12"


def server_context(config: BrokerConfig, listener_name: str) -> ssl.SSLContext:
    keys = _Keys(config, listener_name)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, keys)
    _ciphers(context, keys)
    if not _load_key_store(context, keys):
        raise ConfigError(
            f"Listener {listener_name} uses TLS but has no key store: set"
            f" listener.name.{listener_name.lower()}.ssl.keystore.location (ssl.keystore.type=PEM:"
            " a file holding the private key and certificate chain), or ssl.keystore.key and"
            " ssl.keystore.certificate.chain"
        )
    client_auth = str(keys["ssl.client.auth"])
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none" and not _load_trust_store(context, keys):
        # Kafka falls back to the JVM's default trust store; this is OpenSSL's.
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(config: BrokerConfig, listener_name: str) -> ssl.SSLContext:
    """The inter-broker client's context: the listener's trust store, and its key store
    as the client certificate (for listeners that require one)."""
    keys = _Keys(config, listener_name)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, keys)
    _ciphers(context, keys)
    if not _load_trust_store(context, keys):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_key_store(context, keys)
    # ssl.endpoint.identification.algorithm: https checks the host name, empty does not.
    context.check_hostname = bool(config["ssl.endpoint.identification.algorithm"])
    return context


def client_context_from_properties(properties: Mapping[str, str], source: str) -> ssl.SSLContext:
    """A tool's client context from its client properties: Kafka's names
    (ssl.truststore.*, ssl.keystore.*, ssl.key.password) and librdkafka's (ssl.ca.location,
    ssl.certificate.location with ssl.key.location, enable.ssl.certificate.verification),
    so that one --command-config serves the tools on librdkafka and those on the wire."""
    keys = _PropertyKeys(properties, source)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, keys)
    _ciphers(context, keys)
    ca = properties.get("ssl.ca.location")
    try:
        if ca:
            context.load_verify_locations(cafile=ca)
        elif not _load_trust_store(context, keys):
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"Cannot load ssl.ca.location={ca} ({source}): {exc}") from None
    certificate = properties.get("ssl.certificate.location")
    if certificate:
        try:
            context.load_cert_chain(
                certificate,
                properties.get("ssl.key.location") or None,
                password=properties.get("ssl.key.password") or None,
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"Cannot load ssl.certificate.location / ssl.key.location ({source}): {exc}"
            ) from None
    else:
        _load_key_store(context, keys)
    algorithm = str(keys["ssl.endpoint.identification.algorithm"]).strip().lower()
    context.check_hostname = algorithm not in ("", "none")
    if properties.get("enable.ssl.certificate.verification", "true").strip().lower() == "false":
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _versions(context: ssl.SSLContext, keys: _Keys) -> None:
    names = list(keys["ssl.enabled.protocols"])  # type: ignore[call-overload]
    unknown = [name for name in names if name not in _VERSIONS]
    if unknown:
        raise ConfigError(
            f"{keys.name('ssl.enabled.protocols')}: unknown TLS version(s) {', '.join(unknown)}"
            f" (known: {', '.join(_VERSIONS)})"
        )
    enabled = [_VERSIONS[name] for name in names]
    if not enabled:
        raise ConfigError(f"{keys.name('ssl.enabled.protocols')} enables no TLS version")
    highest = max(enabled)
    protocol = str(keys["ssl.protocol"])
    # Java's SSLContext of TLSv1.2 speaks no TLS 1.3.
    if protocol in _VERSIONS:
        highest = min(highest, _VERSIONS[protocol])
    context.minimum_version = min(enabled)
    context.maximum_version = highest


def _ciphers(context: ssl.SSLContext, keys: _Keys) -> None:
    suites = [openssl_cipher_name(name) for name in keys["ssl.cipher.suites"]]  # type: ignore[attr-defined]
    # TLS 1.3's suites cannot be narrowed through Python's ssl; they stay OpenSSL's.
    tls12 = [name for name in suites if not name.startswith("TLS_")]
    if not tls12:
        return
    try:
        context.set_ciphers(":".join(tls12))
    except ssl.SSLError:
        raise ConfigError(
            f"{keys.name('ssl.cipher.suites')}: none of {', '.join(tls12)} is a cipher suite"
            " OpenSSL knows"
        ) from None


def openssl_cipher_name(name: str) -> str:
    """A TLS 1.2 suite's OpenSSL name from its IANA (Java) name, where the two differ by
    the usual pattern (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256);
    any other name as given."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, cipher = name[4:].split("_WITH_", 1)
    cipher = (
        cipher.replace("AES_128_", "AES128-")
        .replace("AES_256_", "AES256-")
        .replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305")
        .replace("_", "-")
    )
    exchange = "" if exchange == "RSA" else exchange.replace("_", "-") + "-"
    return exchange + cipher


# --- stores ------------------------------------------------------------------------------


def _load_key_store(context: ssl.SSLContext, keys: _Keys) -> bool:
    store_type = str(keys["ssl.keystore.type"])
    location = keys["ssl.keystore.location"]
    inline_key = keys["ssl.keystore.key"]
    password = keys["ssl.key.password"]
    if inline_key:
        chain = keys["ssl.keystore.certificate.chain"]
        if store_type != "PEM" or not chain:
            raise ConfigError(
                f"{keys.name('ssl.keystore.key')} needs ssl.keystore.type=PEM and"
                " ssl.keystore.certificate.chain"
            )
        with _pem_file(str(inline_key) + "\n" + str(chain)) as path:
            _load_chain(context, path, password, keys.name("ssl.keystore.key"))
        return True
    if not location:
        return False
    if store_type == "PEM":
        _load_chain(context, str(location), password, keys.name("ssl.keystore.location"))
    elif store_type == "PKCS12":
        pem = _pkcs12_to_pem(
            Path(str(location)), keys["ssl.keystore.password"], keys.name("ssl.keystore.location")
        )
        with _pem_file(pem) as path:
            _load_chain(context, path, None, keys.name("ssl.keystore.location"))
    else:
        raise ConfigError(
            f"{keys.name('ssl.keystore.type')}={store_type} is a Java key store Brook cannot"
            " read: convert it to PEM (ssl.keystore.type=PEM, ssl.keystore.location holding the"
            " key and certificate chain) or PKCS12"
        )
    return True


def _load_trust_store(context: ssl.SSLContext, keys: _Keys) -> bool:
    store_type = str(keys["ssl.truststore.type"])
    inline = keys["ssl.truststore.certificates"]
    location = keys["ssl.truststore.location"]
    try:
        if inline:
            context.load_verify_locations(cadata=str(inline))
            return True
        if not location:
            return False
        if store_type == "PEM":
            context.load_verify_locations(cafile=str(location))
        elif store_type == "PKCS12":
            pem = _pkcs12_to_pem(
                Path(str(location)),
                keys["ssl.truststore.password"],
                keys.name("ssl.truststore.location"),
                certificates_only=True,
            )
            context.load_verify_locations(cadata=pem)
        else:
            raise ConfigError(
                f"{keys.name('ssl.truststore.type')}={store_type} is a Java trust store Brook"
                " cannot read: use PEM (ssl.truststore.type=PEM) or PKCS12"
            )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"Cannot load the trust store ({keys.name('ssl.truststore.location')}): {exc}"
        ) from None
    return True


def _load_chain(context: ssl.SSLContext, path: str, password: object, key: str) -> None:
    try:
        context.load_cert_chain(path, password=str(password) if password else None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"Cannot load the key store ({key}): {exc}") from None


@contextlib.contextmanager
def _pem_file(text: str) -> Iterator[str]:
    """The PEM text in a private file for OpenSSL to read, removed at once."""
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        yield path
    finally:
        os.unlink(path)


def _pkcs12_to_pem(path: Path, password: object, key: str, certificates_only: bool = False) -> str:
    try:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
            pkcs12,
        )
    except ImportError:
        raise ConfigError(
            f"{key} is a PKCS12 store, which Brook reads with the `cryptography` package, not"
            " installed: pip install cryptography, or convert the store to PEM"
            " (ssl.keystore.type=PEM)"
        ) from None
    try:
        private_key, certificate, extra = pkcs12.load_key_and_certificates(
            path.read_bytes(), str(password).encode() if password else None
        )
    except (OSError, ValueError) as exc:
        raise ConfigError(f"Cannot read the PKCS12 store {path} ({key}): {exc}") from None
    certificates = ([certificate] if certificate is not None else []) + list(extra or [])
    pem = "".join(cert.public_bytes(Encoding.PEM).decode() for cert in certificates)
    if certificates_only:
        return pem
    if private_key is None:
        raise ConfigError(f"The PKCS12 store {path} ({key}) holds no private key")
    return (
        private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()).decode() + pem
    )
