"""DeleteShareGroupState (key 86), v0: a share partition's state goes (DeleteGroups of a
share group, DeleteShareGroupOffsets): a tombstone in `__share_group_state`."""

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
    from kio.schema.delete_share_group_state import v0

    def _served_requests_are_views(r0: v0.DeleteShareGroupStateRequest) -> list[StateRequestView]:
        return [r0]


@handles(ApiKey.DELETE_SHARE_GROUP_STATE)
def handle_delete_share_group_state(ctx: RequestContext, request: StateRequestView) -> Any:
    async def serve(coordinator: ShareCoordinator, topic_id: uuid.UUID, partition: Any) -> Any:
        await coordinator.delete_state(request.group_id, topic_id, partition.partition)
        return {}

    return respond_later(answer_partitions(ctx, request, "DeleteStateResult", serve), lambda r: r)
