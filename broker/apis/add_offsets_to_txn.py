"""AddOffsetsToTxn (key 25), v0-v4: a transaction will commit a group's offsets.

The coordinator adds the group's `__consumer_offsets` partition to the transaction, so
its marker makes the offsets of TxnOffsetCommit visible (or drops them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol import coordinator_records as cr
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from ..transactions.errors import error_for_version
from ..transactions.shard import ProducerIdAndEpoch
from . import NO_THROTTLE, answer_or_error, build, handles, respond_later
from .views import TransactionalRequestView

log = logging.getLogger("brook.apis.add_offsets_to_txn")


class AddOffsetsToTxnRequestView(TransactionalRequestView, Protocol):
    """What the handler reads of an AddOffsetsToTxnRequest (every served version has it)."""

    @property
    def group_id(self) -> str: ...


if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn import v0, v1, v2, v3, v4

    def _served_requests_are_views(
        r0: v0.AddOffsetsToTxnRequest,
        r1: v1.AddOffsetsToTxnRequest,
        r2: v2.AddOffsetsToTxnRequest,
        r3: v3.AddOffsetsToTxnRequest,
        r4: v4.AddOffsetsToTxnRequest,
    ) -> list[AddOffsetsToTxnRequestView]:
        return [r0, r1, r2, r3, r4]


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequestView) -> Any:
    services = ctx.services
    if not authorize(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return _response(ctx, ErrorCode.transactional_id_authorization_failed)
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _response(ctx, ErrorCode.group_authorization_failed)
    producer = ProducerIdAndEpoch(request.producer_id, request.producer_epoch)
    try:
        services.groups.ensure_topic()
        partition = services.groups.runtime.partition_for(request.group_id)
        answer = services.transactions.add_partitions(
            request.transactional_id, producer, [(cr.CONSUMER_OFFSETS_TOPIC, partition)]
        )
    except KafkaError as exc:
        log.info(
            "AddOffsetsToTxn %r (group %r) from %s: %s",
            request.transactional_id,
            request.group_id,
            ctx.who,
            exc.message,
        )
        return _response(ctx, exc.error_code)
    return respond_later(
        answer_or_error(answer, lambda error: error),
        lambda error: _response(ctx, error or ErrorCode.none),
    )


def _response(ctx: RequestContext, error: ErrorCode) -> Any:
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=error_for_version(ctx.api_key, ctx.api_version, error),
    )
