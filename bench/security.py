"""TLS and SASL costs, measured on one `brook serve` in one run: produce and consume
throughput over SSL and SASL_SSL against PLAINTEXT, and authentications per second.

One broker listens four times (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL; a test CA and
server certificate made for the run with the `cryptography` package). For each listener
confluent-kafka produces `--messages` records of `--size` bytes into a topic of its own
and reads them back from the start, `--repeat` times; the median rates and their ratios
to PLAINTEXT are printed. Then `--logins` connections each complete a login, one after
another: ApiVersions only (the baseline), SASL PLAIN, SCRAM-SHA-256 (the client's PBKDF2
done once per salt, so the broker's share is what is timed), and SCRAM-SHA-256 over TLS
(the TLS handshake included).

    python -m bench.security --messages 200000 --logins 500
"""

from __future__ import annotations

import socket
import ssl
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from bench.cli import bench_parser
from brook.broker.client import BlockingClient
from brook.broker.local_ports import free_port
from brook.broker.security.scram import ScramClient

from .brokers import brook_spec
from .kafka_admin import (
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from .procs import BrokerProcess
from .workload import read_partition_to_end

LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
PASSWORD = "bench-secret"
KEY_PASSWORD = "key-secret"


def make_certificates(directory: Path) -> tuple[Path, Path]:
    """A CA and a server key store (key + chain) for 127.0.0.1, as PEM files."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bench-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    ca_path, keystore = directory / "ca.pem", directory / "server-keystore.pem"
    ca_path.write_bytes(ca.public_bytes(pem))
    keystore.write_bytes(
        key.private_bytes(
            pem,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        )
        + cert.public_bytes(pem)
        + ca.public_bytes(pem)
    )
    return ca_path, keystore


def security_overrides(ports: dict[str, int], keystore: Path, ca: Path) -> list[str]:
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    jaas = (
        f'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="{PASSWORD}";'
    )
    settings = {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore),
        "ssl.key.password": KEY_PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.jaas.config": jaas,
    }
    return [arg for key, value in settings.items() for arg in ("--override", f"{key}={value}")]


def client_config(listener: str, port: int, ca: Path) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": f"127.0.0.1:{port}"}
    if listener != "PLAINTEXT":
        config["security.protocol"] = listener
    if "SSL" in listener:
        config["ssl.ca.location"] = str(ca)
    if "SASL" in listener:
        config.update(
            {"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "bench", "sasl.password": PASSWORD}
        )
    return config


def produce(config: dict[str, Any], topic: str, messages: int, size: int) -> float:
    producer = Producer({**config, "linger.ms": 5, "batch.size": 1_000_000, "acks": 1})
    payload = b"x" * size
    started = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                producer.produce(topic, payload, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def consume(config: dict[str, Any], topic: str, messages: int) -> float:
    elapsed, received = read_partition_to_end(config, topic)
    assert received == messages, (received, messages)
    return elapsed


# --- logins --------------------------------------------------------------------------------


def _connect(port: int, context: ssl.SSLContext | None) -> BlockingClient:
    client = BlockingClient.__new__(BlockingClient)
    sock = socket.create_connection(("127.0.0.1", port), timeout=15)
    if context is not None:
        sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
    client.sock, client.client_id, client.correlation_id = sock, "bench", 0
    return client


def login_api_versions(client: BlockingClient) -> None:
    client.request(ApiVersionsRequest(client_software_name="b", client_software_version="1"))


def login_plain(client: BlockingClient) -> None:
    login_api_versions(client)
    assert client.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    token = f"\0bench\0{PASSWORD}".encode()
    assert client.request(SaslAuthenticateRequest(auth_bytes=token)).error_code == 0


def login_scram(client: BlockingClient) -> None:
    login_api_versions(client)
    assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
    scram = ScramClient("SCRAM-SHA-256", "bench", PASSWORD)
    first = client.request(SaslAuthenticateRequest(auth_bytes=scram.first_message()))
    final = client.request(
        SaslAuthenticateRequest(auth_bytes=scram.final_message(first.auth_bytes))
    )
    assert final.error_code == 0
    scram.verify_server_final(final.auth_bytes)


def logins_per_second(
    port: int, context: ssl.SSLContext | None, login: Callable[[BlockingClient], None], count: int
) -> float:
    login(_connect(port, context))  # warm: the client's PBKDF2, the broker's first lookups
    started = time.perf_counter()
    for _ in range(count):
        client = _connect(port, context)
        try:
            login(client)
        finally:
            client.close()
    return count / (time.perf_counter() - started)


def main() -> None:
    parser = bench_parser("python -m bench.security", __doc__)
    parser.add_argument(
        "--messages", type=int, default=200_000, help="records produced and read per listener"
    )
    parser.add_argument("--size", type=int, default=100, help="bytes of each record's value")
    parser.add_argument(
        "--repeat", type=int, default=3, help="produce and read rounds per listener (the median)"
    )
    parser.add_argument(
        "--logins", type=int, default=300, help="connections that log in, per kind of login"
    )
    args = parser.parse_args()
    spec = brook_spec()
    rates: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as data:
        ca, keystore = make_certificates(Path(data))
        ports = {name: free_port() for name in LISTENERS}
        argv = spec.build_argv(ports["PLAINTEXT"], Path(data) / "logs")
        argv += security_overrides(ports, keystore, ca)
        log_path = Path(data) / "broker.log"
        with BrokerProcess(argv, ports["PLAINTEXT"], log_path, spec.env) as broker:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            upsertion = UserScramCredentialUpsertion(
                "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode()
            )
            admin.alter_user_scram_credentials([upsertion])["bench"].result(30)
            for round_number in range(args.repeat):
                for listener in LISTENERS:
                    topic = f"bench-{listener.lower()}-{round_number}"
                    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
                    config = client_config(listener, ports[listener], ca)
                    produced = produce(config, topic, args.messages, args.size)
                    consumed = consume(config, topic, args.messages)
                    own = rates.setdefault(listener, {"produce": [], "consume": []})
                    own["produce"].append(args.messages / produced)
                    own["consume"].append(args.messages / consumed)
            context = ssl.create_default_context(cafile=str(ca))
            logins = {
                "ApiVersions only (PLAINTEXT)": (ports["PLAINTEXT"], None, login_api_versions),
                "SASL PLAIN": (ports["SASL_PLAINTEXT"], None, login_plain),
                "SASL SCRAM-SHA-256": (ports["SASL_PLAINTEXT"], None, login_scram),
                "TLS + SCRAM-SHA-256": (ports["SASL_SSL"], context, login_scram),
                "TLS + ApiVersions": (ports["SSL"], context, login_api_versions),
            }
            login_rates = {
                name: logins_per_second(port, ctx, login, args.logins)
                for name, (port, ctx, login) in logins.items()
            }
    print(
        f"{args.messages} records of {args.size} B per run, median of {args.repeat};"
        " SASL listeners with SCRAM-SHA-256"
    )
    base = {kind: statistics.median(rates["PLAINTEXT"][kind]) for kind in ("produce", "consume")}
    for listener in LISTENERS:
        cells = []
        for kind in ("produce", "consume"):
            median = statistics.median(rates[listener][kind])
            cells.append(
                f"{kind} {median:9.0f} msg/s {median * args.size / 1e6:6.1f} MB/s"
                f" ({median / base[kind]:.2f} x PLAINTEXT)"
            )
        print(f"{listener:15s} " + "   ".join(cells))
    print(f"logins, {args.logins} connections one after another:")
    baseline = login_rates["ApiVersions only (PLAINTEXT)"]
    for name, rate in login_rates.items():
        print(f"  {name:29s} {rate:8.0f} /s  ({rate / baseline:.2f} x ApiVersions only)")


if __name__ == "__main__":
    main()
