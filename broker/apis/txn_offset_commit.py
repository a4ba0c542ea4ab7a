"""TxnOffsetCommit (key 28), v0-v5: a transactional producer commits a group's offsets.

The offsets go to the group's `__consumer_offsets` partition inside the producer's
transaction; they become the group's committed offsets when the transaction commits
(its marker reaches that partition) and are dropped if it aborts. Partitions of unknown
topics and metadata over offset.metadata.max.bytes fail on their own, as in OffsetCommit;
from v3 the member's generation is checked (KIP-447). The group's offsets partition
must be in the producer's transaction (KIP-890: INVALID_TXN_STATE before v4,
TRANSACTION_ABORTABLE in v4); v5 (transaction version 2) adds it instead, as the client
no longer sends AddOffsetsToTxn.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any, Protocol

from brook.coordinator_state.offsets import CommittedOffset
from brook.protocol import coordinator_records as cr
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..coordinator.records import TransactionalProducer
from ..server.request_context import RequestContext
from ..transactions import verification
from ..transactions.shard import ProducerIdAndEpoch
from . import handles
from .offset_commit import OffsetKey, commit_denials, commit_response, offsets_to_commit
from .views import CommitRequestView, TransactionalRequestView

log = logging.getLogger("brook.apis.txn_offset_commit")

# How long the broker retries adding the offsets partition while the producer's last
# transaction completes (Kafka's add.partitions.to.txn.retry.backoff.max.ms bounds it).
ADD_TIMEOUT_S = verification.ADD_RETRY_MAX_S


class TxnOffsetCommitRequestView(CommitRequestView, TransactionalRequestView, Protocol):
    """What the handler reads of a TxnOffsetCommitRequest in every served version, with
    its topics and partitions (views.py); the member's generation id, member id and group
    instance id (v3+, KIP-447) are read where the version has them."""


if TYPE_CHECKING:
    from kio.schema.txn_offset_commit import v0, v1, v2, v3, v4, v5

    def _served_requests_are_views(
        r0: v0.TxnOffsetCommitRequest,
        r1: v1.TxnOffsetCommitRequest,
        r2: v2.TxnOffsetCommitRequest,
        r3: v3.TxnOffsetCommitRequest,
        r4: v4.TxnOffsetCommitRequest,
        r5: v5.TxnOffsetCommitRequest,
    ) -> list[TxnOffsetCommitRequestView]:
        return [r0, r1, r2, r3, r4, r5]


@handles(ApiKey.TXN_OFFSET_COMMIT)
def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequestView) -> Any:
    services = ctx.services
    refusal, unreadable = commit_denials(ctx, request)
    if refusal is not None:
        return commit_response(ctx, request, ErrorCode.none, refusal, [])
    accepted, errors, known_partitions = offsets_to_commit(
        services, request.topics, unreadable=unreadable
    )
    if not known_partitions:
        return commit_response(ctx, request, ErrorCode.none, errors, known_partitions)
    producer = ProducerIdAndEpoch(request.producer_id, request.producer_epoch)
    try:
        offsets_partition = (
            cr.CONSUMER_OFFSETS_TOPIC,
            services.groups.runtime.partition_for(request.group_id),
        )
        coordinator = verification.coordinator_of(services, request.transactional_id)
        operation = verification.for_txn_offset_commit(ctx.api_version)
        in_transaction = verification.verify(
            coordinator,
            request.transactional_id,
            producer,
            offsets_partition,
            operation,
        )
    except KafkaError as exc:
        return _refused(ctx, request, errors, known_partitions, exc)
    if in_transaction:
        return _commit(ctx, request, accepted, errors, known_partitions)
    return _commit_once_added(
        ctx,
        request,
        (coordinator, operation),
        offsets_partition,
        accepted,
        errors,
        known_partitions,
    )


async def _commit_once_added(
    ctx: RequestContext,
    request: TxnOffsetCommitRequestView,
    asking: tuple[verification.AnyCoordinator, verification.SupportedOperation],
    offsets_partition: tuple[str, int],
    accepted: dict[OffsetKey, CommittedOffset],
    errors: dict[OffsetKey, ErrorCode],
    known_partitions: list[OffsetKey],
) -> Any:
    """Transaction version 2 (v5): the group's offsets partition joins the producer's
    transaction first, as the client no longer sends AddOffsetsToTxn."""
    try:
        await verification.add(
            asking[0],
            request.transactional_id,
            ProducerIdAndEpoch(request.producer_id, request.producer_epoch),
            offsets_partition,
            ADD_TIMEOUT_S,
            asking[1],
        )
    except KafkaError as exc:
        return _refused(ctx, request, errors, known_partitions, exc)
    response = _commit(ctx, request, accepted, errors, known_partitions)
    return await response if inspect.isawaitable(response) else response


def _commit(
    ctx: RequestContext,
    request: TxnOffsetCommitRequestView,
    accepted: dict[OffsetKey, CommittedOffset],
    errors: dict[OffsetKey, ErrorCode],
    known_partitions: list[OffsetKey],
) -> Any:
    answer = ctx.services.groups.commit_transactional_offsets(
        request.group_id,
        TransactionalProducer(request.producer_id, request.producer_epoch),
        getattr(request, "generation_id", -1),
        getattr(request, "member_id", ""),
        getattr(request, "group_instance_id", None),
        accepted,
    )
    return commit_response(ctx, request, answer, errors, known_partitions)


def _refused(
    ctx: RequestContext,
    request: TxnOffsetCommitRequestView,
    errors: dict[OffsetKey, ErrorCode],
    known_partitions: list[OffsetKey],
    exc: KafkaError,
) -> Any:
    """The transaction check failed: every known partition carries its error, as the
    group coordinator answers it (a coordinator that could not verify is not available)."""
    error = exc.error_code
    if error is ErrorCode.not_enough_replicas:
        error = ErrorCode.coordinator_not_available
    log.info(
        "TxnOffsetCommit of group %s (transactional id %r) from %s refused: %s: %s",
        request.group_id,
        request.transactional_id,
        ctx.who,
        error.name.upper(),
        exc.message,
    )
    errors.update(dict.fromkeys(known_partitions, error))
    return commit_response(ctx, request, ErrorCode.none, errors, [])
