"""The server side of SASL on one connection (Kafka's SaslServerAuthenticator).

Until the client has authenticated, a SASL listener accepts only ApiVersions and
SaslHandshake, then only SaslAuthenticate (after a v1 handshake) or raw tokens (after a
v0 handshake: size-prefixed SASL tokens with no Kafka header, as pre-KIP-152 clients send
them). Anything else closes the connection (connection.py), so pre-authentication input
never reaches a request handler.

A failed authentication answers SASL_AUTHENTICATION_FAILED with Kafka's message (the same
for an unknown user as for a wrong password), logs one line with the peer and the
mechanism, and closes the connection after connection.failed.authentication.delay.ms.

Sessions (KIP-368): with connections.max.reauth.ms set, SaslAuthenticate v1+ tells the
client how long its session lasts; the client re-authenticates on the same connection
with SaslHandshake + SaslAuthenticate (the same principal only), and a connection that
sends any other request after its session expired is closed.
"""

from __future__ import annotations

import enum
import logging
import time
from typing import TYPE_CHECKING

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from .listener_security import SaslSettings
from .plain import PlainRefusal, PlainSaslServer
from .principal import KafkaPrincipal, user
from .scram import ScramFailure, ScramRefusal, ScramSaslServer

if TYPE_CHECKING:
    from .scram_credentials import ScramCredentialStore

log = logging.getLogger("brook.security")


class SaslState(enum.Enum):
    HANDSHAKE = "HANDSHAKE"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "AUTHENTICATE"  # SaslAuthenticate requests (v1 handshake)
    RAW_TOKENS = "RAW_TOKENS"  # bare size-prefixed tokens (v0 handshake)
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class AuthenticationError(Exception):
    """The exchange failed; `message` is what the client is told."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SaslAuthenticator:
    def __init__(
        self,
        settings: SaslSettings,
        scram_credentials: ScramCredentialStore,
        decoy_key: bytes,
        peer: str,
        listener_name: str,
    ) -> None:
        self.settings = settings
        self._scram_credentials = scram_credentials
        self._decoy_key = decoy_key
        self.peer = peer
        self.listener_name = listener_name
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self._server: PlainSaslServer | ScramSaslServer | None = None
        # Whether the client used SaslAuthenticate v1+ (it can re-authenticate).
        self.client_supports_reauthentication = False
        self._session_expiry: float | None = None  # time.monotonic()
        self._reauthenticating_from: str | None = None  # the mechanism of the old session
        self._bad_reauthentication: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    def accepts(self, api_key: int) -> bool:
        """Whether a request of `api_key` may come in the current state."""
        if self.state is SaslState.HANDSHAKE:
            if api_key == ApiKey.API_VERSIONS:
                return self._reauthenticating_from is None
            return api_key == ApiKey.SASL_HANDSHAKE
        if self.state is SaslState.AUTHENTICATE:
            return api_key == ApiKey.SASL_AUTHENTICATE
        return self.state is SaslState.COMPLETE

    # --- sessions -------------------------------------------------------------------------

    def session_expired(self) -> bool:
        return self._session_expiry is not None and time.monotonic() >= self._session_expiry

    def begin_reauthentication(self) -> None:
        """A SaslHandshake on an authenticated connection: authenticate again, with the
        same mechanism and as the same principal."""
        self._reauthenticating_from = self.mechanism
        self.state = SaslState.HANDSHAKE

    @property
    def reauthenticating(self) -> bool:
        return self._reauthenticating_from is not None

    # --- the exchange ---------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> tuple[ErrorCode, tuple[str, ...]]:
        enabled = self.settings.mechanisms
        if mechanism not in enabled:
            self.state = SaslState.FAILED
            log.info(
                "Failed authentication with %s (listener %s): SASL mechanism %r is not"
                " enabled (enabled: %s)",
                self.peer,
                self.listener_name,
                mechanism,
                ", ".join(enabled),
            )
            return ErrorCode.unsupported_sasl_mechanism, enabled
        if self._reauthenticating_from is not None and mechanism != self._reauthenticating_from:
            # Kafka answers the handshake, then fails the next token with this.
            self._bad_reauthentication = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for"
                f" re-authentication of mechanism '{self._reauthenticating_from}'"
            )
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainSaslServer(self.settings.plain_users)
        else:
            self._server = ScramSaslServer(mechanism, self._scram_credentials.get, self._decoy_key)
        self.state = SaslState.AUTHENTICATE if version >= 1 else SaslState.RAW_TOKENS
        return ErrorCode.none, enabled

    async def authenticate(self, token: bytes, version: int | None) -> tuple[bytes, int]:
        """Evaluate one client token (`version`: SaslAuthenticate's, None for a raw
        token); the server's token and, once complete, the session lifetime in ms."""
        server = self._server
        assert server is not None and self.mechanism is not None
        if version is not None and version > 0:
            self.client_supports_reauthentication = True
        what = "re-authentication" if self.reauthenticating else "authentication"
        try:
            if self._bad_reauthentication is not None:
                raise PlainRefusal(self._bad_reauthentication)
            response = await server.evaluate(token)
            if server.complete:
                principal = user(server.username)
                if self.principal is not None and principal != self.principal:
                    raise PlainRefusal(
                        "Cannot change principals during re-authentication from"
                        f" {self.principal.principal_type}.{self.principal.name}:"
                        f" {principal.principal_type}.{principal.name}"
                    )
        except (PlainRefusal, ScramRefusal) as exc:
            self._fail(str(exc), server.username)
            raise AuthenticationError(str(exc)) from None
        except ScramFailure as exc:
            # Kafka's words for every SaslException: nothing of the cause reaches the client.
            message = (
                f"Authentication failed during {what} due to invalid credentials with SASL"
                f" mechanism {self.mechanism}"
            )
            self._fail(f"{message} ({exc})", server.username)
            raise AuthenticationError(message) from None
        if not server.complete:
            return response, 0
        self.principal = user(server.username)
        self.state = SaslState.COMPLETE
        self._reauthenticating_from = None
        lifetime_ms = self.settings.max_reauth_ms.get(self.mechanism, 0)
        self._session_expiry = time.monotonic() + lifetime_ms / 1000 if lifetime_ms > 0 else None
        log.debug(
            "%s: %s of %s with SASL %s complete", self.peer, what, self.principal, self.mechanism
        )
        return response, max(lifetime_ms, 0)

    def _fail(self, reason: str, username: str) -> None:
        self.state = SaslState.FAILED
        log.info(
            "Failed authentication with %s (listener %s, SASL mechanism %s, user %r): %s",
            self.peer,
            self.listener_name,
            self.mechanism,
            username,
            reason,
        )
