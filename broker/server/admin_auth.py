"""Who may use the admin endpoint (admin_server.py), decided once per HTTP request.

The endpoint controls the broker (fault injection can refuse every client) and tells what
it holds (/metrics names every topic), so on a broker that asks its Kafka clients to log
in, it asks the same of its HTTP clients: an `Authorization: Bearer <admin.auth.token>`,
or `Authorization: Basic` with the user name and password of a broker user (a SASL/PLAIN
user of a listener's JAAS config, or a user with SCRAM credentials). With an authorizer,
the user must also be allowed the operation on the cluster resource (faults: ALTER;
/metrics: DESCRIBE), as Kafka's own admin requests are. The probes (/v1/health,
/v1/ready) answer everyone, without the reasons of a broker that is not ready.

A broker with only PLAINTEXT listeners, no authorizer and no token (a test broker) asks
nothing: anyone who reaches its Kafka port can do as much.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..authorizer.operations import AclOperation

if TYPE_CHECKING:
    from ..config.broker_config import BrokerConfig
    from ..security.scram import ScramCredential

log = logging.getLogger("brook.admin")

CLUSTER_NAME = "kafka-cluster"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# The principal of a request that carried the operator's token.
TOKEN_PRINCIPAL = "User:admin-token"


@dataclass(frozen=True, slots=True)
class AdminAccess:
    """What one request may do: who it is (None: nobody logged in) and whether it may."""

    principal: str | None
    allowed: bool
    reason: str = ""


class AdminAuthenticator:
    def __init__(
        self,
        config: BrokerConfig,
        scram_credential: Callable[[str, str], ScramCredential | None],
        authorize: Callable[[str, str, AclOperation], bool] | None,
    ) -> None:
        """`scram_credential(user, mechanism)` reads the broker's store (from the HTTP
        thread); `authorize(principal, host, operation)` asks the broker's authorizer
        about the cluster resource (None: no authorizer)."""
        token = config["admin.auth.token"]
        self._token: bytes | None = token.encode() if token else None
        self._plain_users = _plain_users(config)
        secured = any(
            config.security_protocol(item.name) != "PLAINTEXT" for item in config.listeners
        )
        self.required = self._token is not None or secured or authorize is not None
        self._scram_credential = scram_credential
        self._authorize = authorize
        self._failure_delay_s = config["connection.failed.authentication.delay.ms"] / 1000
        if self.required and self._token is None and not self._can_check_passwords(config):
            log.warning(
                "The admin endpoint asks for credentials (a listener uses TLS or SASL, or an"
                " authorizer is set) but the broker has no PLAIN or SCRAM users to check them"
                " against: set admin.auth.token"
            )

    @staticmethod
    def _can_check_passwords(config: BrokerConfig) -> bool:
        return any(
            config.security_protocol(item.name) in ("SASL_PLAINTEXT", "SASL_SSL")
            for item in config.listeners
        )

    def check(self, authorization: str | None, host: str, operation: AclOperation) -> AdminAccess:
        """The access of a request with this Authorization header, from `host`."""
        if not self.required:
            return AdminAccess(None, True)
        if not authorization:
            return AdminAccess(None, False, "no credentials")
        principal = self._authenticate(authorization)
        if principal is None:
            # As a failed Kafka login: held for the delay, so passwords cannot be tried
            # quickly, and logged once.
            log.info("Failed authentication with %s on the admin endpoint", host)
            time.sleep(self._failure_delay_s)
            return AdminAccess(None, False, "invalid credentials")
        if principal == TOKEN_PRINCIPAL or self._authorize is None:
            return AdminAccess(principal, True)
        if self._authorize(principal, host, operation):
            return AdminAccess(principal, True)
        log.info(
            "Principal = %s is Denied Operation = %s from host = %s on resource ="
            " Cluster:LITERAL:%s (admin endpoint)",
            principal,
            operation.name.title(),
            host,
            CLUSTER_NAME,
        )
        return AdminAccess(principal, False, "not authorized")

    def _authenticate(self, authorization: str) -> str | None:
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer":
            if self._token is not None and hmac.compare_digest(value.encode(), self._token):
                return TOKEN_PRINCIPAL
            return None
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if self._password_matches(user, password):
            return f"User:{user}"
        return None

    def _password_matches(self, user: str, password: str) -> bool:
        known = self._plain_users.get(user)
        if known is not None:
            return hmac.compare_digest(known.encode(), password.encode())
        from ..security.scram import credential_from_salted_password, salted_password

        for mechanism in SCRAM_MECHANISMS:
            stored = self._scram_credential(user, mechanism)
            if stored is None:
                continue
            salted = salted_password(mechanism, password, stored.salt, stored.iterations)
            given = credential_from_salted_password(
                mechanism, salted, stored.salt, stored.iterations
            )
            return hmac.compare_digest(given.stored_key, stored.stored_key)
        return False


def _plain_users(config: BrokerConfig) -> dict[str, str]:
    """The SASL/PLAIN users of every listener that serves PLAIN."""
    users: dict[str, str] = {}
    for security in config.listener_security.values():
        sasl: Any = getattr(security, "sasl", None)
        if sasl is not None:
            users.update(sasl.plain_users)
    return users


# The operation an admin path asks of the cluster resource.
FAULTS_OPERATION = AclOperation.ALTER
METRICS_OPERATION = AclOperation.DESCRIBE
