"""InitProducerId (key 22), v0-v5: a producer id and epoch for an idempotent producer.

Without a transactional id every call gets a new producer id at epoch 0; from v3 a
producer that knows its id and epoch (KIP-360) gets the same id with the epoch bumped,
or a new id when the epoch would overflow. A transactional id goes to the transaction
coordinator: the id keeps its producer id, the epoch is bumped, and an open transaction
of an older producer is aborted first (CONCURRENT_TRANSACTIONS meanwhile).
"""

from __future__ import annotations

import datetime
import logging
from typing import TYPE_CHECKING, Any, Protocol

from brook.coordinator_state.transaction_metadata import MAX_PRODUCER_EPOCH
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorize_any_of_type, authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from ..transactions.errors import error_for_version
from ..transactions.shard import InitProducerIdResult, ProducerIdAndEpoch
from . import NO_THROTTLE, answer_or_error, build, handles, respond_later

log = logging.getLogger("brook.apis.init_producer_id")


class InitProducerIdRequestView(Protocol):
    """What the handler reads of an InitProducerIdRequest in every served version; the
    producer id and epoch (v3+, KIP-360) are read where the version has them."""

    @property
    def transactional_id(self) -> str | None: ...
    @property
    def transaction_timeout(self) -> datetime.timedelta: ...


if TYPE_CHECKING:
    from kio.schema.init_producer_id import v0, v1, v2, v3, v4, v5

    def _served_requests_are_views(
        r0: v0.InitProducerIdRequest,
        r1: v1.InitProducerIdRequest,
        r2: v2.InitProducerIdRequest,
        r3: v3.InitProducerIdRequest,
        r4: v4.InitProducerIdRequest,
        r5: v5.InitProducerIdRequest,
    ) -> list[InitProducerIdRequestView]:
        return [r0, r1, r2, r3, r4, r5]


@handles(ApiKey.INIT_PRODUCER_ID)
def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequestView) -> Any:
    if request.transactional_id is not None:
        if not authorize(
            ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
        ):
            return _response(ctx, ErrorCode.transactional_id_authorization_failed, -1, -1)
        return _init_transactional(ctx, request)
    # An idempotent producer: IdempotentWrite on the cluster, or Write on some topic.
    if not authorize_cluster(
        ctx, AclOperation.IDEMPOTENT_WRITE, log_denial=False
    ) and not authorize_any_of_type(ctx, AclOperation.WRITE, ResourceType.TOPIC):
        log.info("InitProducerId from %s refused: %s may write no topic", ctx.peer, ctx.principal)
        return _response(ctx, ErrorCode.cluster_authorization_failed, -1, -1)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    if producer_id >= 0 and 0 <= epoch < MAX_PRODUCER_EPOCH:
        return _response(ctx, ErrorCode.none, producer_id, epoch + 1)
    try:
        producer_id = ctx.services.producer_ids.next_id()
    except KafkaError as exc:
        # A cluster's next block of ids is on its way from ZooKeeper: the producer retries.
        log.info("InitProducerId from %s: %s", ctx.who, exc.message)
        return _response(ctx, exc.error_code, -1, -1)
    log.debug("Producer id %d for %s (client %r)", producer_id, ctx.peer, ctx.client_id)
    return _response(ctx, ErrorCode.none, producer_id, 0)


def _response(ctx: RequestContext, error: ErrorCode, producer_id: int, epoch: int) -> Any:
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=error_for_version(ctx.api_key, ctx.api_version, error),
        producer_id=producer_id,
        producer_epoch=epoch,
    )


def _init_transactional(ctx: RequestContext, request: InitProducerIdRequestView) -> Any:
    transactional_id = request.transactional_id
    if not transactional_id:
        return _response(ctx, ErrorCode.invalid_request, -1, -1)
    producer_id = getattr(request, "producer_id", -1)
    epoch = getattr(request, "producer_epoch", -1)
    expected = ProducerIdAndEpoch(producer_id, epoch) if producer_id >= 0 else None
    timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
    try:
        answer = ctx.services.transactions.init_producer_id(transactional_id, timeout_ms, expected)
    except KafkaError as exc:
        log.info("InitProducerId %r from %s: %s", transactional_id, ctx.who, exc.message)
        return _response(ctx, exc.error_code, -1, -1)
    return respond_later(
        answer_or_error(answer, lambda error: InitProducerIdResult(error)),
        lambda result: _response(ctx, result.error, result.producer_id, result.producer_epoch),
    )
