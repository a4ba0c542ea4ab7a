"""Bad input to the authentication paths, over real sockets, with Brook's own wire
client: wrong passwords and unknown users (one answer for both), an unknown mechanism,
requests before authentication, Kafka's v0 raw-token framing, expired and untrusted
client certificates, and the principal each kind of connection is given."""

from __future__ import annotations

import logging
import socket
import ssl
import time

import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from brook.broker.client import BlockingClient, ConnectionClosedError
from brook.broker.security.scram import ScramClient
from brook.protocol.errors import ErrorCode

from .conftest import PLAIN_USERS, SCRAM_USERS

ENABLED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_FAILED = "Authentication failed: Invalid username or password"


def _metadata(auto_create: bool = False) -> MetadataRequest:
    return MetadataRequest(
        topics=None if auto_create else (),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )


def _client(secure_broker, listener: str) -> BlockingClient:
    host, port = secure_broker.bootstrap(listener).split(":")
    return BlockingClient(host, int(port), "auth-test")


def _assert_closed(client: BlockingClient) -> None:
    """The broker closed the connection: the next request gets no answer."""
    with pytest.raises((ConnectionClosedError, ConnectionError)):
        client.request(_metadata())


def _plain(client: BlockingClient, user: str, password: str):
    handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
    assert handshake.error_code == ErrorCode.none
    assert handshake.mechanisms == ENABLED
    return client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))


def _scram_first(client: BlockingClient, mechanism: str, user: str, password: str):
    assert client.request(SaslHandshakeRequest(mechanism=mechanism)).error_code == ErrorCode.none
    scram = ScramClient(mechanism, user, password)
    first = client.request(SaslAuthenticateRequest(auth_bytes=scram.first_message()))
    return scram, first


def test_plain_login_then_requests_are_served(secure_broker):
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        answer = _plain(client, "alice", PLAIN_USERS["alice"])
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() == 0  # connections.max.reauth.ms=0
        metadata = client.request(_metadata())
        assert [b.port for b in metadata.brokers] == [secure_broker.ports["SASL_PLAINTEXT"]]


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "wrong"), ("nobody", "alice-secret")], ids=["wrong", "unknown"]
)
def test_plain_failure_is_the_same_for_a_wrong_password_and_an_unknown_user(
    secure_broker, caplog, user, password
):
    caplog.set_level(logging.INFO, logger="brook.security")
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        answer = _plain(client, user, password)
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == PLAIN_FAILED
        _assert_closed(client)
    lines = [r.getMessage() for r in caplog.records if "Failed authentication" in r.getMessage()]
    assert len(lines) == 1
    assert "SASL mechanism PLAIN" in lines[0] and "127.0.0.1:" in lines[0]
    # The broker goes on serving the others.
    with _client(secure_broker, "SASL_PLAINTEXT") as other:
        assert _plain(other, "alice", PLAIN_USERS["alice"]).error_code == ErrorCode.none


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_failure_is_the_same_for_a_wrong_password_and_an_unknown_user(
    secure_broker, mechanism
):
    user, _ = SCRAM_USERS[mechanism]
    answers = []
    for name, password in ((user, "wrong"), ("nobody", "wrong")):
        with _client(secure_broker, "SASL_PLAINTEXT") as client:
            scram, first = _scram_first(client, mechanism, name, password)
            # An unknown user gets a server-first message like a known one.
            assert first.error_code == ErrorCode.none
            fields = dict(item.split("=", 1) for item in first.auth_bytes.decode().split(","))
            assert set(fields) == {"r", "s", "i"} and int(fields["i"]) >= 4096
            final = client.request(
                SaslAuthenticateRequest(auth_bytes=scram.final_message(first.auth_bytes))
            )
            answers.append((final.error_code, final.error_message))
            _assert_closed(client)
    expected = (
        ErrorCode.sasl_authentication_failed,
        "Authentication failed during authentication due to invalid credentials with SASL"
        f" mechanism {mechanism}",
    )
    assert answers == [expected, expected]


def test_scram_login_verifies_the_server(secure_broker):
    user, password = SCRAM_USERS["SCRAM-SHA-512"]
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        scram, first = _scram_first(client, "SCRAM-SHA-512", user, password)
        final = client.request(
            SaslAuthenticateRequest(auth_bytes=scram.final_message(first.auth_bytes))
        )
        assert final.error_code == ErrorCode.none
        scram.verify_server_final(final.auth_bytes)  # raises if the signature is wrong


@pytest.mark.parametrize("mechanism", ["GSSAPI", "OAUTHBEARER", "SCRAM-SHA-1"])
def test_an_unknown_mechanism_is_refused_with_the_enabled_list(secure_broker, mechanism):
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        answer = client.request(SaslHandshakeRequest(mechanism=mechanism))
        assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
        assert answer.mechanisms == ENABLED
        _assert_closed(client)


def test_a_request_before_authentication_closes_the_connection(secure_broker, caplog):
    caplog.set_level(logging.WARNING, logger="brook.connection")
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        # Auto-creation asked: had the request reached its handler, the topic would exist.
        client.send(_metadata(auto_create=True))
        with pytest.raises(ConnectionClosedError):
            client.receive_frame()
    assert any(
        "unexpected request METADATA during SASL handshake" in r.getMessage()
        for r in caplog.records
    )
    # Between the handshake and SaslAuthenticate too.
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        assert client.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        client.send(_metadata(auto_create=True))
        with pytest.raises(ConnectionClosedError):
            client.receive_frame()


def test_a_large_frame_before_authentication_closes_the_connection(secure_broker):
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        # Over sasl.server.max.receive.size (512 KiB), under socket.request.max.bytes.
        client.sock.sendall((1 << 20).to_bytes(4, "big") + b"\0" * 1024)
        with pytest.raises(ConnectionClosedError):
            client.receive_frame()


def test_v0_handshake_takes_raw_tokens(secure_broker):
    """Kafka's framing for clients before KIP-152: after SaslHandshake v0 the SASL tokens
    go size-prefixed with no request header, and so do the answers."""
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        answer = client.request(SaslHandshakeV0(mechanism="SCRAM-SHA-256"))
        assert answer.error_code == ErrorCode.none
        user, password = SCRAM_USERS["SCRAM-SHA-256"]
        scram = ScramClient("SCRAM-SHA-256", user, password)
        first = scram.first_message()
        client.sock.sendall(len(first).to_bytes(4, "big") + first)
        server_first = client.receive_frame()
        final = scram.final_message(server_first)
        client.sock.sendall(len(final).to_bytes(4, "big") + final)
        scram.verify_server_final(client.receive_frame())
        metadata = client.request(_metadata())
        assert metadata.brokers


def test_v0_raw_token_failure_closes_without_an_answer(secure_broker):
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        assert client.request(SaslHandshakeV0(mechanism="PLAIN")).error_code == 0
        token = b"\0alice\0wrong"
        client.sock.sendall(len(token).to_bytes(4, "big") + token)
        with pytest.raises(ConnectionClosedError):
            client.receive_frame()


def test_sasl_requests_on_a_listener_without_sasl_get_illegal_sasl_state(secure_broker):
    with _client(secure_broker, "PLAINTEXT") as client:
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.illegal_sasl_state
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert answer.error_code == ErrorCode.illegal_sasl_state
        assert answer.error_message == (
            "SaslAuthenticate request received after successful authentication"
        )
        # The connection stays usable.
        assert client.request(_metadata()).brokers


# --- TLS ---------------------------------------------------------------------------------


def _wait_for_log(caplog, *parts: str) -> list[str]:
    """The broker's log lines holding every part, once one is logged (the broker logs a
    failed handshake as its own task ends, which may be after the client saw the close)."""
    deadline = time.monotonic() + 15
    while True:
        lines = [r.getMessage() for r in caplog.records]
        found = [line for line in lines if all(part in line for part in parts)]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def _tls_request(secure_broker, pki, listener: str, identity) -> None:
    """A TLS connection with `identity` as client certificate, then one request."""
    context = ssl.create_default_context(cafile=str(pki.ca.cert_path))
    if identity is not None:
        context.load_cert_chain(str(identity.cert), str(identity.key))
    port = secure_broker.ports[listener]
    raw = socket.create_connection(("127.0.0.1", port), timeout=15)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        client = BlockingClient.__new__(BlockingClient)
        client.sock, client.client_id, client.correlation_id = tls, "tls-test", 0
        client.request(_metadata())


@pytest.mark.parametrize(
    ("who", "cause"),
    [
        ("expired_client", "certificate has expired"),
        ("untrusted_client", "certificate verify failed"),
        (None, "peer did not return a certificate"),
    ],
    ids=["expired", "untrusted", "none"],
)
def test_mtls_refuses_bad_client_certificates(secure_broker, pki, caplog, who, cause):
    caplog.set_level(logging.INFO, logger="brook.security")
    identity = getattr(pki, who) if who else None
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _tls_request(secure_broker, pki, "MTLS", identity)
    assert _wait_for_log(caplog, "SSL handshake failed", "listener MTLS", cause)
    # A good certificate is still served.
    _tls_request(secure_broker, pki, "MTLS", pki.client)


def test_plaintext_to_a_tls_listener_is_refused_and_logged(secure_broker, caplog):
    caplog.set_level(logging.INFO, logger="brook.security")
    with _client(secure_broker, "SSL") as client:
        client.send(_metadata())
        with pytest.raises((ConnectionClosedError, ConnectionError)):
            client.receive_frame()
    assert _wait_for_log(caplog, "SSL handshake failed", "listener SSL", "wrong version number")


def _principals(secure_broker) -> dict[str, str]:
    """The principal of each open connection, by listener (read on the broker's loop)."""

    def read() -> dict[str, str]:
        return {c.listener_name: str(c.principal) for c in secure_broker.broker.connections}

    return secure_broker.call(read)


def test_each_connection_has_its_principal(secure_broker, pki):
    context = ssl.create_default_context(cafile=str(pki.ca.cert_path))
    context.load_cert_chain(str(pki.client.cert), str(pki.client.key))
    anonymous_tls = ssl.create_default_context(cafile=str(pki.ca.cert_path))
    opened = []
    try:
        for listener, ctx in (("MTLS", context), ("SSL", anonymous_tls)):
            raw = socket.create_connection(("127.0.0.1", secure_broker.ports[listener]))
            tls = ctx.wrap_socket(raw, server_hostname="localhost")
            client = BlockingClient.__new__(BlockingClient)
            client.sock, client.client_id, client.correlation_id = tls, "p", 0
            client.request(_metadata())
            opened.append(client)
        sasl = _client(secure_broker, "SASL_PLAINTEXT")
        opened.append(sasl)
        assert _plain(sasl, "alice", PLAIN_USERS["alice"]).error_code == 0
        sasl.request(_metadata())
        plain = _client(secure_broker, "PLAINTEXT")
        opened.append(plain)
        plain.request(_metadata())
        principals = _principals(secure_broker)
        # CN=alice,OU=Engineering,O=Brook Tests,C=US mapped by the MTLS listener's rule.
        assert principals["MTLS"] == "User:alice@engineering"
        assert principals["SSL"] == "User:ANONYMOUS"
        assert principals["SASL_PLAINTEXT"] == "User:alice"
        assert principals["PLAINTEXT"] == "User:ANONYMOUS"
    finally:
        for client in opened:
            client.close()


def test_the_failure_answer_itself_waits_for_the_failed_authentication_delay(secure_broker):
    """KIP-306: the SaslAuthenticate error comes after
    connection.failed.authentication.delay.ms (100 by default), then the connection
    closes, so a client cannot try passwords faster than one per delay."""
    delay_s = secure_broker.broker.config["connection.failed.authentication.delay.ms"] / 1000
    assert delay_s > 0
    with _client(secure_broker, "SASL_PLAINTEXT") as client:
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.none
        sent = time.monotonic()
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"))
        waited = time.monotonic() - sent
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        # A lower bound only: the answer may come later on a busy machine, never sooner.
        assert waited >= delay_s * 0.9, f"answered after {waited * 1000:.1f} ms"
        _assert_closed(client)
