"""The group coordinator: Kafka's classic group protocol over the coordinator runtime.

Each group lives in the shard (shard.py) of its `__consumer_offsets` partition; this
service finds it, runs the request there, and turns what went wrong into the error the
API answers: NOT_COORDINATOR for a partition this broker does not serve (or cannot
write), COORDINATOR_LOAD_IN_PROGRESS while it loads, COORDINATOR_NOT_AVAILABLE when the
topic cannot be created. Each method answers at once, or with an awaitable when the
answer waits for the group or for its records to be committed; the state changes it
makes are made at once either way, so pipelined requests apply in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from brook.coordinator_state.offsets import CommittedOffset
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import CoordinatorNotAvailableError, ErrorCode, KafkaError
from brook.storage.clock import Clock

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.internal_topic import InternalTopic, broker_internal_topic
from ..coordinator.partition_writer import PartitionWriter, TopicPartition
from ..coordinator.records import TransactionalProducer
from ..coordinator.runtime import CoordinatorRuntime
from ..coordinator.shard import CoordinatorResult
from ..coordinator.timer import Timer
from ..coordinator.write_errors import coordinator_error
from .consumer_group import ConsumerGroup
from .consumer_groups import HeartbeatRequest, HeartbeatResponse, TopicImage, validate_heartbeat
from .group import Group, JoinRequest, JoinResult, SyncRequest
from .group_configs import GroupConfigs
from .shard import GroupCoordinatorShard, OffsetKey, RebalanceStats, SyncAnswer
from .share_group import ShareGroup
from .share_groups import ShareHeartbeatRequest, ShareHeartbeatResponse, validate_share_heartbeat

if TYPE_CHECKING:
    from ..metadata.cache import MetadataCache
    from ..metadata.controller import Controller

log = logging.getLogger("brook.groups")

OFFSETS_TOPIC = cr.CONSUMER_OFFSETS_TOPIC

T = TypeVar("T")
Answer: TypeAlias = T | Awaitable[T]


def offsets_topic(
    metadata: MetadataCache, controller: Controller, config: Callable[[], Any]
) -> InternalTopic:
    """`__consumer_offsets` as the broker keeps it (offsets.topic.* settings)."""
    return broker_internal_topic(
        OFFSETS_TOPIC,
        cr.group_partition,
        metadata,
        controller,
        config,
        "offsets.topic.",
        "producer",
    )


class GroupCoordinator:
    def __init__(
        self,
        config: Any,
        topic: InternalTopic,
        writer: PartitionWriter,
        timer: Timer,
        clock: Clock,
        topics: TopicImage | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        # Rebalances of every group coordinated here, read by /metrics.
        self.rebalance_stats = RebalanceStats()

        def build_shard(tp: TopicPartition, shard_timer: CoordinatorTimer) -> GroupCoordinatorShard:
            return GroupCoordinatorShard(
                tp, shard_timer, config, clock, self.rebalance_stats, topics, group_configs
            )

        self.runtime: CoordinatorRuntime[GroupCoordinatorShard] = CoordinatorRuntime(
            topic, writer, timer, clock, build_shard
        )

    async def start(self) -> None:
        """Load the groups of every partition of `__consumer_offsets`."""
        await self.runtime.start()

    def ensure_topic(self) -> None:
        """Create `__consumer_offsets` the first time a client looks for a coordinator."""
        self.runtime.ensure_topic()

    def on_election(self, partition: int, empty: bool) -> None:
        """This broker leads a partition of `__consumer_offsets` now: load its groups."""
        self.runtime.on_election(partition, empty)

    def on_resignation(self, partition: int) -> None:
        self.runtime.on_resignation(partition)

    def complete_transaction(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        result: cr.ControlRecordType,
    ) -> asyncio.Future[None]:
        """The transaction coordinator's marker for one `__consumer_offsets` partition:
        the offsets a transaction committed there become visible (or are dropped)."""
        return self.runtime.schedule_transaction_completion(
            partition, producer_id, producer_epoch, coordinator_epoch, result
        )

    # --- what the admin APIs read -----------------------------------------------------

    @property
    def groups(self) -> dict[str, Group]:
        """Every group this broker coordinates, by id."""
        return {
            group_id: group
            for shard in self.runtime.active_shards()
            for group_id, group in shard.groups.items()
        }

    def group(self, group_id: str) -> Group | None:
        shard = self._shard_if_loaded(group_id)
        return shard.groups.get(group_id) if shard is not None else None

    def list_groups(self) -> Iterator[Group]:
        for shard in self.runtime.active_shards():
            yield from shard.groups.values()

    def list_consumer_groups(self) -> Iterator[ConsumerGroup]:
        """Kafka 4's consumer groups (KIP-848) this broker coordinates."""
        for shard in self.runtime.active_shards():
            yield from shard.consumer_groups.values()

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        shard = self._shard_if_loaded(group_id)
        return shard.consumer_groups.get(group_id) if shard is not None else None

    def consumer_group_describe(
        self, group_id: str
    ) -> tuple[ErrorCode, ConsumerGroup | None, str | None]:
        """The group as its coordinator has it: an error, the group, the assignor."""
        try:
            group = self.runtime.schedule_read_operation(
                self._partition(group_id), lambda shard: shard.consumer_groups.get(group_id)
            )
        except KafkaError as exc:
            return coordinator_error(exc), None, None
        if group is None:
            return ErrorCode.group_id_not_found, None, None
        assignor = group.preferred_assignor() or self.config["group.consumer.assignors"][0]
        return ErrorCode.none, group, assignor

    # --- Kafka 4's consumer group protocol ------------------------------------------------

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> Answer[HeartbeatResponse]:
        if not request.group_id:
            return HeartbeatResponse(ErrorCode.invalid_group_id, "GroupId can't be empty.")
        invalid = validate_heartbeat(request, self.config["group.consumer.assignors"])
        if invalid is not None:
            log.info(
                "ConsumerGroupHeartbeat of member %s of group %s refused: %s: %s",
                request.member_id,
                request.group_id,
                invalid.error_code.name.upper(),
                invalid.message,
            )
            return HeartbeatResponse(invalid.error_code, invalid.message)
        return self._write(
            "consumer-group-heartbeat",
            request.group_id,
            lambda shard: shard.consumer_group_heartbeat(request),
            lambda error: HeartbeatResponse(error),
        )

    # --- share groups (KIP-932) -----------------------------------------------------------

    def share_group_heartbeat(
        self, request: ShareHeartbeatRequest
    ) -> Answer[ShareHeartbeatResponse]:
        if not request.group_id:
            return ShareHeartbeatResponse(ErrorCode.invalid_request, "GroupId can't be empty.")
        invalid = validate_share_heartbeat(request)
        if invalid is not None:
            log.info(
                "ShareGroupHeartbeat of member %s of group %s refused: %s",
                request.member_id,
                request.group_id,
                invalid.message,
            )
            return ShareHeartbeatResponse(invalid.error_code, invalid.message)
        return self._write(
            "share-group-heartbeat",
            request.group_id,
            lambda shard: shard.share_group_heartbeat(request),
            lambda error: ShareHeartbeatResponse(error),
        )

    def share_group_describe(self, group_id: str) -> tuple[ErrorCode, ShareGroup | None]:
        try:
            group = self.runtime.schedule_read_operation(
                self._partition(group_id), lambda shard: shard.share_groups.get(group_id)
            )
        except KafkaError as exc:
            return coordinator_error(exc), None
        if group is None:
            return ErrorCode.group_id_not_found, None
        return ErrorCode.none, group

    async def alter_share_group_offsets(
        self, group_id: str, partitions: dict[Any, frozenset[int]]
    ) -> int:
        """Mark the partitions initialized for a new state; the state epoch to write it
        with. Raises the KafkaError to answer (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...)."""
        try:
            return await self.runtime.schedule_write_operation(
                "alter-share-group-offsets",
                self._partition(group_id),
                lambda shard: shard.alter_share_group_offsets(group_id, partitions),
            )
        except KafkaError as exc:
            raise KafkaError.with_code(coordinator_error(exc), exc.message) from None

    def share_offsets_to_delete(
        self, group_id: str, topic_ids: list[Any]
    ) -> dict[Any, frozenset[int]]:
        """The initialized partitions of the topics, of an empty share group."""
        try:
            return self.runtime.schedule_read_operation(
                self._partition(group_id),
                lambda shard: shard.share.offsets_to_delete(group_id, topic_ids),
            )
        except KafkaError as exc:
            raise KafkaError.with_code(coordinator_error(exc), exc.message) from None

    async def share_offsets_deleted(self, group_id: str, topic_ids: list[Any]) -> None:
        await self.runtime.schedule_write_operation(
            "delete-share-group-offsets",
            self._partition(group_id),
            lambda shard: shard.share.offsets_deleted(group_id, topic_ids),
        )

    def share_group(self, group_id: str) -> ShareGroup | None:
        shard = self._shard_if_loaded(group_id)
        return shard.share_groups.get(group_id) if shard is not None else None

    def list_share_groups(self) -> Iterator[ShareGroup]:
        for shard in self.runtime.active_shards():
            yield from shard.share_groups.values()

    def validate_fetch_member(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode:
        try:
            return self.runtime.schedule_read_operation(
                self._partition(group_id),
                lambda shard: shard.validate_fetch_member(group_id, member_id, member_epoch),
            )
        except KafkaError as exc:
            return coordinator_error(exc)

    # --- the group protocol -----------------------------------------------------------

    def join(self, request: JoinRequest) -> Answer[JoinResult]:
        if not request.group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id=request.member_id)
        return self._write(
            "classic-group-join",
            request.group_id,
            lambda shard: shard.join(request),
            lambda error: JoinResult(error, member_id=request.member_id),
        )

    def sync(self, request: SyncRequest) -> Answer[SyncAnswer]:
        if not request.group_id:
            return ErrorCode.invalid_group_id, b""
        return self._write(
            "classic-group-sync",
            request.group_id,
            lambda shard: shard.sync(request),
            lambda error: (error, b""),
        )

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        try:
            return self.runtime.schedule_read_operation(
                self._partition(group_id),
                lambda shard: shard.heartbeat(group_id, generation_id, member_id, instance_id),
            )
        except KafkaError as exc:
            if exc.error_code is ErrorCode.coordinator_load_in_progress:
                return ErrorCode.none  # as Kafka: the member carries on while it loads
            return coordinator_error(exc)

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> Answer[tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]]:
        return self._write(
            "classic-group-leave",
            group_id,
            lambda shard: shard.leave(group_id, members),
            lambda error: (error, []),
        )

    # --- offsets ----------------------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[OffsetKey, CommittedOffset],
        api_version: int = 9,
    ) -> Answer[ErrorCode]:
        """The group's answer to an OffsetCommit: NONE once the offsets are stored."""
        return self._write(
            "commit-offset",
            group_id,
            lambda shard: shard.commit_offsets(
                group_id, generation_id, member_id, instance_id, offsets, api_version
            ),
            lambda error: error,
            too_large=ErrorCode.invalid_commit_offset_size,
        )

    def commit_transactional_offsets(
        self,
        group_id: str,
        producer: TransactionalProducer,
        generation_id: int,
        member_id: str,
        instance_id: str | None,
        offsets: dict[OffsetKey, CommittedOffset],
    ) -> Answer[ErrorCode]:
        """TxnOffsetCommit: NONE once the offsets are written in the transaction."""
        return self._write(
            "txn-commit-offset",
            group_id,
            lambda shard: shard.commit_transactional_offsets(
                group_id, producer, generation_id, member_id, instance_id, offsets
            ),
            lambda error: error,
            too_large=ErrorCode.invalid_commit_offset_size,
        )

    def unstable_offsets(self, group_id: str, partitions: list[OffsetKey]) -> set[OffsetKey]:
        """The partitions whose offset an open transaction may still change (OffsetFetch
        with require_stable answers UNSTABLE_OFFSET_COMMIT for them)."""
        try:
            return self.runtime.schedule_read_operation(
                self._partition(group_id),
                lambda shard: {
                    key
                    for key in partitions
                    if shard.has_pending_transactional_offsets(group_id, key)
                },
            )
        except KafkaError:
            return set()

    async def writes_committed(self, group_id: str) -> None:
        """Wait until the group's partition has committed every write so far (a read
        answered after it shows only committed offsets). A coordinator that cannot answer
        is left for the read itself to report."""
        with contextlib.suppress(KafkaError):
            await self.runtime.writes_committed(self._partition(group_id))

    def fetch_offsets(
        self, group_id: str, partitions: list[OffsetKey] | None
    ) -> tuple[ErrorCode, dict[OffsetKey, CommittedOffset | None]]:
        try:
            found = self.runtime.schedule_read_operation(
                self._partition(group_id), lambda shard: shard.fetch_offsets(group_id, partitions)
            )
        except KafkaError as exc:
            return coordinator_error(exc), {}
        return ErrorCode.none, found

    def delete_offsets(
        self, group_id: str, partitions: list[OffsetKey]
    ) -> Answer[tuple[ErrorCode, dict[OffsetKey, ErrorCode]]]:
        return self._write(
            "delete-offsets",
            group_id,
            lambda shard: shard.delete_offsets(group_id, partitions),
            lambda error: (error, {}),
        )

    def delete_group(self, group_id: str) -> Answer[ErrorCode]:
        return self._write(
            "delete-group", group_id, lambda shard: shard.delete_group(group_id), lambda e: e
        )

    # --- plumbing ---------------------------------------------------------------------

    def _partition(self, group_id: str) -> int:
        try:
            return self.runtime.partition_for(group_id)
        except KafkaError as exc:
            log.warning("Cannot create %s: %s", OFFSETS_TOPIC, exc.message)
            raise CoordinatorNotAvailableError(exc.message) from None

    def _shard_if_loaded(self, group_id: str) -> GroupCoordinatorShard | None:
        count = self.runtime.topic.partition_count()
        if count is None:
            return None
        partition = self.runtime.topic.partition_of(group_id, count)
        try:
            return self.runtime.schedule_read_operation(partition, lambda shard: shard)
        except KafkaError:
            return None

    def _write(
        self,
        name: str,
        group_id: str,
        operation: Callable[[GroupCoordinatorShard], CoordinatorResult[Any]],
        on_error: Callable[[ErrorCode], T],
        too_large: ErrorCode = ErrorCode.unknown_server_error,
    ) -> Answer[T]:
        """Run a write operation on the group's shard. Its answer may itself be a future
        (a member waiting for its group): both are awaited."""
        try:
            partition = self._partition(group_id)
        except KafkaError as exc:
            return on_error(exc.error_code)
        future = self.runtime.schedule_write_operation(name, partition, operation)
        if future.done():
            error = future.exception()
            if error is not None:
                assert isinstance(error, KafkaError)
                return on_error(coordinator_error(error, too_large))
            answer = future.result()
            if not isinstance(answer, asyncio.Future):
                return answer  # type: ignore[no-any-return]
            if answer.done():
                return answer.result()  # type: ignore[no-any-return]
        return _settle(future, on_error, too_large)


async def _settle(
    future: asyncio.Future[Any], on_error: Callable[[ErrorCode], T], too_large: ErrorCode
) -> T:
    try:
        answer = await future
    except KafkaError as exc:
        return on_error(coordinator_error(exc, too_large))
    if isinstance(answer, asyncio.Future):
        answer = await answer
    return answer  # type: ignore[no-any-return]
