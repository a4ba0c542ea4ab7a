"""A group coordinator on the real coordinator runtime, in memory, on a MockTime.

No broker, no disk, no sockets: the runtime writes to an InMemoryPartitionWriter (the
coordinator's own seam, not a stand-in for anything a user runs) and its timers follow
a MockTime that the test moves. Every test body is a coroutine: answers that wait for a
commit or for the group resolve on the test's own event loop.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from brook.broker.coordinator.in_memory_writer import InMemoryPartitionWriter
from brook.broker.coordinator.internal_topic import InternalTopic
from brook.broker.coordinator.mock_time import MockTime, MockTimer
from brook.broker.coordinator.partition_writer import TopicPartition
from brook.broker.coordinator.records import CoordinatorRecord
from brook.broker.groups.consumer_groups import HeartbeatRequest
from brook.broker.groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from brook.broker.groups.group import JoinRequest, JoinResult, SyncRequest
from brook.broker.metadata.cache import MetadataCache
from brook.broker.metadata.records import PartitionRecord, TopicRecord
from brook.coordinator_state.offsets import CommittedOffset
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode

T = TypeVar("T")

PARTITIONS = 4
SESSION_MS = 10_000
REBALANCE_MS = 30_000
PROTOCOLS = [("range", b"range-metadata")]

DEFAULTS: dict[str, Any] = {
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1_800_000,
    "group.max.size": 2**31 - 1,
    "group.initial.rebalance.delay.ms": 0,
    "offsets.retention.minutes": 10080,
    "offsets.retention.check.interval.ms": 600_000,
    "group.consumer.assignors": ["uniform", "range"],
    "group.consumer.session.timeout.ms": 45_000,
    "group.consumer.heartbeat.interval.ms": 5_000,
    "group.consumer.max.size": 2**31 - 1,
    "group.consumer.migration.policy": "bidirectional",
}


async def settle() -> None:
    """Let the loop run what the last step scheduled (commits, their callbacks)."""
    for _ in range(5):
        await asyncio.sleep(0)


async def answer(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


class Groups:
    """The coordinator and what drives it."""

    def __init__(self, writer: InMemoryPartitionWriter | None = None, **config: Any) -> None:
        self.config = {**DEFAULTS, **{k.replace("_", "."): v for k, v in config.items()}}
        self.time = MockTime()
        self.timer = MockTimer(self.time)
        self.writer = writer or InMemoryPartitionWriter()
        self.topic = InternalTopic(
            OFFSETS_TOPIC, cr.group_partition, lambda: PARTITIONS, lambda: None
        )
        # The cluster's topics as the consumer groups' assignors see them (KIP-848).
        self.topics = MetadataCache()
        self.coordinator = GroupCoordinator(
            self.config, self.topic, self.writer, self.timer, self.time, self.topics
        )

    async def start(self) -> Groups:
        await self.coordinator.start()
        return self

    def sleep(self, ms: int) -> None:
        self.time.sleep(ms)

    def create_topic(self, name: str, partitions: int) -> uuid.UUID:
        topic_id = uuid.uuid4()
        self.topics.apply(
            [TopicRecord(name, topic_id)]
            + [PartitionRecord(topic_id, p, (0,), (0,), 0) for p in range(partitions)]
        )
        return topic_id

    async def heartbeat(self, group_id: str, member_id: str, epoch: int, **fields: Any) -> Any:
        """A ConsumerGroupHeartbeat (KIP-848) of the member; `fields` as HeartbeatRequest's."""
        return await answer(
            self.coordinator.consumer_group_heartbeat(
                HeartbeatRequest(group_id, member_id, epoch, client_id="client", **fields)
            )
        )

    def partition_of(self, group_id: str) -> int:
        return cr.group_partition(group_id, PARTITIONS)

    def tp(self, group_id: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))

    # --- requests -----------------------------------------------------------------------

    def join(
        self,
        group_id: str,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocols: list[tuple[str, bytes]] = PROTOCOLS,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS,
    ) -> JoinResult | Awaitable[JoinResult]:
        return self.coordinator.join(
            JoinRequest(
                group_id=group_id,
                member_id=member_id,
                instance_id=instance_id,
                client_id="client",
                client_host="/127.0.0.1",
                rebalance_timeout_ms=rebalance_ms,
                session_timeout_ms=session_ms,
                protocol_type="consumer",
                protocols=protocols,
                require_known_member_id=False,
            )
        )

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance_id: str | None = None,
    ) -> Any:
        return self.coordinator.sync(
            SyncRequest(group_id, generation, member_id, instance_id, None, None, assignments or {})
        )

    async def stable_member(self, group_id: str, instance_id: str | None = None) -> JoinResult:
        """One member that joined and synced an assignment."""
        joined = await answer(self.join(group_id, instance_id=instance_id))
        error, assignment = await answer(
            self.sync(
                group_id,
                joined.member_id,
                joined.generation_id,
                {joined.member_id: b"assigned"},
                instance_id,
            )
        )
        assert (error, assignment) == (ErrorCode.none, b"assigned")
        return joined

    def commit(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int],
        generation: int = -1,
        member_id: str = "",
    ) -> Any:
        now = self.time()
        return self.coordinator.commit_offsets(
            group_id,
            generation,
            member_id,
            None,
            {key: CommittedOffset(offset, -1, "", now) for key, offset in offsets.items()},
        )

    def offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        error, found = self.coordinator.fetch_offsets(group_id, None)
        assert error == ErrorCode.none, error
        return {key: committed.offset for key, committed in found.items() if committed}

    # --- what was written ---------------------------------------------------------------

    def written(self, group_id: str) -> list[tuple[Any, Any]]:
        """The decoded records of the group's partition, in order."""
        out = []
        for batch in self.writer.read(self.tp(group_id)):
            for record in batch.records:
                assert record.key is not None
                key = cr.decode_key(record.key)
                out.append((key, cr.decode_value(key, record.value)))
        return out


def offset_record(group_id: str, topic: str, partition: int, offset: int) -> CoordinatorRecord:
    return CoordinatorRecord(
        cr.encode_key(cr.OffsetCommitKey(group_id, topic, partition)),
        cr.encode_value(cr.OffsetCommitValue(offset=offset, commit_timestamp=1)),
    )
