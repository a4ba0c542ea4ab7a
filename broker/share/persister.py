"""Where a share partition's leader keeps the partition's state: the share coordinator
of its key (Kafka's DefaultStatePersister). On this broker, the coordinator is called
directly; a coordinator on another broker is not reachable yet, and the share partition
answers COORDINATOR_NOT_AVAILABLE until the key's coordinator moves here.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from brook.protocol import share_state_records as sr
from brook.protocol.errors import ErrorCode, KafkaError

from ..share.share_partition import RecordState, StateBatch
from .share_coordinator import WriteState
from .share_partition_manager import PersistedState

if TYPE_CHECKING:
    from ..coordinator.coordinators import Coordinators

# What a share partition's state write or read may fail with, as its leader answers it
# (Kafka's SharePartition.fetchPersisterError).
_AS_SEEN_BY_THE_LEADER = {
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available,
    ErrorCode.fenced_leader_epoch: ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_state_epoch: ErrorCode.not_leader_or_follower,
}


class CoordinatorPersister:
    def __init__(self, coordinators: Coordinators) -> None:
        self._coordinators = coordinators

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> PersistedState | None:
        try:
            found = await self._coordinators.share.read_state(
                group_id, topic_id, partition, leader_epoch
            )
        except KafkaError as exc:
            raise _for_leader(exc) from None
        if found is None:
            return None
        return PersistedState(
            found.state_epoch,
            found.start_offset,
            tuple(
                StateBatch(
                    b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count
                )
                for b in found.batches
                if b.delivery_state in RecordState._value2member_map_
            ),
        )

    async def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        state: PersistedState,
    ) -> None:
        try:
            await self._coordinators.share.write_state(
                WriteState(
                    group_id,
                    topic_id,
                    partition,
                    state.state_epoch,
                    leader_epoch,
                    state.start_offset,
                    tuple(
                        sr.PersistedStateBatch(
                            b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count
                        )
                        for b in state.batches
                    ),
                )
            )
        except KafkaError as exc:
            raise _for_leader(exc) from None


def _for_leader(exc: KafkaError) -> KafkaError:
    error = _AS_SEEN_BY_THE_LEADER.get(exc.error_code, exc.error_code)
    return KafkaError.with_code(error, exc.message)
