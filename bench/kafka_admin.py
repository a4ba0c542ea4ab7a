"""confluent-kafka's admin types, for the benchmarks that use its AdminClient.

confluent-kafka documents these names in confluent_kafka.admin, which imports them from
its private modules without an `__all__`: mypy --strict (no implicit re-export) refuses
them from there. They are imported here once, typed as confluent-kafka declares them, and
the benchmarks import them from here (Brook's tools use no client library).
"""

from __future__ import annotations

# confluent_kafka.admin re-exports these without __all__ (see above); the types are its own.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    NewTopic,
    OffsetSpec,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

__all__ = [
    "NewTopic",
    "OffsetSpec",
    "ScramCredentialInfo",
    "ScramMechanism",
    "UserScramCredentialUpsertion",
]
