"""TxnOffsetCommit (key 28), v0-v5: a transactional producer commits a group's offsets.

The offsets go to the group's `__consumer_offsets` partition inside the producer's
transaction; they become the group's committed offsets when the transaction commits
(its marker reaches that partition) and are dropped if it aborts. Partitions of unknown
topics and metadata over offset.metadata.max.bytes fail on their own, as in OffsetCommit;
from v3 the member's generation is checked (KIP-447).
"""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..coordinator.records import TransactionalProducer
from ..request_context import RequestContext
from . import NO_THROTTLE, build, handles, respond, schema_module
from .offset_commit import OffsetKey, offsets_to_commit

log = logging.getLogger("brook.apis.txn_offset_commit")


@handles(ApiKey.TXN_OFFSET_COMMIT)
def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    accepted, errors, known_partitions = offsets_to_commit(services, request.topics)
    if not known_partitions:
        return _response(ctx, request, errors)
    answer = services.groups.commit_transactional_offsets(
        request.group_id,
        TransactionalProducer(request.producer_id, request.producer_epoch),
        getattr(request, "generation_id", -1),
        getattr(request, "member_id", ""),
        getattr(request, "group_instance_id", None),
        accepted,
    )

    def with_group_error(group_error: ErrorCode) -> Any:
        if group_error:
            log.info(
                "TxnOffsetCommit of group %s (transactional id %r) from %s refused: %s",
                request.group_id,
                request.transactional_id,
                ctx.peer,
                group_error.name.upper(),
            )
            errors.update({key: group_error for key in known_partitions})
        return _response(ctx, request, errors)

    return respond(answer, with_group_error)


def _response(ctx: RequestContext, request: Any, errors: dict[OffsetKey, ErrorCode]) -> Any:
    types = schema_module(ctx.response_type)
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                types.TxnOffsetCommitResponseTopic,
                name=topic.name,
                partitions=tuple(
                    build(
                        types.TxnOffsetCommitResponsePartition,
                        partition_index=p.partition_index,
                        error_code=errors.get((topic.name, p.partition_index), ErrorCode.none),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )
