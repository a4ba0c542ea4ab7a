"""KIP-368 sessions: connections.max.reauth.ms bounds a SASL session, SaslAuthenticate
v1+ tells the client its lifetime, the client re-authenticates on the same connection
(as the same principal), and a connection that outlives its session is closed."""

from __future__ import annotations

import time

import pytest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v0.request import SaslAuthenticateRequest as SaslAuthenticateV0
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from brook.broker.client import BlockingClient, ConnectionClosedError
from brook.protocol.errors import ErrorCode

from .conftest import PLAIN_USERS, SecureBroker

SESSION_MS = 1500


@pytest.fixture
def broker(tmp_path, pki):
    secure = SecureBroker(tmp_path / "data", pki, {"connections.max.reauth.ms": SESSION_MS}).start()
    try:
        yield secure
    finally:
        secure.stop()


def _metadata() -> MetadataRequest:
    return MetadataRequest(
        topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )


def _login(client: BlockingClient, user: str, password: str, request=SaslAuthenticateRequest):
    assert client.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
    return client.request(request(auth_bytes=f"\0{user}\0{password}".encode()))


def _wait_until_expired(broker: SecureBroker) -> None:
    """Until the broker holds the SASL_PLAINTEXT session expired (its own clock)."""

    def expired() -> bool:
        return all(
            c.sasl.session_expired()
            for c in broker.broker.connections
            if c.listener_name == "SASL_PLAINTEXT" and c.sasl is not None
        )

    deadline = time.monotonic() + 30
    while not broker.call(expired):
        assert time.monotonic() < deadline, "the session never expired"
        time.sleep(0.05)


def test_session_lifetime_reauthentication_and_expiry(broker):
    with BlockingClient("127.0.0.1", broker.ports["SASL_PLAINTEXT"], "reauth") as client:
        answer = _login(client, "alice", PLAIN_USERS["alice"])
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() * 1000 == SESSION_MS
        assert client.request(_metadata()).brokers
        # Re-authentication on the same connection, before or after expiry.
        _wait_until_expired(broker)
        again = _login(client, "alice", PLAIN_USERS["alice"])
        assert again.error_code == ErrorCode.none
        assert again.session_lifetime.total_seconds() * 1000 == SESSION_MS
        assert client.request(_metadata()).brokers
        # Not re-authenticated in time: the next request closes the connection.
        _wait_until_expired(broker)
        client.send(_metadata())
        with pytest.raises(ConnectionClosedError):
            client.receive_frame()


def test_reauthentication_cannot_change_the_principal(broker):
    with BlockingClient("127.0.0.1", broker.ports["SASL_PLAINTEXT"], "reauth") as client:
        assert _login(client, "alice", PLAIN_USERS["alice"]).error_code == ErrorCode.none
        other = _login(client, "admin", PLAIN_USERS["admin"])
        assert other.error_code == ErrorCode.sasl_authentication_failed
        assert other.error_message == (
            "Cannot change principals during re-authentication from User.alice: User.admin"
        )
        with pytest.raises((ConnectionClosedError, ConnectionError)):
            client.request(_metadata())


def test_a_v0_client_cannot_reauthenticate_and_is_closed_at_expiry(broker):
    with BlockingClient("127.0.0.1", broker.ports["SASL_PLAINTEXT"], "reauth") as client:
        answer = _login(client, "alice", PLAIN_USERS["alice"], SaslAuthenticateV0)
        assert answer.error_code == ErrorCode.none
        # SaslHandshake on an authenticated connection of a client without KIP-368.
        handshake = client.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert handshake.error_code == ErrorCode.illegal_sasl_state
        _wait_until_expired(broker)
        client.send(_metadata())
        with pytest.raises(ConnectionClosedError):
            client.receive_frame()
