"""Where share partitions keep their state: the share coordinator of each key (Kafka's
DefaultStatePersister). The key's coordinator is the leader of its `__share_group_state`
partition: this broker's own share coordinator is called directly; another broker's is
sent ReadShareGroupState, WriteShareGroupState, InitializeShareGroupState,
DeleteShareGroupState or ReadShareGroupStateSummary over the inter-broker listener.
Errors come back as the share partition's leader answers them (Kafka's
SharePartition.fetchPersisterError): a coordinator that moved or loads is
COORDINATOR_NOT_AVAILABLE, a fenced epoch NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from kio.static.primitive import i8, i16, i32, i64

from brook.protocol import share_state_records as sr
from brook.protocol.errors import ErrorCode, KafkaError

from .share_coordinator import SHARE_GROUP_STATE_TOPIC, ShareCoordinator, WriteState
from .share_partition import RecordState, StateBatch
from .share_partition_manager import PersistedState

if TYPE_CHECKING:
    from ..coordinator.coordinators import Coordinators
    from ..metadata.cache import MetadataCache
    from ..server.inter_broker import InterBrokerClients

T = TypeVar("T")

# What a share partition's state write or read may fail with, as its leader answers it.
_AS_SEEN_BY_THE_LEADER = {
    ErrorCode.not_coordinator: ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress: ErrorCode.coordinator_not_available,
    ErrorCode.network_exception: ErrorCode.coordinator_not_available,
    ErrorCode.fenced_leader_epoch: ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_state_epoch: ErrorCode.not_leader_or_follower,
}


@dataclass(frozen=True, slots=True)
class StateSummary:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int


class CoordinatorPersister:
    def __init__(
        self,
        coordinators: Coordinators,
        metadata: MetadataCache,
        broker_id: int,
        inter_broker: InterBrokerClients,
    ) -> None:
        self._coordinators = coordinators
        self._metadata = metadata
        self._broker_id = broker_id
        self._inter_broker = inter_broker

    async def _call(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        local: Callable[[ShareCoordinator], Awaitable[T]],
        remote: Callable[[int], Awaitable[T]],
    ) -> T:
        try:
            coordinator = self._coordinators.share
            index = coordinator.partition_of(group_id, topic_id, partition)
            topic = self._metadata.get(SHARE_GROUP_STATE_TOPIC)
            leader = topic.partitions[index].leader if topic is not None else -1
            if leader == self._broker_id:
                return await local(coordinator)
            if leader < 0:
                raise KafkaError.with_code(
                    ErrorCode.coordinator_not_available,
                    f"{SHARE_GROUP_STATE_TOPIC}-{index} has no leader",
                )
            return await remote(leader)
        except KafkaError as exc:
            error = _AS_SEEN_BY_THE_LEADER.get(exc.error_code, exc.error_code)
            raise KafkaError.with_code(error, exc.message) from None

    # --- read and write, for share partitions -------------------------------------------

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> PersistedState | None:
        async def local(coordinator: ShareCoordinator) -> PersistedState | None:
            found = await coordinator.read_state(group_id, topic_id, partition, leader_epoch)
            if found is None:
                return None
            return _persisted(found.state_epoch, found.start_offset, found.batches)

        async def remote(broker_id: int) -> PersistedState | None:
            from kio.schema.read_share_group_state.v0 import request as read0

            response = await self._inter_broker.request(
                broker_id,
                read0.ReadShareGroupStateRequest(
                    group_id=group_id,
                    topics=(
                        read0.ReadStateData(
                            topic_id=topic_id,
                            partitions=(
                                read0.PartitionData(
                                    partition=i32(partition), leader_epoch=i32(leader_epoch)
                                ),
                            ),
                        ),
                    ),
                ),
            )
            result = _one_result(response)
            if result.start_offset == -1 and not result.state_batches:
                return None if result.state_epoch == 0 else PersistedState(result.state_epoch, -1)
            return _persisted(
                result.state_epoch,
                result.start_offset,
                tuple(
                    sr.PersistedStateBatch(
                        b.first_offset, b.last_offset, b.delivery_state, b.delivery_count
                    )
                    for b in result.state_batches
                ),
            )

        return await self._call(group_id, topic_id, partition, local, remote)

    async def write_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        leader_epoch: int,
        state: PersistedState,
    ) -> None:
        batches = tuple(
            sr.PersistedStateBatch(
                b.first_offset, b.last_offset, int(b.delivery_state), b.delivery_count
            )
            for b in state.batches
        )

        async def local(coordinator: ShareCoordinator) -> None:
            await coordinator.write_state(
                WriteState(
                    group_id,
                    topic_id,
                    partition,
                    state.state_epoch,
                    leader_epoch,
                    state.start_offset,
                    batches,
                    state.delivery_complete_count,
                )
            )

        async def remote(broker_id: int) -> None:
            from kio.schema.write_share_group_state.v1 import request as write1

            response = await self._inter_broker.request(
                broker_id,
                write1.WriteShareGroupStateRequest(
                    group_id=group_id,
                    topics=(
                        write1.WriteStateData(
                            topic_id=topic_id,
                            partitions=(
                                write1.PartitionData(
                                    partition=i32(partition),
                                    state_epoch=i32(state.state_epoch),
                                    leader_epoch=i32(leader_epoch),
                                    start_offset=i64(state.start_offset),
                                    delivery_complete_count=i32(state.delivery_complete_count),
                                    state_batches=tuple(
                                        write1.StateBatch(
                                            first_offset=i64(b.first_offset),
                                            last_offset=i64(b.last_offset),
                                            delivery_state=i8(b.delivery_state),
                                            delivery_count=i16(b.delivery_count),
                                        )
                                        for b in batches
                                    ),
                                ),
                            ),
                        ),
                    ),
                ),
            )
            _one_result(response)

        await self._call(group_id, topic_id, partition, local, remote)

    # --- what the group coordinator and the admin APIs ask -------------------------------

    async def initialize_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int, start: int
    ) -> None:
        async def local(coordinator: ShareCoordinator) -> None:
            await coordinator.initialize_state(group_id, topic_id, partition, state_epoch, start)

        async def remote(broker_id: int) -> None:
            from kio.schema.initialize_share_group_state.v0 import request as init0

            response = await self._inter_broker.request(
                broker_id,
                init0.InitializeShareGroupStateRequest(
                    group_id=group_id,
                    topics=(
                        init0.InitializeStateData(
                            topic_id=topic_id,
                            partitions=(
                                init0.PartitionData(
                                    partition=i32(partition),
                                    state_epoch=i32(state_epoch),
                                    start_offset=i64(start),
                                ),
                            ),
                        ),
                    ),
                ),
            )
            _one_result(response)

        await self._call(group_id, topic_id, partition, local, remote)

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        async def local(coordinator: ShareCoordinator) -> None:
            await coordinator.delete_state(group_id, topic_id, partition)

        async def remote(broker_id: int) -> None:
            from kio.schema.delete_share_group_state.v0 import request as delete0

            response = await self._inter_broker.request(
                broker_id,
                delete0.DeleteShareGroupStateRequest(
                    group_id=group_id,
                    topics=(
                        delete0.DeleteStateData(
                            topic_id=topic_id,
                            partitions=(delete0.PartitionData(partition=i32(partition)),),
                        ),
                    ),
                ),
            )
            _one_result(response)

        await self._call(group_id, topic_id, partition, local, remote)

    async def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> StateSummary | None:
        async def local(coordinator: ShareCoordinator) -> StateSummary | None:
            found = await coordinator.read_summary(group_id, topic_id, partition)
            if found is None:
                return None
            return StateSummary(
                found.state_epoch,
                found.leader_epoch,
                found.start_offset,
                found.delivery_complete_count,
            )

        async def remote(broker_id: int) -> StateSummary | None:
            from kio.schema.read_share_group_state_summary.v1 import request as summary1

            response = await self._inter_broker.request(
                broker_id,
                summary1.ReadShareGroupStateSummaryRequest(
                    group_id=group_id,
                    topics=(
                        summary1.ReadStateSummaryData(
                            topic_id=topic_id,
                            partitions=(
                                summary1.PartitionData(
                                    partition=i32(partition), leader_epoch=i32(-1)
                                ),
                            ),
                        ),
                    ),
                ),
            )
            result = _one_result(response)
            if result.start_offset == -1 and result.state_epoch == 0:
                return None
            return StateSummary(
                result.state_epoch,
                result.leader_epoch,
                result.start_offset,
                result.delivery_complete_count,
            )

        return await self._call(group_id, topic_id, partition, local, remote)


def _persisted(
    state_epoch: int, start_offset: int, batches: tuple[sr.PersistedStateBatch, ...]
) -> PersistedState:
    return PersistedState(
        state_epoch,
        start_offset,
        tuple(
            StateBatch(
                b.first_offset, b.last_offset, RecordState(b.delivery_state), b.delivery_count
            )
            for b in batches
            if b.delivery_state in RecordState._value2member_map_
        ),
    )


def _one_result(response: Any) -> Any:
    """The one partition's result of a share-state response, or its error raised."""
    result = response.results[0].partitions[0]
    if result.error_code != ErrorCode.none:
        raise KafkaError.with_code(ErrorCode(result.error_code), result.error_message or "")
    return result
