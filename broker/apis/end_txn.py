"""EndTxn (key 26), v0-v5: commit or abort a producer's transaction.

The coordinator writes PrepareCommit or PrepareAbort and answers once it is committed;
the markers and the Complete state follow (a producer that starts its next transaction
meanwhile gets CONCURRENT_TRANSACTIONS and retries). A retried EndTxn of a transaction
that completed the same way answers success; the other way, INVALID_TXN_STATE.
"""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..request_context import RequestContext
from ..transactions.shard import ProducerIdAndEpoch
from . import NO_THROTTLE, answer_or_error, build, handles, respond

log = logging.getLogger("brook.apis.end_txn")


@handles(ApiKey.END_TXN)
def handle_end_txn(ctx: RequestContext, request: Any) -> Any:
    producer = ProducerIdAndEpoch(request.producer_id, request.producer_epoch)
    try:
        answer = ctx.services.transactions.end_transaction(
            request.transactional_id, producer, request.committed
        )
    except KafkaError as exc:
        return _refused(ctx, request, exc.error_code, exc.message)
    return respond(
        answer_or_error(answer, lambda error: error),
        lambda error: _response(ctx, error or ErrorCode.none),
    )


def _refused(ctx: RequestContext, request: Any, error: ErrorCode, message: str) -> Any:
    log.info(
        "EndTxn(%s) of %r from %s: %s: %s",
        "commit" if request.committed else "abort",
        request.transactional_id,
        ctx.peer,
        error.name.upper(),
        message,
    )
    return _response(ctx, error)


def _response(ctx: RequestContext, error: ErrorCode) -> Any:
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=-1,
        producer_epoch=-1,
    )
