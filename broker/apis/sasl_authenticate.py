"""SaslAuthenticate (key 36), v0-v2: one SASL token each way, after a v1 SaslHandshake.

The connection's authenticator evaluates the token (PLAIN: one round; SCRAM: two). A
failure answers SASL_AUTHENTICATION_FAILED with Kafka's message, and the connection
closes after connection.failed.authentication.delay.ms. v1+ carries the session
lifetime once authentication completes (connections.max.reauth.ms, KIP-368; 0: none).
Outside an exchange (a listener without SASL, a connection already authenticated)
ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..server.request_context import RequestContext
from . import build, handles


def _response(
    ctx: RequestContext, error: ErrorCode, message: str | None, token: bytes, ms: int
) -> Any:
    return build(
        ctx.response_type,
        error_code=error,
        error_message=message,
        auth_bytes=token,
        session_lifetime=datetime.timedelta(milliseconds=ms),
    )


class SaslAuthenticateRequestView(Protocol):
    """What the handler reads of a SaslAuthenticateRequest (every served version has it)."""

    @property
    def auth_bytes(self) -> bytes: ...


if TYPE_CHECKING:
    from kio.schema.sasl_authenticate import v0, v1, v2

    def _served_requests_are_views(
        r0: v0.SaslAuthenticateRequest,
        r1: v1.SaslAuthenticateRequest,
        r2: v2.SaslAuthenticateRequest,
    ) -> list[SaslAuthenticateRequestView]:
        return [r0, r1, r2]


@handles(ApiKey.SASL_AUTHENTICATE)
def handle_sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequestView) -> Any:
    from ..security.sasl_authenticator import SaslState

    sasl = ctx.connection.sasl
    if sasl is None or sasl.state is not SaslState.AUTHENTICATE:
        return _response(
            ctx,
            ErrorCode.illegal_sasl_state,
            "SaslAuthenticate request received after successful authentication",
            b"",
            0,
        )
    return _authenticate(ctx, sasl, request.auth_bytes)


async def _authenticate(ctx: RequestContext, sasl: Any, token: bytes) -> Any:
    from ..security.sasl_authenticator import AuthenticationError

    counts = ctx.services.listeners.authentications
    try:
        answer, lifetime_ms = await sasl.authenticate(token, ctx.api_version)
    except AuthenticationError as exc:
        counts.failed[ctx.listener_name] += 1
        return _response(ctx, ErrorCode.sasl_authentication_failed, exc.message, b"", 0)
    if sasl.authenticated:  # SCRAM's first round is not yet an authentication
        counts.succeeded[ctx.listener_name] += 1
    return _response(ctx, ErrorCode.none, None, answer, lifetime_ms)
