"""WriteTxnMarkers (key 27), v1: write COMMIT or ABORT markers into partitions.

The transaction coordinator sends it to the leaders of a transaction's partitions that
are not its own (it writes its own partitions' markers itself, through the same path);
tools and tests write markers by hand with it too. Each
partition answers on its own (UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, or
INVALID_PRODUCER_EPOCH for a marker older than the producer's epoch there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.coordinator_records import ControlRecordType
from brook.protocol.errors import ErrorCode, KafkaError

from ..authorizer.checks import authorize_cluster
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from . import build, handles, schema_module

log = logging.getLogger("brook.apis.write_txn_markers")


class WritableTxnMarkerTopicView(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


class WritableTxnMarkerView(Protocol):
    """A producer's transaction marker (committed or aborted) and where to write it."""

    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def transaction_result(self) -> bool: ...
    @property
    def topics(self) -> Sequence[WritableTxnMarkerTopicView]: ...
    @property
    def coordinator_epoch(self) -> int: ...


class WriteTxnMarkersRequestView(Protocol):
    """What the handler reads of a WriteTxnMarkersRequest (v1, the one served)."""

    @property
    def markers(self) -> Sequence[WritableTxnMarkerView]: ...


if TYPE_CHECKING:
    from kio.schema.write_txn_markers import v1

    def _served_requests_are_views(
        r1: v1.WriteTxnMarkersRequest,
    ) -> list[WriteTxnMarkersRequestView]:
        return [r1]


@handles(ApiKey.WRITE_TXN_MARKERS)
async def handle_write_txn_markers(ctx: RequestContext, request: WriteTxnMarkersRequestView) -> Any:
    types = schema_module(ctx.response_type)
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
        # Markers are written by transaction coordinators (brokers): ClusterAction is theirs.
        return _refused(ctx, types, request)
    markers = ctx.services.transactions.markers
    results = []
    for marker in request.markers:
        result = ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT
        topics = []
        for topic in marker.topics:
            writes = [
                markers.write_marker_locally(
                    topic.name,
                    index,
                    marker.producer_id,
                    marker.producer_epoch,
                    marker.coordinator_epoch,
                    result,
                )
                for index in topic.partition_indexes
            ]
            outcomes = await asyncio.gather(*writes, return_exceptions=True)
            partitions = []
            for index, outcome in zip(topic.partition_indexes, outcomes, strict=True):
                error = ErrorCode.none
                if isinstance(outcome, KafkaError):
                    error = outcome.error_code
                    log.info(
                        "WriteTxnMarkers %s of producer %d to %s-%d from %s: %s",
                        result.name,
                        marker.producer_id,
                        topic.name,
                        index,
                        ctx.who,
                        outcome.message or error.name,
                    )
                elif isinstance(outcome, BaseException):
                    raise outcome
                partitions.append(
                    build(
                        types.WritableTxnMarkerPartitionResult,
                        partition_index=index,
                        error_code=error,
                    )
                )
            topics.append(
                build(
                    types.WritableTxnMarkerTopicResult,
                    name=topic.name,
                    partitions=tuple(partitions),
                )
            )
        results.append(
            build(
                types.WritableTxnMarkerResult, producer_id=marker.producer_id, topics=tuple(topics)
            )
        )
    return build(ctx.response_type, markers=tuple(results))


def _refused(ctx: RequestContext, types: ModuleType, request: WriteTxnMarkersRequestView) -> Any:
    error = ErrorCode.cluster_authorization_failed
    return build(
        ctx.response_type,
        markers=tuple(
            build(
                types.WritableTxnMarkerResult,
                producer_id=marker.producer_id,
                topics=tuple(
                    build(
                        types.WritableTxnMarkerTopicResult,
                        name=topic.name,
                        partitions=tuple(
                            build(
                                types.WritableTxnMarkerPartitionResult,
                                partition_index=index,
                                error_code=error,
                            )
                            for index in topic.partition_indexes
                        ),
                    )
                    for topic in marker.topics
                ),
            )
            for marker in request.markers
        ),
    )
