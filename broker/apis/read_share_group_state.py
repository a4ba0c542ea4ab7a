"""ReadShareGroupState (key 84), v0: a share partition's leader reads the partition's state
from its share coordinator as it loads the share partition; a newer leader epoch is
recorded, fencing the writes of the previous leader."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from brook.protocol.api_table import ApiKey

from ..server.request_context import RequestContext
from ..share.share_coordinator import ShareCoordinator
from . import handles, respond_later, schema_module
from .share_state import answer_partitions
from .views import StateRequestView

if TYPE_CHECKING:
    from kio.schema.read_share_group_state import v0

    def _served_requests_are_views(r0: v0.ReadShareGroupStateRequest) -> list[StateRequestView]:
        return [r0]


@handles(ApiKey.READ_SHARE_GROUP_STATE)
def handle_read_share_group_state(ctx: RequestContext, request: StateRequestView) -> Any:
    types = schema_module(ctx.response_type)

    async def serve(coordinator: ShareCoordinator, topic_id: uuid.UUID, partition: Any) -> Any:
        found = await coordinator.read_state(
            request.group_id, topic_id, partition.partition, partition.leader_epoch
        )
        if found is None:
            return {"state_epoch": 0, "start_offset": -1, "state_batches": ()}
        return {
            "state_epoch": found.state_epoch,
            "start_offset": found.start_offset,
            "state_batches": tuple(
                types.StateBatch(
                    first_offset=b.first_offset,
                    last_offset=b.last_offset,
                    delivery_state=b.delivery_state,
                    delivery_count=b.delivery_count,
                )
                for b in found.batches
            ),
        }

    def failed() -> dict[str, Any]:
        return {"state_epoch": 0, "start_offset": -1, "state_batches": ()}

    return respond_later(
        answer_partitions(ctx, request, "ReadStateResult", serve, failed), lambda r: r
    )
