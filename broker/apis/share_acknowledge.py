"""ShareAcknowledge (key 79), v1-v2: a share-group member acknowledges records it
acquired, without fetching more (KIP-932), in its share session: the session's next
epoch, or -1 to acknowledge and close it. Each partition answers whether its
acknowledgements were taken; they are answered once written to the share-group state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from ..authorizer.acl import ResourceType
from ..authorizer.checks import authorize
from ..authorizer.operations import AclOperation
from ..server.request_context import RequestContext
from ..share.share_partition_manager import PartitionAnswer, ShareFetchAnswer, ShareFetchPartition
from . import handles, respond_later
from .share_fetch import (
    FIRST_RENEW_VERSION,
    acknowledgements,
    share_response,
    unreadable,
    valid_member_id,
)
from .views import ShareTopicView


class ShareAcknowledgeRequestView(Protocol):
    @property
    def group_id(self) -> str | None: ...
    @property
    def member_id(self) -> str | None: ...
    @property
    def share_session_epoch(self) -> int: ...
    @property
    def topics(self) -> Sequence[ShareTopicView]: ...


if TYPE_CHECKING:
    from kio.schema.share_acknowledge import v1, v2

    def _served_requests_are_views(
        r1: v1.ShareAcknowledgeRequest, r2: v2.ShareAcknowledgeRequest
    ) -> list[ShareAcknowledgeRequestView]:
        return [r1, r2]


@handles(ApiKey.SHARE_ACKNOWLEDGE)
def handle_share_acknowledge(ctx: RequestContext, request: ShareAcknowledgeRequestView) -> Any:
    group_id = request.group_id or ""
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        return _response(ctx, ShareFetchAnswer(ErrorCode.group_authorization_failed))
    if not valid_member_id(request.member_id):
        return _response(
            ctx, ShareFetchAnswer(ErrorCode.invalid_request, "Invalid member id in the request.")
        )
    wanted = [
        ShareFetchPartition(topic.topic_id, partition.partition_index, acknowledgements(partition))
        for topic in request.topics
        if topic.topic_id is not None
        for partition in topic.partitions
    ]
    denied = unreadable(ctx, {p.topic_id for p in wanted})
    answer = ctx.services.share_partitions.manager.share_acknowledge(
        group_id,
        request.member_id or "",
        request.share_session_epoch,
        [p for p in wanted if p.topic_id not in denied],
        allow_renew=ctx.api_version >= FIRST_RENEW_VERSION,
    )

    def with_refused(result: ShareFetchAnswer) -> Any:
        if result.error is ErrorCode.none:
            result.partitions.extend(
                PartitionAnswer(p.topic_id, p.partition, ErrorCode.topic_authorization_failed)
                for p in wanted
                if p.topic_id in denied
            )
        return _response(ctx, result)

    return respond_later(answer, with_refused)


def _response(ctx: RequestContext, answer: ShareFetchAnswer) -> Any:
    return share_response(ctx, answer, "ShareAcknowledgeTopicResponse", lambda types, part: {})
