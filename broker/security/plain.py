"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer serves it: one token,
`authzid NUL username NUL password`, checked against the listener's JAAS users."""

from __future__ import annotations

import hmac
from collections.abc import Mapping


class PlainRefusal(Exception):
    """Kafka's SaslAuthenticationException: its message goes to the client."""


class PlainSaslServer:
    mechanism = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.username = ""

    async def evaluate(self, token: bytes) -> bytes:
        tokens = token.decode("utf-8", "replace").split("\0")
        if len(tokens) != 3:
            raise PlainRefusal(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise PlainRefusal("Authentication failed: username not specified")
        if not password:
            raise PlainRefusal("Authentication failed: password not specified")
        self.username = username
        expected = self._users.get(username)
        # Compared in constant time, and a made-up password for an unknown user, so
        # that the answer's timing tells nothing about which users exist.
        matches = hmac.compare_digest(
            (expected if expected is not None else "\0unknown").encode(), password.encode()
        )
        if expected is None or not matches:
            raise PlainRefusal("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise PlainRefusal(
                "Authentication failed: Client requested an authorization id that is different"
                " from username"
            )
        self.complete = True
        return b""
