"""confluent-kafka's admin types, for the tools that use its AdminClient.

confluent-kafka documents these names in confluent_kafka.admin, which imports them from
its private modules without an `__all__`: mypy --strict (no implicit re-export) refuses
them from there. They are imported here once, typed as confluent-kafka declares them, and
the tools import them from here (lazily, as they import confluent-kafka: a tool that
does not use it does not pay for loading it).
"""

from __future__ import annotations

# confluent_kafka.admin re-exports these without __all__ (see above); the types are its own.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

__all__ = [
    "AlterConfigOpType",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "ResourceType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "UserScramCredentialAlteration",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "earliest_offset",
    "latest_offset",
]


def earliest_offset() -> OffsetSpec:
    """list_offsets' spec of the log start offset."""
    spec: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]  # unannotated there
    return spec


def latest_offset() -> OffsetSpec:
    """list_offsets' spec of the log end offset."""
    spec: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # unannotated there
    return spec
