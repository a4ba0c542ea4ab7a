"""The partitions this broker hosts, made and removed as the metadata says (Kafka's
ReplicaManager): a partition assigned here gets its log and a Partition; a deleted topic
loses both, and so does a partition a reassignment moved off this broker (Kafka's
StopReplica with delete); a topic's new configs reach its logs.

Records are appended as leader through here too (append_records.py). Handlers find
partitions here; what the cluster knows about them (leaders, ISR, configs) is in the
MetadataCache.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from brook.protocol.errors import KafkaStorageError, UnknownTopicOrPartitionError
from brook.storage.clock import system_clock
from brook.storage.deferred_fsync import BULK_PARTITIONS, deferring_fsyncs, sync_deferred
from brook.storage.log_manager import LogManager

from ..metadata.cache import MetadataCache
from ..metadata.records import (
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicConfigsRecord,
    TopicRecord,
)
from .append_records import RecordAppender

if TYPE_CHECKING:
    from brook.storage.log_config import LogConfig

    from ..faults.registry import FaultRegistry
    from ..replication.fetcher_manager import ReplicaFetcherManager
    from .partition import AlterPartition, Partition

TopicPartition = tuple[str, int]
logger = logging.getLogger("brook.replica_manager")

# Partitions a sliced change makes before it lets the loop serve others: a few
# milliseconds of work, so bystanders wait little (prepare_in_slices).
PARTITIONS_PER_SLICE = 16


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        log_config_of: Callable[[dict[str, Any]], LogConfig],
        now_ms: Callable[[], int] = system_clock,
        broker_alive: Callable[[int], bool] = lambda broker_id: True,
        faults: FaultRegistry | None = None,
        *,
        fetchers: ReplicaFetcherManager | None = None,
        alter_partition: AlterPartition | None = None,
        leadership_lease: Callable[[], bool] = lambda: True,
        isr_eligible: Callable[[int], bool] = lambda broker_id: True,
    ) -> None:
        self.broker_id = broker_id
        self._log_manager = log_manager
        self._now_ms = now_ms
        self._broker_alive = broker_alive
        self._isr_eligible = isr_eligible
        # In a cluster: the fetchers that copy what other brokers lead (None once a
        # stopping broker follows nothing more), and where a leader's ISR changes go. A
        # single broker has neither.
        self.fetchers = fetchers
        self.alter_partition = alter_partition
        # Told when a partition's leadership changes here (the coordinators load or
        # drop their partitions).
        self.leadership_listeners: list[Callable[[Partition], None]] = []
        self.fenced = False
        # This broker is stopping: it fetches only for the ISRs it is still in.
        self.in_controlled_shutdown = False
        # Asked before every append as leader (a cluster's ZooKeeper lease; a single
        # broker always holds it).
        self.leadership_lease = leadership_lease
        # A topic's overrides -> its LogConfig under the broker's current defaults.
        self._log_config_of = log_config_of
        self._partitions: dict[TopicPartition, Partition] = {}
        # The one way records are appended as leader, for Produce and the coordinators
        # (Kafka's appendRecords): see append_records.py.
        self.append_records = RecordAppender(self.hosted, now_ms, faults).append_records

    # --- lookups ------------------------------------------------------------------------

    def hosted(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker hosts it (offline or not), else None."""
        return self._partitions.get((topic, index))

    def partition(self, topic: str, index: int) -> Partition:
        """The partition, online; Kafka's errors when it is not here or its dir failed."""
        partition = self._partitions.get((topic, index))
        if partition is None:
            raise UnknownTopicOrPartitionError(
                f"This server does not host this topic-partition: {topic}-{index}"
            )
        if partition.is_offline:
            raise KafkaStorageError(f"Partition {topic}-{index} is in an offline log dir")
        return partition

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def partitions_of(self, topic: str) -> list[Partition]:
        """The partitions of a topic hosted here, by index."""
        hosted = [p for (name, _), p in self._partitions.items() if name == topic]
        return sorted(hosted, key=lambda partition: partition.index)

    # --- changes ------------------------------------------------------------------------

    def prepare(self, records: Sequence[MetadataRecord], cache: MetadataCache) -> ReplicaChange:
        """Make the logs and partitions a change adds, before anyone sees the change.

        `cache` holds the state before the change. All or nothing: when a log cannot be
        made, what this call made is removed again and the error raised. What the change
        removes or reconfigures waits for ReplicaChange.complete, once it is kept.
        """
        steps = self._preparing(records, cache)
        while (change := _step(steps)) is None:
            pass
        return change

    async def prepare_in_slices(
        self,
        records: Sequence[MetadataRecord],
        cache: MetadataCache,
        slice_partitions: int = PARTITIONS_PER_SLICE,
    ) -> ReplicaChange:
        """prepare, giving the loop back after every `slice_partitions` partitions made, so
        that a change of thousands of partitions does not stop the broker serving others
        meanwhile. Cancelled part-way, it removes what it made."""
        steps = self._preparing(records, cache)
        made = 0
        try:
            while (change := _step(steps)) is None:
                made += 1
                if made % slice_partitions == 0:
                    await asyncio.sleep(0)
            return change
        except BaseException:
            steps.close()  # its own handler removes what it made
            raise

    def _preparing(
        self, records: Sequence[MetadataRecord], cache: MetadataCache
    ) -> Generator[None, None, ReplicaChange]:
        """prepare's work, yielding after each partition it makes."""
        names = {topic.topic_id: topic.name for topic in cache.topics()}
        configs = {topic.topic_id: topic.configs for topic in cache.topics()}
        for record in records:
            if isinstance(record, TopicRecord):
                names[record.topic_id] = record.name
                configs.setdefault(record.topic_id, {})
            elif isinstance(record, TopicConfigsRecord):
                configs[record.topic_id] = dict(record.configs)
        # One LogConfig (frozen) for all the new partitions of a topic: computing it is a
        # tenth of what making a partition costs.
        log_configs: dict[uuid.UUID, LogConfig] = {}

        def log_config(record: PartitionRecord) -> LogConfig:
            found = log_configs.get(record.topic_id)
            if found is None:
                found = log_configs[record.topic_id] = self._log_config_of(configs[record.topic_id])
            return found

        opened: list[Partition] = []  # partitions this change made
        made: list[Partition] = []  # of them, those whose logs this change created
        changed: list[tuple[Partition, PartitionRecord]] = []  # partitions hosted already
        stopped: list[tuple[Partition, PartitionRecord]] = []  # no longer assigned here
        strays: list[TopicPartition] = []  # logs here of partitions assigned elsewhere
        # A few partitions are fsynced as they are made, as any file; only a change that
        # makes many (a CreateTopics of thousands, the broker's start) leaves their fsyncs
        # (new logs' first files, the leader epoch checkpoints of those led) to a worker
        # thread (which holds descriptors for a moment, and whose cost matters only in bulk).
        bulk = (
            sum(
                1
                for record in records
                if isinstance(record, PartitionRecord)
                and self.broker_id in record.replicas
                and (names[record.topic_id], record.partition_id) not in self._partitions
            )
            >= BULK_PARTITIONS
        )
        try:
            for record in records:
                if not isinstance(record, PartitionRecord):
                    continue
                name = names[record.topic_id]
                hosted = self._partitions.get((name, record.partition_id))
                if self.broker_id not in record.replicas:
                    if hosted is not None:
                        stopped.append((hosted, record))
                    elif self._log_manager.get_log(name, record.partition_id) is not None:
                        # A log left by a replica moved away while this broker was down.
                        strays.append((name, record.partition_id))
                    continue
                if hosted is not None:
                    changed.append((hosted, record))
                    continue
                is_new = self._log_manager.get_log(name, record.partition_id) is None
                if bulk:
                    # Many partitions: their files' fsyncs run together, off the loop,
                    # once the change is made (storage/deferred_fsync.py).
                    with deferring_fsyncs():
                        partition = self._make_partition(name, record, log_config(record))
                else:
                    partition = self._make_partition(name, record, log_config(record))
                if is_new:
                    made.append(partition)
                opened.append(partition)
                yield
        except BaseException:
            self.remove_partitions(made)
            raise
        if opened and bulk:
            self._sync_deferred_soon()
        removed = [names[r.topic_id] for r in records if isinstance(r, RemoveTopicRecord)]
        reconfigured = [
            (names[r.topic_id], configs[r.topic_id])
            for r in records
            if isinstance(r, TopicConfigsRecord)
        ]
        return ReplicaChange(self, opened, made, changed, removed, reconfigured, stopped, strays)

    def _sync_deferred_soon(self) -> None:
        """Fsync the new partitions' files on a worker thread (now, without a loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            sync_deferred()
            return
        syncing = loop.run_in_executor(None, sync_deferred)
        syncing.add_done_callback(_log_sync_failure)

    def refresh_configs(self, topics: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """The broker's defaults changed: every log takes its topic's new config."""
        for name, overrides in topics:
            self._update_configs(name, overrides)

    def _make_partition(self, name: str, record: PartitionRecord, config: LogConfig) -> Partition:
        # An existing log without partition.metadata (placed by hand, or written by a
        # tool that keeps none) gets the topic id now, or it would change at every start.
        from .partition import Partition  # with the first partition: see LogManager's Log

        log_ = self._log_manager.get_or_create_log(
            name, record.partition_id, config, record.topic_id
        )
        partition = Partition(
            topic=name,
            index=record.partition_id,
            topic_id=record.topic_id,
            log=log_,
            local_broker_id=self.broker_id,
            leader_id=record.leader,
            leader_epoch=record.leader_epoch,
            replicas=list(record.replicas),
            isr=list(record.isr),
            partition_epoch=record.partition_epoch,
            alter_partition=self.alter_partition,
            clock=self._now_ms,
            fenced=self.fenced,
            leadership_lease=self._leadership_lease_held,
            broker_alive=self._broker_alive,
            isr_eligible=self._isr_eligible,
        )
        self._partitions[(name, record.partition_id)] = partition
        return partition

    def follow_or_lead(self, partition: Partition, leadership_changed: bool) -> None:
        """A partition's registration is new or changed: a follower fetches from its
        leader (truncating first, when the leader or its epoch changed), a leader stops
        fetching; the listeners hear of a new leadership."""
        if self.fetchers is not None:
            # A leader fetches from nobody; nor does a partition without one (offline),
            # nor, in controlled shutdown, one whose ISR this broker left: no acks=all
            # waits on it there any more (Kafka's controller sends it StopReplica).
            if (
                partition.leader_id == self.broker_id
                or partition.leader_id < 0
                or (self.in_controlled_shutdown and self.broker_id not in partition.isr)
            ):
                self.fetchers.remove_partition(partition)
            else:
                self.fetchers.add_partition(partition)
        if leadership_changed:
            for listener in self.leadership_listeners:
                listener(partition)

    def _leadership_lease_held(self) -> bool:
        return self.leadership_lease()

    def set_fenced(self, fenced: bool) -> None:
        """The broker lost (or got back) the right to lead: every partition refuses (or
        takes again) writes as leader."""
        from brook.protocol.errors import NotLeaderOrFollowerError

        self.fenced = fenced
        for partition in self._partitions.values():
            partition.fenced = fenced
            if fenced and partition.leader_id == self.broker_id:
                # acks=all writes waiting here may never commit (the followers may have
                # moved on to another leader): they get NOT_LEADER_OR_FOLLOWER at once, as
                # Kafka answers them when a leader steps down, and the producer retries
                # them at the new leader.
                partition.fail_waiters(
                    NotLeaderOrFollowerError(
                        f"Broker {self.broker_id} is cut off from ZooKeeper and does not lead"
                        f" {partition.name} for now"
                    )
                )

    def maybe_shrink_isr(self, lag_time_max_ms: int) -> None:
        """Every partition led here drops the followers that fell behind."""
        now_ms = self._now_ms()
        for partition in self._partitions.values():
            if partition.remote_replicas and partition.leader_id == self.broker_id:
                partition.maybe_shrink_isr(now_ms, lag_time_max_ms)

    def remove_partitions(self, partitions: list[Partition]) -> None:
        for partition in partitions:
            if self.fetchers is not None:
                self.fetchers.remove_partition(partition)
            self._partitions.pop((partition.topic, partition.index), None)
            self._log_manager.delete_log(partition.topic, partition.index)

    def stop_replica(self, partition: Partition, record: PartitionRecord) -> None:
        """A reassignment moved the partition off this broker: it stops serving and
        following it and deletes its log (Kafka's StopReplica with deletePartition).
        Waiters get NOT_LEADER_OR_FOLLOWER, so that clients go to the leader the
        metadata names; the coordinators drop a partition this broker led."""
        from brook.protocol.errors import NotLeaderOrFollowerError

        was_leader = partition.leader_id == self.broker_id
        partition.update_registration(
            list(record.replicas),
            list(record.isr),
            # Not the leader any more, even if the state saying so is not read yet.
            record.leader if record.leader != self.broker_id else -1,
            record.leader_epoch,
            record.partition_epoch,
            self._now_ms(),
        )
        partition.fail_waiters(
            NotLeaderOrFollowerError(
                f"Broker {self.broker_id} is no longer a replica of {partition.name}"
            )
        )
        if was_leader:
            for listener in self.leadership_listeners:
                listener(partition)
        self.remove_partitions([partition])
        logger.info(
            "Broker %d is no longer a replica of %s (replicas %s): stopped, log deleted",
            self.broker_id,
            partition.name,
            ",".join(map(str, record.replicas)),
        )

    def delete_stray_log(self, name: str, index: int) -> None:
        """A log of a partition this broker is not a replica of: a reassignment moved the
        partition away while the broker was down, so no StopReplica reached it (Kafka's
        KRaft brokers delete such stray logs at start too)."""
        if (name, index) in self._partitions:
            return
        if self._log_manager.delete_log(name, index):
            logger.info(
                "Broker %d is not a replica of %s-%d: its stray log deleted",
                self.broker_id,
                name,
                index,
            )

    def remove_topic(self, name: str) -> None:
        removed = self.partitions_of(name)
        for partition in removed:
            partition.fail_waiters(UnknownTopicOrPartitionError(f"Topic {name} was deleted"))
        self.remove_partitions(removed)

    def _update_configs(self, name: str, overrides: dict[str, Any]) -> None:
        config = self._log_config_of(overrides)
        for partition in self.partitions_of(name):
            partition.log.update_config(config)


def _step(steps: Generator[None, None, ReplicaChange]) -> ReplicaChange | None:
    """One partition made (None), or the change once all are."""
    try:
        next(steps)
    except StopIteration as done:
        change: ReplicaChange = done.value
        return change
    return None


class ReplicaChange:
    """A change the replica manager has prepared: undone if it cannot be kept, completed
    (new leaders and ISRs taken by the partitions, topics removed, configs applied to
    the logs) once it is. (Not a dataclass: one costs start-up time to create.)"""

    __slots__ = ("_changed", "_made", "_manager", "_opened", "_reconfigured", "_removed",
                 "_stopped", "_strays")  # fmt: skip

    def __init__(
        self,
        manager: ReplicaManager,
        opened: list[Partition],
        made: list[Partition],
        changed: list[tuple[Partition, PartitionRecord]],
        removed: list[str],
        reconfigured: list[tuple[str, dict[str, Any]]],
        stopped: list[tuple[Partition, PartitionRecord]],
        strays: list[TopicPartition],
    ) -> None:
        self._manager = manager
        self._opened = opened
        self._made = made
        self._changed = changed
        self._removed = removed
        self._reconfigured = reconfigured
        self._stopped = stopped
        self._strays = strays

    def undo(self) -> None:
        self._manager.remove_partitions(self._made)

    def complete(self) -> None:
        # Thousands of leaderships at once (a topic of thousands made, a broker's handed
        # over): each new leader writes its leader epoch checkpoint, and their fsyncs,
        # one after another on the loop, held every client for seconds. In bulk they run
        # together on a worker thread, as at load (storage/deferred_fsync.py: the entries
        # are in the batches the epoch writes, and a lost one is written again by the
        # next leadership).
        if len(self._opened) + len(self._changed) < BULK_PARTITIONS:
            self._complete()
            return
        with deferring_fsyncs():
            self._complete()
        self._manager._sync_deferred_soon()

    def _complete(self) -> None:
        now_ms = self._manager._now_ms()
        for partition in self._opened:
            self._manager.follow_or_lead(partition, leadership_changed=True)
        for partition, record in self._changed:
            changed = partition.update_registration(
                list(record.replicas),
                list(record.isr),
                record.leader,
                record.leader_epoch,
                record.partition_epoch,
                now_ms,
            )
            self._manager.follow_or_lead(partition, changed)
        for partition, record in self._stopped:
            self._manager.stop_replica(partition, record)
        for name, index in self._strays:
            self._manager.delete_stray_log(name, index)
        for name in self._removed:
            self._manager.remove_topic(name)
        self._manager.refresh_configs(self._reconfigured)


def _log_sync_failure(done: asyncio.Future[int]) -> None:
    if not done.cancelled() and done.exception() is not None:
        logger.error("Could not fsync the files of new partitions: %s", done.exception())
