"""Brokers of one test process replicating to each other, with the test as their
controller.

The cluster's own controller (ZooKeeper, tests/cluster/) decides leaders and ISRs and
every broker learns them from its watches, as metadata records. Here the test decides
and applies the same records to every broker, so that the replication protocol between
real brokers over real sockets (follower fetches, truncation, the ISR, the high
watermark, acks=all) is tested on its own, with each step in the test's hands. A
leader's ISR change is written as ZooKeeper writes it: only against the partition epoch
the leader knows (a conditional write), then applied on every broker.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brook.broker.metadata.cache import PartitionRegistration
from brook.broker.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicConfigsRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from brook.broker.replica.partition import Partition
from brook.broker.testing import BrokerThread, wait_until
from brook.broker.transactions.producer_ids import STATE_FILE

# Quick enough to see the ISR shrink within a test.
REPLICATION_OVERRIDES = {
    "replica.lag.time.max.ms": 1500,
    "replica.fetch.wait.max.ms": 200,
    "replica.fetch.backoff.ms": 100,
}


@dataclass
class ScriptedController:
    root: Path
    overrides: dict[str, Any] = field(default_factory=dict)
    brokers: dict[int, BrokerThread] = field(default_factory=dict)
    ports: dict[int, int] = field(default_factory=dict)
    # (topic, index) -> the registration in force, as the controller wrote it.
    registrations: dict[tuple[str, int], PartitionRecord] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, Any]] = field(default_factory=dict)

    # --- brokers ------------------------------------------------------------------------

    def start(self, broker_id: int) -> BrokerThread:
        """Start (or restart, on its data dir and port) a broker, tell it the cluster's
        state, and tell the others it is alive."""
        overrides = {**REPLICATION_OVERRIDES, **self.overrides, "broker.id": broker_id}
        data_dir = self.root / f"broker-{broker_id}"
        if not data_dir.exists():
            # Producer ids must never repeat across brokers (a duplicate id, epoch and
            # sequence is taken for a retry and not written). A cluster reserves their
            # blocks in ZooKeeper; here each broker starts in a range of its own.
            data_dir.mkdir(parents=True)
            (data_dir / STATE_FILE).write_text(json.dumps({"next_block": broker_id * 10**9}))
        thread = BrokerThread(data_dir, overrides)
        if broker_id in self.ports:
            thread.port = self.ports[broker_id]
            thread.config = type(thread.config).build(
                {}, {}, _overrides_with_port(thread, overrides)
            )
        self.ports[broker_id] = thread.port
        thread.start()
        thread.call(
            lambda: setattr(thread.broker.replicas, "alter_partition", self._alter_on(broker_id))
        )
        self.brokers[broker_id] = thread
        # The newcomer learns everything; the others learn of it.
        everything: list[MetadataRecord] = [self._registration(b) for b in self.brokers]
        for name, topic_id in self.topic_ids.items():
            everything.append(TopicRecord(name, topic_id))
            everything += [r for (t, _), r in sorted(self.registrations.items()) if t == name]
            if self.topic_configs.get(name):
                everything.append(TopicConfigsRecord(topic_id, self.topic_configs[name]))
        _apply_on(thread, everything)
        for other_id, other in self.brokers.items():
            if other_id != broker_id:
                _apply_on(other, [self._registration(broker_id)])
        return thread

    def stop(self, broker_id: int, kill: bool = False) -> None:
        """Stop a broker (its thread, cleanly) and tell the others it is gone."""
        thread = self.brokers.pop(broker_id)
        thread.stop()
        for other in self.brokers.values():
            _apply_on(other, [UnregisterBrokerRecord(broker_id)])

    def _registration(
        self, broker_id: int, in_controlled_shutdown: bool = False
    ) -> RegisterBrokerRecord:
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", self.ports[broker_id])
        return RegisterBrokerRecord(broker_id, (endpoint,), None, in_controlled_shutdown)

    def register(self, broker_id: int, in_controlled_shutdown: bool = False) -> None:
        """A broker's registration changed (its own write, as when it starts stopping)."""
        self._apply_everywhere([self._registration(broker_id, in_controlled_shutdown)])

    def close(self) -> None:
        for broker_id in list(self.brokers):
            self.brokers.pop(broker_id).stop()

    # --- topics and leaders -------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        replicas: list[int],
        partitions: int = 1,
        configs: dict[str, Any] | None = None,
    ) -> None:
        """Every partition on `replicas`, led by the first, all of them in sync."""
        topic_id = uuid.uuid4()
        self.topic_ids[name] = topic_id
        self.topic_configs[name] = dict(configs or {})
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        for index in range(partitions):
            record = PartitionRecord(topic_id, index, tuple(replicas), tuple(replicas), replicas[0])
            self.registrations[(name, index)] = record
            records.append(record)
        if configs:
            records.append(TopicConfigsRecord(topic_id, dict(configs)))
        self._apply_everywhere(records)

    def elect(self, name: str, index: int, leader: int, isr: list[int] | None = None) -> None:
        """A new leader (and ISR) with a new leader epoch, as the controller elects one."""
        self._apply_everywhere([self._elected(name, index, leader, isr)])

    def elect_all(self, name: str, leader: int, only_on: list[int] | None = None) -> None:
        """A new leader for every partition of a topic, in one change (as a controlled
        shutdown hands over a broker's partitions); told to the brokers of `only_on`
        alone when given (the others learn it late)."""
        indexes = [index for topic, index in self.registrations if topic == name]
        records: list[MetadataRecord] = [
            self._elected(name, index, leader, None) for index in indexes
        ]
        for broker_id in self.brokers if only_on is None else only_on:
            _apply_on(self.brokers[broker_id], records)

    def _elected(
        self, name: str, index: int, leader: int, isr: list[int] | None
    ) -> PartitionRecord:
        """The partition's next registration with `leader`, now the one in force."""
        current = self.registrations[(name, index)]
        record = PartitionRecord(
            current.topic_id,
            index,
            current.replicas,
            tuple(isr if isr is not None else current.isr),
            leader,
            current.leader_epoch + 1,
            current.partition_epoch + 1,
        )
        self.registrations[(name, index)] = record
        return record

    def remove_from_isr(self, name: str, index: int, broker_id: int) -> None:
        """The controller takes a broker out of an ISR: the leader and its epoch stay,
        the partition epoch moves on."""
        current = self.registrations[(name, index)]
        record = current._replace(
            isr=tuple(b for b in current.isr if b != broker_id),
            partition_epoch=current.partition_epoch + 1,
        )
        self.registrations[(name, index)] = record
        self._apply_everywhere([record])

    def registration(self, name: str, index: int = 0) -> PartitionRecord:
        return self.registrations[(name, index)]

    def _apply_everywhere(self, records: list[MetadataRecord]) -> None:
        for thread in self.brokers.values():
            _apply_on(thread, records)

    def _alter_on(
        self, broker_id: int
    ) -> Callable[[Partition, list[int]], asyncio.Future[PartitionRegistration]]:
        """The leader's AlterPartition: a write conditional on the partition epoch it
        knows, applied on every broker (each on its own loop) when it is accepted."""

        def alter(
            partition: Partition, new_isr: list[int]
        ) -> asyncio.Future[PartitionRegistration]:
            future: asyncio.Future[PartitionRegistration] = (
                asyncio.get_running_loop().create_future()
            )
            key = (partition.topic, partition.index)
            current = self.registrations[key]
            if (
                current.partition_epoch != partition.partition_epoch
                or current.leader != broker_id
                or current.leader_epoch != partition.leader_epoch
            ):
                future.set_exception(RuntimeError("the partition epoch moved on"))
                return future
            record = PartitionRecord(
                current.topic_id,
                current.partition_id,
                current.replicas,
                tuple(new_isr),
                current.leader,
                current.leader_epoch,
                current.partition_epoch + 1,
            )
            self.registrations[key] = record
            for thread in list(self.brokers.values()):
                assert thread.loop is not None
                thread.loop.call_soon_threadsafe(thread.broker.metadata_publisher.apply, [record])
            future.set_result(
                PartitionRegistration(
                    record.replicas,
                    record.isr,
                    record.leader,
                    record.leader_epoch,
                    record.partition_epoch,
                )
            )
            return future

        return alter

    # --- reading a broker's state -------------------------------------------------------

    def partition_state(self, broker_id: int, name: str, index: int = 0) -> dict[str, Any]:
        thread = self.brokers[broker_id]

        def read() -> dict[str, Any]:
            partition = thread.broker.replicas.partition(name, index)
            return {
                "log_end_offset": partition.log_end_offset,
                "high_watermark": partition.high_watermark,
                "log_start_offset": partition.log_start_offset,
                "last_stable_offset": partition.last_stable_offset,
                "isr": list(partition.isr),
                "leader_epoch": partition.leader_epoch,
                "epochs": [
                    (entry.epoch, entry.start_offset)
                    for entry in partition.log.leader_epoch_cache.epoch_entries()
                ],
            }

        result: dict[str, Any] = thread.call(read)
        return result

    def fetch_rounds(self, broker_id: int) -> int:
        """Fetches the broker's follower fetchers have had answered (what a test waits on
        to let time pass in fetch rounds, not in seconds)."""
        thread = self.brokers[broker_id]

        def count() -> int:
            fetchers = thread.broker.replicas.fetchers
            return sum(f.fetches for f in fetchers.fetchers.values()) if fetchers else 0

        result: int = thread.call(count)
        return result

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 20) -> None:
        """Wait on the brokers' own state (read on their loops), not on time."""
        wait_until(condition, what, timeout_s)


def _apply_on(thread: BrokerThread, records: list[MetadataRecord]) -> None:
    thread.call(lambda: thread.broker.metadata_publisher.apply(records))


def _overrides_with_port(thread: BrokerThread, overrides: dict[str, Any]) -> dict[str, Any]:
    from brook.broker.testing import broker_overrides

    return broker_overrides(thread.port, thread.data_dir, overrides)
