"""The share coordinator: share partitions' state in `__share_group_state` (KIP-932).

Each share partition (group, topic id, partition) is one key, hashed as Kafka hashes
"group:topicId:partition" to a partition of the topic, whose leader is the key's
coordinator. A write comes from the share partition's leader with the state epoch (the
generation of the state: an older one is FENCED_STATE_EPOCH) and its leader epoch (an
older one is FENCED_LEADER_EPOCH, so a deposed leader cannot overwrite its successor).
The coordinator writes a ShareSnapshot (the whole state) for a key's first write and
after every share.coordinator.snapshot.update.records.per.snapshot updates, and a
ShareUpdate (the batches written) otherwise; replaying them gives the state back when
the partition loads elsewhere.

The topic is not compacted (a snapshot and its updates are different keys whose order
matters), as in Kafka; Kafka prunes records older than every key's last snapshot, which
Brook does not do yet, so the topic keeps growing (README says so).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from brook.protocol import coordinator_records as cr
from brook.protocol import share_state_records as sr
from brook.protocol.errors import ErrorCode, KafkaError
from brook.storage.clock import Clock

from ..coordinator.coordinator_timer import CoordinatorTimer
from ..coordinator.internal_topic import InternalTopic, broker_internal_topic
from ..coordinator.partition_writer import PartitionWriter, TopicPartition
from ..coordinator.records import CoordinatorRecord
from ..coordinator.runtime import CoordinatorRuntime
from ..coordinator.shard import CoordinatorResult
from ..coordinator.timer import Timer

if TYPE_CHECKING:
    from ..metadata.cache import MetadataCache
    from ..metadata.controller import Controller

log = logging.getLogger("brook.share.coordinator")

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
UNINITIALIZED_START_OFFSET = -1


def share_state_partition(key: str, num_partitions: int) -> int:
    """Kafka's Utils.abs(key.hashCode()) % partitions."""
    return cr.group_partition(key, num_partitions)


def share_group_state_topic(
    metadata: MetadataCache, controller: Controller, config: Callable[[], Any]
) -> InternalTopic:
    """`__share_group_state` as Kafka makes it: deleted by pruning, never compacted."""
    return broker_internal_topic(
        SHARE_GROUP_STATE_TOPIC,
        share_state_partition,
        metadata,
        controller,
        config,
        "share.coordinator.state.topic.",
        "producer",
        lambda settings: {
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "min.insync.replicas": str(settings["share.coordinator.state.topic.min.isr"]),
        },
    )


@dataclass
class ShareGroupOffset:
    """What the coordinator holds of one share partition (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int = sr.UNKNOWN_DELIVERY_COMPLETE_COUNT
    create_timestamp: int = 0
    write_timestamp: int = 0
    batches: tuple[sr.PersistedStateBatch, ...] = ()
    updates_since_snapshot: int = 0


@dataclass(frozen=True)
class WriteState:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[sr.PersistedStateBatch, ...]
    delivery_complete_count: int = sr.UNKNOWN_DELIVERY_COMPLETE_COUNT


def merge_batches(
    stored: Iterable[sr.PersistedStateBatch],
    written: Iterable[sr.PersistedStateBatch],
    start_offset: int,
) -> tuple[sr.PersistedStateBatch, ...]:
    """The stored batches overlaid by the written ones (the newer state of an offset
    wins: a written batch over a stored one, a later written one over an earlier), cut
    below the start offset, as runs of one state and delivery count.

    Worked out on the ranges' ends, never offset by offset (Kafka's combineStateBatches
    merges ranges too): a batch may span any number of offsets, and one a client sends
    must not cost the broker memory or time in proportion to its span. A batch that
    ends before it begins covers nothing."""
    batches = [
        (max(batch.first_offset, start_offset), batch.last_offset + 1, priority, batch)
        for priority, batch in enumerate((*stored, *written))
        if batch.last_offset >= max(batch.first_offset, start_offset)
    ]
    batches.sort(key=lambda item: item[0])
    points = sorted({point for first, end, _, _ in batches for point in (first, end)})
    active: list[tuple[int, int, sr.PersistedStateBatch]] = []  # (-priority, end, batch)
    merged: list[sr.PersistedStateBatch] = []
    next_batch = 0
    for point, following in itertools.pairwise(points):
        while next_batch < len(batches) and batches[next_batch][0] <= point:
            _, end, priority, batch = batches[next_batch]
            heapq.heappush(active, (-priority, end, batch))
            next_batch += 1
        while active and active[0][1] <= point:
            heapq.heappop(active)
        if not active:
            continue
        # The newest batch covering [point, following) gives it its state.
        winner = active[0][2]
        state, count = winner.delivery_state, winner.delivery_count
        last = merged[-1] if merged else None
        if (
            last is not None
            and last.last_offset == point - 1
            and (last.delivery_state, last.delivery_count) == (state, count)
        ):
            merged[-1] = sr.PersistedStateBatch(last.first_offset, following - 1, state, count)
        else:
            merged.append(sr.PersistedStateBatch(point, following - 1, state, count))
    return tuple(merged)


@dataclass
class ShareCoordinatorShard:
    tp: TopicPartition
    clock: Clock
    snapshot_every: Callable[[], int]
    states: dict[tuple[str, uuid.UUID, int], ShareGroupOffset] = field(default_factory=dict)

    # --- replay -------------------------------------------------------------------------

    def replay(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        try:
            decoded = sr.decode_key(key)
        except cr.CoordinatorRecordError as exc:
            log.warning("%s: skipping the record at offset %d: %s", self.tp, offset, exc)
            return
        at = (decoded.group_id, decoded.topic_id, decoded.partition)
        if value is None:
            self.states.pop(at, None)
            return
        state = sr.decode_value(decoded.record_type, value)
        if isinstance(state, sr.ShareSnapshotValue):
            self.states[at] = ShareGroupOffset(
                state.snapshot_epoch,
                state.state_epoch,
                state.leader_epoch,
                state.start_offset,
                state.delivery_complete_count,
                state.create_timestamp,
                state.write_timestamp,
                state.state_batches,
            )
            return
        current = self.states.get(at)
        if current is None or current.snapshot_epoch != state.snapshot_epoch:
            return  # an update of a snapshot that is gone
        if state.start_offset != UNINITIALIZED_START_OFFSET:
            current.start_offset = state.start_offset
        if state.leader_epoch != -1:
            current.leader_epoch = state.leader_epoch
        current.delivery_complete_count = state.delivery_complete_count
        current.batches = merge_batches(current.batches, state.state_batches, current.start_offset)
        current.updates_since_snapshot += 1

    def replay_end_transaction_marker(
        self, producer_id: int, producer_epoch: int, result: cr.ControlRecordType
    ) -> None:
        """The share coordinator writes no transactions."""

    def on_loaded(self) -> None:
        if self.states:
            log.info("%s: loaded the state of %d share partition(s)", self.tp, len(self.states))

    def on_unloaded(self) -> None:
        self.states.clear()

    # --- operations ---------------------------------------------------------------------

    def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> CoordinatorResult[ShareGroupOffset | None]:
        """A share partition's state for its leader; a newer leader epoch is written down,
        so that the previous leader's writes are refused from now on."""
        current = self.states.get((group_id, topic_id, partition))
        if current is None:
            return CoordinatorResult([], None)
        if leader_epoch < 0:  # a reader that is no leader (a tool): nothing to fence
            return CoordinatorResult([], current)
        if leader_epoch < current.leader_epoch:
            raise KafkaError.with_code(
                ErrorCode.fenced_leader_epoch,
                f"Leader epoch {leader_epoch} is older than {current.leader_epoch}",
            )
        if leader_epoch == current.leader_epoch:
            return CoordinatorResult([], current)
        record = self._update(
            WriteState(group_id, topic_id, partition, current.state_epoch, leader_epoch, -1, ()),
            current,
        )
        return CoordinatorResult([record], current)

    def write(self, request: WriteState) -> CoordinatorResult[None]:
        at = (request.group_id, request.topic_id, request.partition)
        current = self.states.get(at)
        if current is not None:
            if request.state_epoch < current.state_epoch:
                raise KafkaError.with_code(
                    ErrorCode.fenced_state_epoch,
                    f"State epoch {request.state_epoch} of {request.group_id}:"
                    f"{request.topic_id}:{request.partition} is older than"
                    f" {current.state_epoch}",
                )
            if 0 <= request.leader_epoch < current.leader_epoch:
                raise KafkaError.with_code(
                    ErrorCode.fenced_leader_epoch,
                    f"Leader epoch {request.leader_epoch} is older than {current.leader_epoch}",
                )
        return CoordinatorResult([self._update(request, current)], None)

    def _update(self, request: WriteState, current: ShareGroupOffset | None) -> CoordinatorRecord:
        now = self.clock()
        key_of = sr.ShareStateKey
        if current is None or current.updates_since_snapshot >= self.snapshot_every():
            start = (
                request.start_offset
                if request.start_offset != UNINITIALIZED_START_OFFSET or current is None
                else current.start_offset
            )
            batches = merge_batches(
                current.batches if current is not None else (), request.batches, start
            )
            value: sr.ShareStateValue = sr.ShareSnapshotValue(
                snapshot_epoch=current.snapshot_epoch + 1 if current is not None else 0,
                state_epoch=request.state_epoch,
                leader_epoch=max(request.leader_epoch, 0),
                start_offset=start,
                delivery_complete_count=request.delivery_complete_count,
                create_timestamp=now,
                write_timestamp=now,
                state_batches=batches,
            )
            key = key_of(sr.SNAPSHOT_TYPE, request.group_id, request.topic_id, request.partition)
        else:
            value = sr.ShareUpdateValue(
                snapshot_epoch=current.snapshot_epoch,
                leader_epoch=request.leader_epoch,
                start_offset=request.start_offset,
                delivery_complete_count=request.delivery_complete_count,
                state_batches=request.batches,
            )
            key = key_of(sr.UPDATE_TYPE, request.group_id, request.topic_id, request.partition)
        return CoordinatorRecord(sr.encode_key(key), sr.encode_value(value))

    def initialize(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        start_offset: int,
    ) -> CoordinatorResult[None]:
        """A fresh state (the group coordinator's InitializeShareGroupState: a new share
        partition, or offsets altered): a snapshot with nothing in flight, whatever was
        there. An older state epoch than the stored one is FENCED_STATE_EPOCH."""
        current = self.states.get((group_id, topic_id, partition))
        if current is not None and state_epoch < current.state_epoch:
            raise KafkaError.with_code(
                ErrorCode.fenced_state_epoch,
                f"State epoch {state_epoch} is older than {current.state_epoch}",
            )
        if current is not None:
            # A new state always fences the share partition that read the old one (an
            # empty group's epoch, which Kafka takes for the state epoch, may not have
            # moved since).
            state_epoch = max(state_epoch, current.state_epoch + 1)
        now = self.clock()
        value = sr.ShareSnapshotValue(
            snapshot_epoch=current.snapshot_epoch + 1 if current is not None else 0,
            state_epoch=state_epoch,
            leader_epoch=current.leader_epoch if current is not None else 0,
            start_offset=start_offset,
            delivery_complete_count=(
                sr.UNKNOWN_DELIVERY_COMPLETE_COUNT
                if start_offset == UNINITIALIZED_START_OFFSET
                else 0
            ),
            create_timestamp=now,
            write_timestamp=now,
        )
        key = sr.ShareStateKey(sr.SNAPSHOT_TYPE, group_id, topic_id, partition)
        return CoordinatorResult(
            [CoordinatorRecord(sr.encode_key(key), sr.encode_value(value))], None
        )

    def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> CoordinatorResult[None]:
        if (group_id, topic_id, partition) not in self.states:
            return CoordinatorResult([], None)
        key = sr.ShareStateKey(sr.SNAPSHOT_TYPE, group_id, topic_id, partition)
        return CoordinatorResult([CoordinatorRecord(sr.encode_key(key), None)], None)


class ShareCoordinator:
    def __init__(
        self,
        config: Callable[[], Any],
        topic: InternalTopic,
        writer: PartitionWriter,
        timer: Timer,
        clock: Clock,
    ) -> None:
        def build_shard(tp: TopicPartition, _timer: CoordinatorTimer) -> ShareCoordinatorShard:
            return ShareCoordinatorShard(
                tp,
                clock,
                lambda: int(config()["share.coordinator.snapshot.update.records.per.snapshot"]),
            )

        self.runtime: CoordinatorRuntime[ShareCoordinatorShard] = CoordinatorRuntime(
            topic, writer, timer, clock, build_shard
        )

    async def start(self) -> None:
        await self.runtime.start()

    def on_election(self, partition: int, empty: bool) -> None:
        self.runtime.on_election(partition, empty)

    def on_resignation(self, partition: int) -> None:
        self.runtime.on_resignation(partition)

    def partition_of(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return self.runtime.partition_for(sr.coordinator_key(group_id, topic_id, partition))

    async def read_state(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> ShareGroupOffset | None:
        return await self.runtime.schedule_write_operation(
            "read-share-group-state",
            self.partition_of(group_id, topic_id, partition),
            lambda shard: shard.read(group_id, topic_id, partition, leader_epoch),
        )

    async def write_state(self, request: WriteState) -> None:
        await self.runtime.schedule_write_operation(
            "write-share-group-state",
            self.partition_of(request.group_id, request.topic_id, request.partition),
            lambda shard: shard.write(request),
        )

    async def initialize_state(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        start_offset: int,
    ) -> None:
        await self.runtime.schedule_write_operation(
            "initialize-share-group-state",
            self.partition_of(group_id, topic_id, partition),
            lambda shard: shard.initialize(
                group_id, topic_id, partition, state_epoch, start_offset
            ),
        )

    async def read_summary(
        self, group_id: str, topic_id: uuid.UUID, partition: int
    ) -> ShareGroupOffset | None:
        """The state as committed, without a leader epoch to record (DescribeShareGroupOffsets)."""
        index = self.partition_of(group_id, topic_id, partition)
        await self.runtime.writes_committed(index)
        return self.runtime.schedule_read_operation(
            index, lambda shard: shard.states.get((group_id, topic_id, partition))
        )

    async def delete_state(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        await self.runtime.schedule_write_operation(
            "delete-share-group-state",
            self.partition_of(group_id, topic_id, partition),
            lambda shard: shard.delete(group_id, topic_id, partition),
        )
