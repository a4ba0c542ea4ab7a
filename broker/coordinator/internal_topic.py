"""The internal topic a coordinator keeps its state in, as the runtime needs it.

Which partition holds a key (Kafka's abs(hashCode) % partitions, from
protocol/coordinator_records.py), how many partitions it has (None until it exists) and
how to create it: the broker
creates it with the coordinator's settings the first time a client looks for a
coordinator, as Kafka does; tests give a topic that exists already.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class InternalTopic:
    name: str
    partition_of: Callable[[str, int], int]
    partition_count: Callable[[], int | None]
    create: Callable[[], None]
