"""Certificates made by the tests, with the `cryptography` package: a CA, a server
certificate for 127.0.0.1/localhost, client certificates (valid, expired, from an
untrusted CA), written as PEM files the broker and the clients read."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

KEY_PASSWORD = "key-secret"


@dataclass(frozen=True)
class Identity:
    """A certificate and its key as PEM files, and the key store (key + chain) file."""

    cert: Path
    key: Path  # unencrypted PKCS#8
    keystore: Path  # encrypted key (KEY_PASSWORD) followed by the certificate chain
    cert_pem: str
    key_pem: str  # encrypted, as Kafka's inline ssl.keystore.key takes it


def _name(common_name: str, unit: str | None = None) -> x509.Name:
    attributes = [
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Brook Tests"),
    ]
    if unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


class CertificateAuthority:
    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        self.name = _name(name)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM).decode()
        self.cert_path = directory / f"{name}-ca.pem"
        self.cert_path.write_text(self.cert_pem)

    def issue(
        self,
        file_name: str,
        common_name: str,
        unit: str | None = None,
        server: bool = False,
        expired: bool = False,
    ) -> Identity:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        if expired:
            not_before, not_after = (
                now - datetime.timedelta(days=10),
                now - datetime.timedelta(days=1),
            )
        else:
            not_before, not_after = (
                now - datetime.timedelta(days=1),
                now + datetime.timedelta(days=30),
            )
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, unit))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage(
                    [x509.ExtendedKeyUsageOID.SERVER_AUTH, x509.ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self.key, hashes.SHA256())
        cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        plain_key = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        encrypted_key = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        ).decode()
        cert_path = self.directory / f"{file_name}.pem"
        key_path = self.directory / f"{file_name}.key"
        keystore = self.directory / f"{file_name}-keystore.pem"
        cert_path.write_text(cert_pem + self.cert_pem)
        key_path.write_text(plain_key)
        keystore.write_text(encrypted_key + cert_pem + self.cert_pem)
        return Identity(cert_path, key_path, keystore, cert_pem, encrypted_key)


@dataclass(frozen=True)
class TestPki:
    __test__ = False  # a fixture's type, not a test class (its name starts with Test)

    ca: CertificateAuthority
    server: Identity
    client: Identity
    expired_client: Identity
    untrusted_client: Identity


def make_pki(directory: Path) -> TestPki:
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority(directory, "brook-test")
    rogue = CertificateAuthority(directory, "rogue")
    return TestPki(
        ca=ca,
        server=ca.issue("server", "localhost", server=True),
        client=ca.issue("client", "alice", unit="Engineering"),
        expired_client=ca.issue("expired", "mallory", expired=True),
        untrusted_client=rogue.issue("untrusted", "eve"),
    )
