"""One adapter per client for the consumer-group scenarios (test_group_scenarios.py)."""

from __future__ import annotations

from .aio_kafka import AiokafkaClient
from .base import GroupClient
from .confluent import ConfluentClient, ConfluentConsumerProtocolClient
from .kafka_python import KafkaPythonClient
from .kcat import KCAT, KcatClient

CLIENTS: list[type[GroupClient]] = [
    ConfluentClient,
    ConfluentConsumerProtocolClient,
    KafkaPythonClient,
    AiokafkaClient,
    KcatClient,
]

__all__ = ["CLIENTS", "KCAT", "GroupClient"]
