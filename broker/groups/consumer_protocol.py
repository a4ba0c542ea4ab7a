"""The "consumer" embedded protocol: subscriptions and assignments inside group bytes.

The broker treats member metadata and assignments as opaque, except where Kafka reads
them: OffsetDelete refuses topics a group still subscribes to, and the admin tools show
assignments. Both are versioned structs (int16 version first), decoded with kio; a
newer version than kio knows is read with the newest known one, as Kafka does.
"""

from __future__ import annotations

import struct

from kio.index import load_entity_schema
from kio.serial import entity_reader
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


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    decoded = _decode("consumer_protocol_assignment", assignment)
    if decoded is None:
        return {}
    return {
        entry.topic: list(entry.partitions) for entry in getattr(decoded, "assigned_partitions", ())
    }
