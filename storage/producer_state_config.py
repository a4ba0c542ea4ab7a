"""The broker-wide settings of every partition's producer state (Kafka's
ProducerStateManagerConfig), apart from the manager so that a broker can hold them
before it loads any log."""

from __future__ import annotations

from dataclasses import dataclass

# producer.id.expiration.ms: a producer idle this long is forgotten.
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000


@dataclass(slots=True)
class ProducerStateManagerConfig:
    """Shared by all logs, so a dynamic change reaches all."""

    producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
