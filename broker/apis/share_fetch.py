"""ShareFetch (key 78), v1-v2: a share-group member's fetch (KIP-932).

The member fetches in a share session (epoch 0 opens it, -1 closes it) and may
acknowledge what it got before (acknowledgement batches per partition, applied before
the fetch acquires more). Each partition answers the whole batches it read and which of
their records the member acquired (AcquiredRecords, with their delivery counts), locked
for the acquisition lock timeout the response gives. v2 adds the acquire mode and
renewing locks (KIP-1222); Brook reads v2's fields it needs and answers as v1 does for
the rest.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize, authorized
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from ..share.share_partition import AcknowledgementBatch
from ..share.share_partition_manager import (
    PartitionAnswer,
    ShareFetchAnswer,
    ShareFetchPartition,
    ShareFetchRequest,
)
from . import NO_THROTTLE, build, handles, respond_later, schema_module
from .views import SharePartitionView, ShareTopicView


class ForgottenTopicView(Protocol):
    @property
    def topic_id(self) -> uuid.UUID | None: ...
    @property
    def partitions(self) -> Sequence[int]: ...


class ShareFetchRequestView(Protocol):
    @property
    def group_id(self) -> str | None: ...
    @property
    def member_id(self) -> str | None: ...
    @property
    def share_session_epoch(self) -> int: ...
    @property
    def max_wait(self) -> datetime.timedelta: ...
    @property
    def min_bytes(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def max_records(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def topics(self) -> Sequence[ShareTopicView]: ...
    @property
    def forgotten_topics_data(self) -> Sequence[ForgottenTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.share_fetch import v1, v2

    def _served_requests_are_views(
        r1: v1.ShareFetchRequest, r2: v2.ShareFetchRequest
    ) -> list[ShareFetchRequestView]:
        return [r1, r2]


# Kafka's bound on a share member's id (a UUID's string is 36 characters).
MAX_MEMBER_ID_LENGTH = 36
# v2 (KIP-1222): renewing acknowledgements, and the acquire mode.
FIRST_RENEW_VERSION = 2
RECORD_LIMIT_MODE = 1


def valid_member_id(member_id: str | None) -> bool:
    return bool(member_id) and len(member_id or "") <= MAX_MEMBER_ID_LENGTH


def acknowledgements(partition: SharePartitionView) -> tuple[AcknowledgementBatch, ...]:
    return tuple(
        AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
        for b in partition.acknowledgement_batches
    )


def topic_names(ctx: RequestContext, topic_ids: set[uuid.UUID]) -> dict[uuid.UUID, str]:
    names = {}
    for topic_id in topic_ids:
        topic = ctx.services.metadata.get_by_id(topic_id)
        if topic is not None:
            names[topic_id] = topic.name
    return names


def unreadable(ctx: RequestContext, topic_ids: set[uuid.UUID]) -> set[uuid.UUID]:
    """The topics the principal may not Read (TOPIC_AUTHORIZATION_FAILED each)."""
    if ctx.services.authorizer is None:
        return set()
    names = topic_names(ctx, topic_ids)
    readable = authorized(ctx, AclOperation.READ, ResourceType.TOPIC, names.values())
    return {topic_id for topic_id, name in names.items() if name not in readable}


@handles(ApiKey.SHARE_FETCH)
def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequestView) -> Any:
    group_id = request.group_id or ""
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return _response(ctx, ShareFetchAnswer(ErrorCode.group_authorization_failed))
    if not valid_member_id(request.member_id):
        return _response(
            ctx, ShareFetchAnswer(ErrorCode.invalid_request, "Invalid member id in the request.")
        )
    renew_only = bool(getattr(request, "is_renew_ack", False))  # v2
    if renew_only and (
        request.max_wait.total_seconds()
        or request.min_bytes
        or request.max_bytes
        or request.max_records
    ):
        # KIP-1222: a request that renews locks fetches nothing, and says so.
        return _response(
            ctx,
            ShareFetchAnswer(
                ErrorCode.invalid_request,
                "A renewing ShareFetch must have MaxWaitMs, MinBytes, MaxBytes and MaxRecords 0",
            ),
        )
    wanted = [
        ShareFetchPartition(topic.topic_id, partition.partition_index, acknowledgements(partition))
        for topic in request.topics
        if topic.topic_id is not None
        for partition in topic.partitions
    ]
    denied = unreadable(ctx, {p.topic_id for p in wanted})
    refused = [
        PartitionAnswer(p.topic_id, p.partition, ErrorCode.topic_authorization_failed)
        for p in wanted
        if p.topic_id in denied
    ]
    answer = ctx.services.share_partitions.manager.share_fetch(
        ShareFetchRequest(
            group_id=group_id,
            member_id=request.member_id or "",
            session_epoch=request.share_session_epoch,
            max_wait_ms=int(request.max_wait.total_seconds() * 1000),
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            max_records=request.max_records if request.max_records > 0 or renew_only else 500,
            partitions=tuple(p for p in wanted if p.topic_id not in denied),
            forgotten=tuple(
                (topic.topic_id, index)
                for topic in request.forgotten_topics_data
                if topic.topic_id is not None
                for index in topic.partitions
            ),
            connection=ctx.peer,
            record_limit=getattr(request, "share_acquire_mode", 0) == RECORD_LIMIT_MODE,
            renew_only=renew_only,
            allow_renew=ctx.api_version >= FIRST_RENEW_VERSION,
        )
    )

    def with_refused(result: ShareFetchAnswer) -> Any:
        if result.error is ErrorCode.none:
            result.partitions.extend(refused)
        return _response(ctx, result)

    return respond_later(answer, with_refused)


def _response(ctx: RequestContext, answer: ShareFetchAnswer) -> Any:
    return share_response(ctx, answer, "ShareFetchableTopicResponse", _fetched)


def _fetched(types: Any, part: PartitionAnswer) -> dict[str, Any]:
    """What a ShareFetch partition has beyond a ShareAcknowledge one's."""
    return {
        "acknowledge_error_code": part.acknowledge_error,
        "acknowledge_error_message": part.acknowledge_error_message,
        "records": part.records,
        "acquired_records": tuple(
            build(
                types.AcquiredRecords,
                first_offset=r.first_offset,
                last_offset=r.last_offset,
                delivery_count=r.delivery_count,
            )
            for r in part.acquired
        ),
    }


def share_response(
    ctx: RequestContext,
    answer: ShareFetchAnswer,
    topic_type: str,
    partition_fields: Callable[[Any, PartitionAnswer], dict[str, Any]],
) -> Any:
    """A ShareFetch or ShareAcknowledge response: partitions by topic, each with its error
    and leader, and the endpoints of the leaders a NOT_LEADER_OR_FOLLOWER names."""
    types = schema_module(ctx.response_type)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    leaders: set[int] = set()
    for part in answer.partitions:
        if part.error is ErrorCode.not_leader_or_follower and part.leader_id >= 0:
            leaders.add(part.leader_id)
        by_topic.setdefault(part.topic_id, []).append(
            build(
                types.PartitionData,
                partition_index=part.partition,
                error_code=part.error,
                error_message=part.error_message,
                current_leader=build(
                    types.LeaderIdAndEpoch, leader_id=part.leader_id, leader_epoch=part.leader_epoch
                ),
                **partition_fields(types, part),
            )
        )
    return build(
        ctx.response_type,
        throttle_time=NO_THROTTLE,
        error_code=answer.error,
        error_message=answer.error_message,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=answer.lock_duration_ms),
        responses=tuple(
            build(getattr(types, topic_type), topic_id=topic_id, partitions=tuple(parts))
            for topic_id, parts in by_topic.items()
        ),
        node_endpoints=node_endpoints(ctx, types, leaders),
    )


def node_endpoints(ctx: RequestContext, types: Any, broker_ids: set[int]) -> tuple[Any, ...]:
    """Where the leaders named in NOT_LEADER_OR_FOLLOWER answers listen, for the
    listener the request came in on."""
    endpoints = []
    for broker_id in sorted(broker_ids):
        endpoint = ctx.services.metadata.endpoint(broker_id, ctx.listener_name)
        broker = ctx.services.metadata.broker(broker_id)
        if endpoint is None or broker is None:
            continue
        endpoints.append(
            build(
                types.NodeEndpoint,
                node_id=broker_id,
                host=endpoint.host,
                port=endpoint.port,
                rack=broker.rack,
            )
        )
    return tuple(endpoints)
