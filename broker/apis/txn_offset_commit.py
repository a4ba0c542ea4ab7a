"""TxnOffsetCommit (key 28), v0-v5: a transactional producer commits a group's offsets.

The offsets go to the group's `__consumer_offsets` partition inside the producer's
transaction; they become the group's committed offsets when the transaction commits
(its marker reaches that partition) and are dropped if it aborts. Partitions of unknown
topics and metadata over offset.metadata.max.bytes fail on their own, as in OffsetCommit;
from v3 the member's generation is checked (KIP-447).
"""

from __future__ import annotations

from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..coordinator.records import TransactionalProducer
from ..request_context import RequestContext
from . import handles
from .offset_commit import commit_response, offsets_to_commit


@handles(ApiKey.TXN_OFFSET_COMMIT)
def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    accepted, errors, known_partitions = offsets_to_commit(services, request.topics)
    if not known_partitions:
        return commit_response(ctx, request, ErrorCode.none, errors, known_partitions)
    answer = services.groups.commit_transactional_offsets(
        request.group_id,
        TransactionalProducer(request.producer_id, request.producer_epoch),
        getattr(request, "generation_id", -1),
        getattr(request, "member_id", ""),
        getattr(request, "group_instance_id", None),
        accepted,
    )
    return commit_response(ctx, request, answer, errors, known_partitions)
