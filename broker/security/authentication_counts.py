"""Authentications per listener, as Kafka's socket-server-metrics count them
(successful-authentication-total, failed-authentication-total): a TLS handshake, a client
certificate's principal, a SASL exchange. /metrics reports them."""

from __future__ import annotations

from collections import Counter


class AuthenticationCounts:
    def __init__(self) -> None:
        self.succeeded: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
