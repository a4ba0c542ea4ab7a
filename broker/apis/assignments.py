"""A group member's partitions as the KIP-848 and KIP-932 responses carry them: by topic
id (ConsumerGroupHeartbeat, ShareGroupHeartbeat), or by id and name (ConsumerGroupDescribe,
ShareGroupDescribe, which leave out a topic that is gone)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Set
from typing import Any

from ..server.request_context import RequestContext
from . import build

Partitions = Mapping[uuid.UUID, Set[int]]


def by_topic_id(types: Any, assignment: Partitions) -> Any:
    return build(
        types.Assignment,
        topic_partitions=tuple(
            build(types.TopicPartitions, topic_id=topic, partitions=tuple(sorted(parts)))
            for topic, parts in sorted(assignment.items(), key=lambda item: str(item[0]))
        ),
    )


def named(ctx: RequestContext, types: Any, assignment: Partitions) -> Any:
    return build(
        types.Assignment,
        topic_partitions=tuple(
            build(
                types.TopicPartitions,
                topic_id=topic_id,
                topic_name=topic.name,
                partitions=tuple(sorted(parts)),
            )
            for topic_id, parts in sorted(assignment.items(), key=lambda item: str(item[0]))
            if (topic := ctx.services.metadata.get_by_id(topic_id)) is not None
        ),
    )
