"""A transaction coordinator (with the group coordinator its markers reach) on the real
coordinator runtime, in memory, on a MockTime.

No broker, no disk: `__transaction_state`, `__consumer_offsets` and the data partitions
all live in one InMemoryPartitionWriter (the coordinators' own seam), so a test reads
back every record and marker the coordinators wrote.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from brook.broker.coordinator.in_memory_writer import InMemoryPartitionWriter
from brook.broker.coordinator.internal_topic import InternalTopic
from brook.broker.coordinator.mock_time import MockTime, MockTimer
from brook.broker.coordinator.partition_writer import TopicPartition
from brook.broker.groups.coordinator import OFFSETS_TOPIC, GroupCoordinator
from brook.broker.transactions.coordinator import TRANSACTION_STATE_TOPIC, TransactionCoordinator
from brook.broker.transactions.shard import ProducerIdAndEpoch
from brook.coordinator_state.transaction_metadata import TransactionMetadata
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode, KafkaError
from tests.groups.harness import DEFAULTS as GROUP_DEFAULTS

PARTITIONS = 4
TIMEOUT_MS = 60_000

CONFIG: dict[str, Any] = {
    **GROUP_DEFAULTS,
    "transaction.max.timeout.ms": 900_000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
    "transactional.id.expiration.ms": 604_800_000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 3_600_000,
}


async def settle() -> None:
    """Let the loop run the markers' tasks and the commits' callbacks."""
    for _ in range(20):
        await asyncio.sleep(0)


class Transactions:
    def __init__(self, writer: InMemoryPartitionWriter | None = None, **config: Any) -> None:
        self.config = {**CONFIG, **{k.replace("_", "."): v for k, v in config.items()}}
        self.time = MockTime()
        self.timer = MockTimer(self.time)
        self.writer = writer or InMemoryPartitionWriter()
        self.producer_ids = itertools.count(1000)
        self.groups = GroupCoordinator(
            self.config,
            InternalTopic(OFFSETS_TOPIC, cr.group_partition, lambda: PARTITIONS, lambda: None),
            self.writer,
            self.timer,
            self.time,
        )
        self.coordinator = TransactionCoordinator(
            self.config,
            InternalTopic(
                TRANSACTION_STATE_TOPIC,
                cr.transactional_id_partition,
                lambda: PARTITIONS,
                lambda: None,
            ),
            self.writer,
            self.timer,
            self.time,
            self.groups,
            lambda: next(self.producer_ids),
        )

    async def start(self) -> Transactions:
        await self.groups.start()
        await self.coordinator.start()
        return self

    async def init(
        self, transactional_id: str, expected: ProducerIdAndEpoch | None = None
    ) -> tuple[ErrorCode, ProducerIdAndEpoch]:
        result = await self.coordinator.init_producer_id(transactional_id, TIMEOUT_MS, expected)
        await settle()
        return result.error, ProducerIdAndEpoch(result.producer_id, result.producer_epoch)

    async def add(
        self, transactional_id: str, producer: ProducerIdAndEpoch, *partitions: tuple[str, int]
    ) -> ErrorCode:
        return await error_of(
            self.coordinator.add_partitions(transactional_id, producer, list(partitions))
        )

    async def end(
        self, transactional_id: str, producer: ProducerIdAndEpoch, commit: bool
    ) -> ErrorCode:
        error = await error_of(self.coordinator.end_transaction(transactional_id, producer, commit))
        await settle()
        return error

    def state(self, transactional_id: str) -> TransactionMetadata | None:
        return self.coordinator.describe(transactional_id)

    def markers(self, topic: str, partition: int) -> list[tuple[str, int, int]]:
        """(COMMIT or ABORT, producer id, epoch) of each marker in a partition."""
        found = []
        for batch in self.writer.read(TopicPartition(topic, partition)):
            if batch.is_control:
                key = cr.decode_control_key(batch.records[0].key or b"")
                found.append(
                    (cr.ControlRecordType(key.type).name, batch.producer_id, batch.producer_epoch)
                )
        return found

    def stored_states(self, transactional_id: str) -> list[str]:
        """The state names of the id's records in __transaction_state, in order."""
        partition = cr.transactional_id_partition(transactional_id, PARTITIONS)
        states = []
        for batch in self.writer.read(TopicPartition(TRANSACTION_STATE_TOPIC, partition)):
            for record in batch.records:
                key = cr.decode_key(record.key or b"", TRANSACTION_STATE_TOPIC)
                if key != cr.TransactionLogKey(transactional_id):
                    continue
                value = cr.decode_value(key, record.value)
                states.append(
                    "tombstone"
                    if value is None
                    else cr.TransactionStatus(value.transaction_status).name  # type: ignore[union-attr]
                )
        return states


async def error_of(answer: Any) -> ErrorCode:
    try:
        await answer
    except KafkaError as exc:
        return exc.error_code
    return ErrorCode.none
