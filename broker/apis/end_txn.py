"""EndTxn (key 26), v0-v5: commit or abort a producer's transaction.

The coordinator writes PrepareCommit or PrepareAbort and answers once it is committed;
the markers and the Complete state follow (a producer that starts its next transaction
meanwhile gets CONCURRENT_TRANSACTIONS and retries). A retried EndTxn of a transaction
that completed the same way answers success; the other way, INVALID_TXN_STATE.

v5 is Kafka's transaction version 2 (KIP-890 part 2): the transaction ends with an epoch
bump, its markers carry the new epoch (so a late write of the ended transaction is
fenced), the response gives the producer id and epoch to use next, and an abort with no
transaction open is allowed. PRODUCER_FENCED reaches v0-v1 as INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from brook.coordinator_state.transaction_metadata import TV_0, TV_2
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from ..transactions.errors import error_for_version
from ..transactions.shard import ProducerIdAndEpoch
from . import NO_THROTTLE, build, handles
from .views import TransactionalRequestView

log = logging.getLogger("brook.apis.end_txn")


class EndTxnRequestView(TransactionalRequestView, Protocol):
    """What the handler reads of an EndTxnRequest (every served version has it)."""

    @property
    def committed(self) -> bool: ...


if TYPE_CHECKING:
    from kio.schema.end_txn import v0, v1, v2, v3, v4, v5

    def _served_requests_are_views(
        r0: v0.EndTxnRequest,
        r1: v1.EndTxnRequest,
        r2: v2.EndTxnRequest,
        r3: v3.EndTxnRequest,
        r4: v4.EndTxnRequest,
        r5: v5.EndTxnRequest,
    ) -> list[EndTxnRequestView]:
        return [r0, r1, r2, r3, r4, r5]


# EndTxn v5 is transaction version 2: every transaction ends with an epoch bump.
FIRST_EPOCH_BUMP_VERSION = 5


@handles(ApiKey.END_TXN)
def handle_end_txn(ctx: RequestContext, request: EndTxnRequestView) -> Any:
    if not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return _response(ctx, ErrorCode.transactional_id_authorization_failed)
    producer = ProducerIdAndEpoch(request.producer_id, request.producer_epoch)
    # The request's version is the client's transaction version, as in Kafka.
    version = TV_2 if ctx.api_version >= FIRST_EPOCH_BUMP_VERSION else TV_0
    try:
        answer = ctx.services.transactions.end_transaction(
            request.transactional_id, producer, request.committed, version
        )
    except KafkaError as exc:
        return _refused(ctx, request, exc.error_code, exc.message)

    return _answered(ctx, request, answer)


async def _answered(
    ctx: RequestContext, request: EndTxnRequestView, answer: Awaitable[ProducerIdAndEpoch]
) -> Any:
    """The response once the Prepare state is committed, or the error that kept it from
    being written (the coordinator's: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
    try:
        result = await answer
    except KafkaError as exc:
        return _refused(ctx, request, exc.error_code, exc.message)
    return _response(ctx, result)


def _refused(
    ctx: RequestContext, request: EndTxnRequestView, error: ErrorCode, message: str
) -> Any:
    log.info(
        "EndTxn(%s) of %r from %s: %s: %s",
        "commit" if request.committed else "abort",
        request.transactional_id,
        ctx.who,
        error.name.upper(),
        message,
    )
    return _response(ctx, error_for_version(ctx.api_key, ctx.api_version, error))


def _response(ctx: RequestContext, result: ErrorCode | ProducerIdAndEpoch) -> Any:
    """v5 carries the producer id and epoch of the producer's next transaction."""
    if isinstance(result, ProducerIdAndEpoch):
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=result,
        producer_id=-1,
        producer_epoch=-1,
    )
