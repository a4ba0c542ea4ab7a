"""DescribeTransactions (key 65), v0: the state of transactional ids.

An id this broker's coordinator does not know answers TRANSACTIONAL_ID_NOT_FOUND; one
whose partition it does not serve, NOT_COORDINATOR. With an authorizer, an id the
principal may not describe answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED, and the topics
of a transaction it may not describe are left out of the answer, as Kafka leaves them.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.coordinator_state.transaction_metadata import STATE_NAMES, TransactionMetadata
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorized, denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import NO_THROTTLE, build, handles, schema_module

# -1 on the wire (no transaction under way), which this field's type writes as a time.
NO_START_TIME = datetime.datetime.fromtimestamp(-0.001, datetime.UTC)


class DescribeTransactionsRequestView(Protocol):
    """What the handler reads of a DescribeTransactionsRequest (v0, the one served)."""

    @property
    def transactional_ids(self) -> Sequence[str]: ...


if TYPE_CHECKING:
    from kio.schema.describe_transactions import v0

    def _served_requests_are_views(
        r0: v0.DescribeTransactionsRequest,
    ) -> list[DescribeTransactionsRequestView]:
        return [r0]


@handles(ApiKey.DESCRIBE_TRANSACTIONS)
async def handle_describe_transactions(
    ctx: RequestContext, request: DescribeTransactionsRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    transactions = ctx.services.transactions
    states = []
    hidden = denied(
        ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.transactional_ids
    )
    for transactional_id in request.transactional_ids:
        if transactional_id in hidden:
            error = ErrorCode.transactional_id_authorization_failed
            states.append(_state(types, transactional_id, None, error))
            continue
        # Only committed state is described (Kafka reads its committed snapshot).
        await transactions.writes_committed(transactional_id)
        try:
            found = transactions.describe(transactional_id)
            error = ErrorCode.none if found is not None else ErrorCode.transactional_id_not_found
        except KafkaError as exc:
            found, error = None, exc.error_code
        visible = None
        if found is not None and ctx.services.authorizer is not None:
            topics = {topic for topic, _ in found.partitions}
            visible = authorized(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics, log_denial=False
            )
        states.append(_state(types, transactional_id, found, error, visible))
    return build(ctx.response_type, throttle_time=NO_THROTTLE, transaction_states=tuple(states))


def _state(
    types: ModuleType,
    transactional_id: str,
    found: TransactionMetadata | None,
    error: ErrorCode,
    visible_topics: set[str] | None = None,
) -> Any:
    """One id's answer; `visible_topics`, when given, bounds the topics it lists."""
    if found is None:
        return build(
            types.TransactionState,
            error_code=error,
            transactional_id=transactional_id,
            transaction_state="",
            transaction_timeout=datetime.timedelta(0),
            transaction_start_time=NO_START_TIME,
            producer_id=-1,
            producer_epoch=-1,
            topics=(),
        )
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(found.partitions):
        if visible_topics is not None and topic not in visible_topics:
            continue
        by_topic.setdefault(topic, []).append(partition)
    return build(
        types.TransactionState,
        error_code=ErrorCode.none,
        transactional_id=transactional_id,
        transaction_state=STATE_NAMES[found.state],
        transaction_timeout=datetime.timedelta(milliseconds=found.txn_timeout_ms),
        transaction_start_time=(
            datetime.datetime.fromtimestamp(found.txn_start_timestamp / 1000, datetime.UTC)
            if found.txn_start_timestamp >= 0
            else NO_START_TIME
        ),
        producer_id=found.producer_id,
        producer_epoch=found.producer_epoch,
        topics=tuple(
            build(types.TopicData, topic=topic, partitions=tuple(partitions))
            for topic, partitions in by_topic.items()
        ),
    )
