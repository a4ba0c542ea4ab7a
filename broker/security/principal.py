"""Who a connection is (Kafka's KafkaPrincipal).

PLAINTEXT connections are User:ANONYMOUS; SASL ones are the user that authenticated; TLS
ones with a client certificate are named from its subject (certificate_names.py); TLS ones
without a certificate are User:ANONYMOUS.
"""

from __future__ import annotations

from typing import NamedTuple


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


USER_TYPE = "User"
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)
