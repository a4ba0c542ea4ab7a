"""SaslHandshake (key 17), v0-v1: the client names its SASL mechanism.

On a SASL listener before authentication (or to re-authenticate) the connection's
authenticator answers: NONE and the enabled mechanisms, or UNSUPPORTED_SASL_MECHANISM
with them (the connection then closes after connection.failed.authentication.delay.ms).
v0 means the tokens that follow are raw (no SaslAuthenticate). Anywhere else -- a
listener without SASL, a connection already authenticated whose client cannot
re-authenticate -- ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..server.request_context import RequestContext
from . import handles


class SaslHandshakeRequestView(Protocol):
    """What the handler reads of a SaslHandshakeRequest (every served version has it)."""

    @property
    def mechanism(self) -> str: ...


if TYPE_CHECKING:
    from kio.schema.sasl_handshake import v0, v1

    def _served_requests_are_views(
        r0: v0.SaslHandshakeRequest, r1: v1.SaslHandshakeRequest
    ) -> list[SaslHandshakeRequestView]:
        return [r0, r1]


@handles(ApiKey.SASL_HANDSHAKE)
def handle_sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequestView) -> Any:
    sasl = ctx.connection.sasl
    if sasl is None or sasl.authenticated:
        return ctx.response_type(error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    error, mechanisms = sasl.handshake(request.mechanism, ctx.api_version)
    return ctx.response_type(error_code=error, mechanisms=mechanisms)
