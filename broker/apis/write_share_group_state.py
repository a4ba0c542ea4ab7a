"""WriteShareGroupState (key 85), v0-v1: a share partition's leader writes what changed
(records acknowledged, released, their locks run out) to its share coordinator; v1 adds
the delivery-complete count. An older state or leader epoch is fenced."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from brook.protocol import share_state_records as sr
from brook.protocol.api_table import ApiKey

from ..server.request_context import RequestContext
from ..share.share_coordinator import ShareCoordinator, WriteState
from . import handles, respond_later
from .share_state import answer_partitions
from .views import StateRequestView

if TYPE_CHECKING:
    from kio.schema.write_share_group_state import v0, v1

    def _served_requests_are_views(
        r0: v0.WriteShareGroupStateRequest, r1: v1.WriteShareGroupStateRequest
    ) -> list[StateRequestView]:
        return [r0, r1]


@handles(ApiKey.WRITE_SHARE_GROUP_STATE)
def handle_write_share_group_state(ctx: RequestContext, request: StateRequestView) -> Any:
    async def serve(coordinator: ShareCoordinator, topic_id: uuid.UUID, partition: Any) -> Any:
        await coordinator.write_state(
            WriteState(
                request.group_id,
                topic_id,
                partition.partition,
                partition.state_epoch,
                partition.leader_epoch,
                partition.start_offset,
                tuple(
                    sr.PersistedStateBatch(
                        b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
                    )
                    for b in partition.state_batches
                ),
                getattr(partition, "delivery_complete_count", sr.UNKNOWN_DELIVERY_COMPLETE_COUNT),
            )
        )
        return {}

    return respond_later(answer_partitions(ctx, request, "WriteStateResult", serve), lambda r: r)
