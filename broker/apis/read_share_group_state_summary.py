"""ReadShareGroupStateSummary (key 87), v0-v1: a share partition's start offset and epochs
as committed (v1: and how many records past it are done), for DescribeShareGroupOffsets."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from brook.protocol.api_table import ApiKey

from ..server.request_context import RequestContext
from ..share.share_coordinator import ShareCoordinator
from . import handles, respond_later
from .share_state import answer_partitions
from .views import StateRequestView

if TYPE_CHECKING:
    from kio.schema.read_share_group_state_summary import v0, v1

    def _served_requests_are_views(
        r0: v0.ReadShareGroupStateSummaryRequest, r1: v1.ReadShareGroupStateSummaryRequest
    ) -> list[StateRequestView]:
        return [r0, r1]


def _nothing() -> dict[str, Any]:
    return {"state_epoch": 0, "leader_epoch": 0, "start_offset": -1, "delivery_complete_count": -1}


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)
def handle_read_share_group_state_summary(ctx: RequestContext, request: StateRequestView) -> Any:
    async def serve(coordinator: ShareCoordinator, topic_id: uuid.UUID, partition: Any) -> Any:
        found = await coordinator.read_summary(request.group_id, topic_id, partition.partition)
        if found is None:
            return _nothing()
        return {
            "state_epoch": found.state_epoch,
            "leader_epoch": found.leader_epoch,
            "start_offset": found.start_offset,
            "delivery_complete_count": found.delivery_complete_count,
        }

    return respond_later(
        answer_partitions(ctx, request, "ReadStateSummaryResult", serve, _nothing), lambda r: r
    )
