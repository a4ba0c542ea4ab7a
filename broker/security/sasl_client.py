"""The client side of SASL over Kafka's framing (SaslHandshake v1, then SaslAuthenticate),
for the inter-broker client and the tools: PLAIN and SCRAM-SHA-256/512.

The exchange is written once, as a generator of requests that is sent each response;
`authenticate` drives it over the asyncio client, `authenticate_blocking` over the
blocking one."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from brook.protocol.errors import ErrorCode

from .client_security import SaslLogin
from .scram import ScramClient

# Yields a request, is sent its response.
Exchange = Generator[Any, Any, None]


class SaslAuthenticationError(ConnectionError):
    """The broker refused the login (its error and message)."""


class _Requester(Protocol):
    async def request(self, request: Any) -> Any: ...


class _BlockingRequester(Protocol):
    def request(self, request: Any) -> Any: ...


def _token(response: Any) -> bytes:
    if response.error_code != ErrorCode.none:
        raise SaslAuthenticationError(
            f"{response.error_code.name.upper()}: {response.error_message or ''}".rstrip(": ")
        )
    return bytes(response.auth_bytes)


def login_exchange(login: SaslLogin) -> Exchange:
    handshake = yield SaslHandshakeRequest(mechanism=login.mechanism)
    if handshake.error_code != ErrorCode.none:
        raise SaslAuthenticationError(
            f"{handshake.error_code.name.upper()}: SASL mechanism {login.mechanism} is not enabled"
            f" (the broker enables {', '.join(handshake.mechanisms)})"
        )
    if login.mechanism == "PLAIN":
        plain = f"\0{login.username}\0{login.password}".encode()
        _token((yield SaslAuthenticateRequest(auth_bytes=plain)))
        return
    scram = ScramClient(login.mechanism, login.username, login.password)
    server_first = _token((yield SaslAuthenticateRequest(auth_bytes=scram.first_message())))
    final = scram.final_message(server_first)
    server_final = _token((yield SaslAuthenticateRequest(auth_bytes=final)))
    scram.verify_server_final(server_final)


async def authenticate(client: _Requester, login: SaslLogin) -> None:
    exchange = login_exchange(login)
    request = next(exchange)
    try:
        while True:
            request = exchange.send(await client.request(request))
    except StopIteration:
        return


def authenticate_blocking(client: _BlockingRequester, login: SaslLogin) -> None:
    exchange = login_exchange(login)
    request = next(exchange)
    try:
        while True:
            request = exchange.send(client.request(request))
    except StopIteration:
        return
