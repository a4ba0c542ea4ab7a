"""InitializeShareGroupState (key 83), v0: the group coordinator gives a share partition a
fresh state (its start offset, -1 for share.auto.offset.reset to decide, and the state
epoch that fences older writers): a share partition newly read, or offsets altered."""

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
    from kio.schema.initialize_share_group_state import v0

    def _served_requests_are_views(
        r0: v0.InitializeShareGroupStateRequest,
    ) -> list[StateRequestView]:
        return [r0]


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
def handle_initialize_share_group_state(ctx: RequestContext, request: StateRequestView) -> Any:
    async def serve(coordinator: ShareCoordinator, topic_id: uuid.UUID, partition: Any) -> Any:
        await coordinator.initialize_state(
            request.group_id,
            topic_id,
            partition.partition,
            partition.state_epoch,
            partition.start_offset,
        )
        return {}

    return respond_later(
        answer_partitions(ctx, request, "InitializeStateResult", serve), lambda r: r
    )
