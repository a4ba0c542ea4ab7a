"""The "consumer" embedded protocol: subscriptions and assignments inside group bytes.

The broker treats member metadata and assignments as opaque, except where Kafka reads
them: OffsetDelete refuses topics a group still subscribes to, the admin tools show
assignments, and a classic member inside a consumer group (KIP-848) is assigned by the
coordinator from its subscription, its assignment answered in SyncGroup. Both are
versioned structs (int16 version first), decoded with kio; a newer version than kio
knows is read with the newest known one, as Kafka does.
"""

from __future__ import annotations

import io
import struct
import sys
from dataclasses import dataclass
from typing import Any

from kio.index import load_entity_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from brook.protocol.length_bounds import check_lengths

MAX_KNOWN_VERSION = 3


def _decode(schema_name: str, data: bytes) -> object | None:
    if len(data) < 2:
        return None
    (version,) = struct.unpack_from(">h", data, 0)
    version = min(max(version, 0), MAX_KNOWN_VERSION)
    entity_type = load_entity_schema(schema_name, version, EntityType.data)
    try:
        # A member's bytes reach kio's reader only once no array length in them lies
        # (kio would reserve room for it first and abort the process).
        check_lengths(entity_type, data, 2)
        value, _ = entity_reader(entity_type)(data, 2)
    except Exception:  # a member may send anything; an unreadable one subscribes to nothing
        return None
    return value


def subscribed_topics(metadata: bytes) -> set[str]:
    subscription = _decode("consumer_protocol_subscription", metadata)
    return set(getattr(subscription, "topics", ()) or ())


@dataclass(frozen=True)
class Subscription:
    """A classic member's subscription as the consumer protocol carries it: its topics,
    the partitions it owns (v1+: a cooperative member keeps them across a rebalance) and
    its rack (v3+)."""

    topics: tuple[str, ...]
    owned: dict[str, list[int]]
    rack_id: str | None
    version: int


def subscription(metadata: bytes) -> Subscription | None:
    """The subscription of a member's protocol metadata, or None if it does not parse."""
    decoded = _decode("consumer_protocol_subscription", metadata)
    if decoded is None:
        return None
    owned: dict[str, list[int]] = {}
    for entry in getattr(decoded, "owned_partitions", ()) or ():
        owned.setdefault(entry.topic, []).extend(entry.partitions)
    (version,) = struct.unpack_from(">h", metadata, 0)
    return Subscription(
        topics=tuple(getattr(decoded, "topics", ()) or ()),
        owned=owned,
        rack_id=getattr(decoded, "rack_id", None) or None,
        version=version,
    )


def encode_assignment(partitions: dict[str, list[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment of `partitions` (topic -> partitions), at `version`
    (the one a classic member subscribed with, at most the newest known)."""
    version = min(max(version, 0), MAX_KNOWN_VERSION)
    entity_type: Any = load_entity_schema("consumer_protocol_assignment", version, EntityType.data)
    topic_type = sys.modules[entity_type.__module__].TopicPartition
    assignment = entity_type(
        assigned_partitions=tuple(
            topic_type(topic=topic, partitions=tuple(sorted(parts)))
            for topic, parts in sorted(partitions.items())
        ),
        user_data=None,
    )
    buffer = io.BytesIO()
    buffer.write(struct.pack(">h", version))
    entity_writer(entity_type)(buffer, assignment)
    return buffer.getvalue()


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    decoded = _decode("consumer_protocol_assignment", assignment)
    if decoded is None:
        return {}
    return {
        entry.topic: list(entry.partitions) for entry in getattr(decoded, "assigned_partitions", ())
    }
