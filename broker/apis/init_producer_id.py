"""InitProducerId (key 22), v0-v5: a producer id and epoch for an idempotent producer.

Without a transactional id every call gets a new producer id at epoch 0; from v3 a
producer that knows its id and epoch (KIP-360) gets the same id with the epoch bumped,
or a new id when the epoch would overflow. Transactional ids need the transaction
coordinator, which Brook does not have yet: they are refused.
"""

from __future__ import annotations

import logging
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..request_context import RequestContext
from . import NO_THROTTLE, build, handles

log = logging.getLogger("brook.apis.init_producer_id")
MAX_EPOCH = 32767


@handles(ApiKey.INIT_PRODUCER_ID)
def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        log.info(
            "InitProducerId from %s for transactional id %r refused: transactions are"
            " not supported yet",
            ctx.peer,
            request.transactional_id,
        )
        return _response(ctx, ErrorCode.invalid_request, -1, -1)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_EPOCH - 1:
        return _response(ctx, ErrorCode.none, producer_id, epoch + 1)
    producer_id = ctx.services.producer_ids.next_id()
    log.debug("Producer id %d for %s (client %r)", producer_id, ctx.peer, ctx.client_id)
    return _response(ctx, ErrorCode.none, producer_id, 0)


def _response(ctx: RequestContext, error: ErrorCode, producer_id: int, epoch: int) -> Any:
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=error,
        producer_id=producer_id,
        producer_epoch=epoch,
    )
