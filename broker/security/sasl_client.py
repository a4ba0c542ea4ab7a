"""The client side of SASL over Kafka's framing (SaslHandshake v1, then SaslAuthenticate),
for the inter-broker client and the tools: PLAIN and SCRAM-SHA-256/512."""

from __future__ import annotations

from typing import Any, Protocol

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from brook.protocol.errors import ErrorCode

from .client_security import SaslLogin
from .scram import ScramClient


class SaslAuthenticationError(ConnectionError):
    """The broker refused the login (its error and message)."""


class _Requester(Protocol):
    async def request(self, request: Any) -> Any: ...


async def _exchange(client: _Requester, token: bytes) -> bytes:
    response = await client.request(SaslAuthenticateRequest(auth_bytes=token))
    if response.error_code != ErrorCode.none:
        raise SaslAuthenticationError(
            f"{response.error_code.name}: {response.error_message or ''}".rstrip(": ")
        )
    return bytes(response.auth_bytes)


async def authenticate(client: _Requester, login: SaslLogin) -> None:
    handshake = await client.request(SaslHandshakeRequest(mechanism=login.mechanism))
    if handshake.error_code != ErrorCode.none:
        raise SaslAuthenticationError(
            f"{handshake.error_code.name}: SASL mechanism {login.mechanism} is not enabled"
            f" (the broker enables {', '.join(handshake.mechanisms)})"
        )
    if login.mechanism == "PLAIN":
        await _exchange(client, f"\0{login.username}\0{login.password}".encode())
        return
    scram = ScramClient(login.mechanism, login.username, login.password)
    server_first = await _exchange(client, scram.first_message())
    server_final = await _exchange(client, scram.final_message(server_first))
    scram.verify_server_final(server_final)
