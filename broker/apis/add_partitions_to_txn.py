"""AddPartitionsToTxn (key 24), v0-v5: partitions a transactional producer writes to.

v0-v3 carry one producer's partitions; v4+ (KIP-890) carry several transactions, each
possibly `verify_only` (is the partition in the transaction already?). Partitions of
unknown topics answer UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED,
with nothing written, as Kafka does; otherwise the coordinator's answer applies to every
partition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

from brook.coordinator_state.transaction_metadata import TV_0, TV_2
from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorize_cluster, denied
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from ..server.services import BrokerServices
from ..transactions.errors import error_for_version
from ..transactions.shard import ProducerIdAndEpoch
from . import NO_THROTTLE, build, handles, schema_module
from .views import TransactionalRequestView

log = logging.getLogger("brook.apis.add_partitions_to_txn")
FIRST_BATCHED_VERSION = 4
FIRST_ABORTABLE_VERSION = 5

Partitions = list[tuple[str, int]]
Errors = dict[tuple[str, int], ErrorCode]


class AddPartitionsToTxnTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class AddPartitionsToTxnRequestBeforeV4View(Protocol):
    """v0-v3: one producer's partitions (Kafka's fields named v3AndBelow...)."""

    @property
    def v3_and_below_transactional_id(self) -> str: ...
    @property
    def v3_and_below_producer_id(self) -> int: ...
    @property
    def v3_and_below_producer_epoch(self) -> int: ...
    @property
    def v3_and_below_topics(self) -> Sequence[AddPartitionsToTxnTopicView]: ...


class AddPartitionsToTxnTransactionView(TransactionalRequestView, Protocol):
    @property
    def verify_only(self) -> bool: ...
    @property
    def topics(self) -> Sequence[AddPartitionsToTxnTopicView]: ...


class AddPartitionsToTxnRequestFromV4View(Protocol):
    """v4+ (KIP-890): several transactions, sent by brokers."""

    @property
    def transactions(self) -> Sequence[AddPartitionsToTxnTransactionView]: ...


AddPartitionsToTxnRequestView: TypeAlias = (
    AddPartitionsToTxnRequestBeforeV4View | AddPartitionsToTxnRequestFromV4View
)


if TYPE_CHECKING:
    from kio.schema.add_partitions_to_txn import v0, v1, v2, v3, v4, v5

    def _served_requests_are_views(
        r0: v0.AddPartitionsToTxnRequest,
        r1: v1.AddPartitionsToTxnRequest,
        r2: v2.AddPartitionsToTxnRequest,
        r3: v3.AddPartitionsToTxnRequest,
        r4: v4.AddPartitionsToTxnRequest,
        r5: v5.AddPartitionsToTxnRequest,
    ) -> tuple[
        list[AddPartitionsToTxnRequestBeforeV4View], list[AddPartitionsToTxnRequestFromV4View]
    ]:
        return [r0, r1, r2, r3], [r4, r5]


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
def handle_add_partitions_to_txn(
    ctx: RequestContext, request: AddPartitionsToTxnRequestView
) -> Any:
    types = schema_module(ctx.response_type)
    if ctx.api_version < FIRST_BATCHED_VERSION:
        single = cast(AddPartitionsToTxnRequestBeforeV4View, request)
        partitions = _partitions(single.v3_and_below_topics)
        answer = _add(
            ctx,
            single.v3_and_below_transactional_id,
            ProducerIdAndEpoch(single.v3_and_below_producer_id, single.v3_and_below_producer_epoch),
            partitions,
            verify_only=False,
        )
        return _when_done(
            [answer],
            lambda errors: build(
                ctx.response_type,
                throttle_time=NO_THROTTLE,
                results_by_topic_v3_and_below=_topic_results(types, errors[0]),
            ),
        )
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        # v4+ come from brokers (KIP-890's verification): ClusterAction is theirs.
        return build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            results_by_transaction=(),
        )
    batched = cast(AddPartitionsToTxnRequestFromV4View, request)
    answers = [
        _add(
            ctx,
            transaction.transactional_id,
            ProducerIdAndEpoch(transaction.producer_id, transaction.producer_epoch),
            _partitions(transaction.topics),
            verify_only=transaction.verify_only,
        )
        for transaction in batched.transactions
    ]
    return _when_done(
        answers,
        lambda errors: build(
            ctx.response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            results_by_transaction=tuple(
                build(
                    types.AddPartitionsToTxnResult,
                    transactional_id=transaction.transactional_id,
                    topic_results=_topic_results(types, transaction_errors),
                )
                for transaction, transaction_errors in zip(
                    batched.transactions, errors, strict=True
                )
            ),
        ),
    )


def _unauthorized(
    ctx: RequestContext, transactional_id: str, partitions: Partitions
) -> Errors | None:
    """Kafka's checks: Write on the transactional id (else every partition refused), then
    Write on each topic (the others then OPERATION_NOT_ATTEMPTED)."""
    if ctx.services.authorizer is None:
        return None
    if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return dict.fromkeys(partitions, ErrorCode.transactional_id_authorization_failed)
    unwritable = denied(ctx, AclOperation.WRITE, ResourceType.TOPIC, (t for t, _ in partitions))
    if not unwritable:
        return None
    return {
        tp: ErrorCode.topic_authorization_failed
        if tp[0] in unwritable
        else ErrorCode.operation_not_attempted
        for tp in partitions
    }


def _partitions(topics: Iterable[AddPartitionsToTxnTopicView]) -> Partitions:
    return [(topic.name, partition) for topic in topics for partition in topic.partitions]


def _add(
    ctx: RequestContext,
    transactional_id: str,
    producer: ProducerIdAndEpoch,
    partitions: Partitions,
    verify_only: bool,
) -> Errors | Coroutine[Any, Any, Errors]:
    services = ctx.services
    unauthorized = _unauthorized(ctx, transactional_id, partitions)
    if unauthorized is not None:
        return unauthorized
    unknown = [tp for tp in partitions if not _exists(services, tp)]
    if unknown:
        log.info(
            "AddPartitionsToTxn %r from %s: unknown partitions %s",
            transactional_id,
            ctx.who,
            ", ".join(f"{t}-{p}" for t, p in unknown),
        )
        return {
            tp: ErrorCode.unknown_topic_or_partition
            if tp in unknown
            else ErrorCode.operation_not_attempted
            for tp in partitions
        }
    transactions = services.transactions
    try:
        if verify_only:
            missing = transactions.verify_partitions(transactional_id, producer, partitions)
            return {
                tp: ErrorCode.none if tp not in missing else _not_in_transaction(ctx)
                for tp in partitions
            }
        # v4+ come from brokers adding what a producer of transaction version 2 writes.
        version = TV_2 if ctx.api_version >= FIRST_BATCHED_VERSION else TV_0
        written = transactions.add_partitions(transactional_id, producer, partitions, version)
    except KafkaError as exc:
        return _refused(ctx, transactional_id, partitions, exc)
    return _errors_when_written(ctx, written, partitions, transactional_id)


def _not_in_transaction(ctx: RequestContext) -> ErrorCode:
    """A verified partition outside the transaction: TRANSACTION_ABORTABLE from v5 (the
    version that brought it, KIP-890), INVALID_TXN_STATE before."""
    if ctx.api_version >= FIRST_ABORTABLE_VERSION:
        return ErrorCode.transaction_abortable
    return ErrorCode.invalid_txn_state


def _refused(
    ctx: RequestContext, transactional_id: str, partitions: Partitions, exc: KafkaError
) -> Errors:
    log.info("AddPartitionsToTxn %r from %s: %s", transactional_id, ctx.who, exc.message)
    return dict.fromkeys(
        partitions, error_for_version(ctx.api_key, ctx.api_version, exc.error_code)
    )


async def _errors_when_written(
    ctx: RequestContext,
    written: asyncio.Future[None],
    partitions: Partitions,
    transactional_id: str,
) -> Errors:
    try:
        await written
    except KafkaError as exc:
        return _refused(ctx, transactional_id, partitions, exc)
    return dict.fromkeys(partitions, ErrorCode.none)


def _exists(services: BrokerServices, tp: tuple[str, int]) -> bool:
    topic = services.metadata.get(tp[0])
    return topic is not None and 0 <= tp[1] < len(topic.partitions)


def _when_done(
    answers: list[Errors | Coroutine[Any, Any, Errors]],
    build_response: Callable[[list[Errors]], Any],
) -> Any:
    ready = [answer for answer in answers if isinstance(answer, dict)]
    if len(ready) == len(answers):
        return build_response(ready)

    async def later() -> Any:
        return build_response([await a if not isinstance(a, dict) else a for a in answers])

    return later()


def _topic_results(types: ModuleType, errors: Errors) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append(
            build(
                types.AddPartitionsToTxnPartitionResult,
                partition_index=partition,
                partition_error_code=error,
            )
        )
    return tuple(
        build(types.AddPartitionsToTxnTopicResult, name=topic, results_by_partition=tuple(results))
        for topic, results in by_topic.items()
    )
