"""What the elected controller does, and only while it is the controller (Kafka's
KafkaController with its partition state machine, in ZooKeeper mode).

It reconciles the partition states with the live brokers, every time either changes:

- a partition without a state znode (a new topic or new partitions): the first live
  replica leads, the live replicas are the ISR, leader epoch 0;
- a partition whose leader is not live (its broker's registration went, or a broker came
  back to a partition left without one): the first live ISR member in replica order
  leads, leader epoch + 1; from outside the ISR only with unclean.leader.election.enable
  (the topic's, else the broker's); with no one to lead, leader -1 and the ISR keeps its
  last member, so that member can lead again when it returns (as Kafka);
- an ISR member that is not live leaves the ISR (not the last one). The leader and its
  epoch stay: only the partition epoch (the znode's version) moves, so the leader goes
  on without a new epoch, as KRaft's controller fences a broker;
- a broker in controlled shutdown (ControlledShutdown): the partitions it leads get the
  first ISR member that is not shutting down as leader, leader epoch + 1; it leaves every
  ISR it is in; it leads no new partition and is elected nowhere, though still registered
  (Kafka's shuttingDownBrokerIds, forgotten when its registration goes);
- /admin/delete_topics/<t>: once every replica's broker is live (Kafka's deletion waits
  for offline replicas too), the topic's znodes are deleted with the mark; every broker's
  watch then removes its logs.

Every write is a ZooKeeper transaction that also checks /controller_epoch's version, as
Kafka's controller writes: a controller that lost its election while it decided can no
longer change anything. Partition writes are conditional on the state's version too: a
leader's ISR change that came first wins, and its watch brings the state to decide on
again. A new controller does the same reconciliation over everything at once, which
repairs what its predecessor left half done.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import enum
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from brook.protocol.errors import ErrorCode
from brook.storage.checkpoints import topic_id_to_string

from ..cluster.leader_election import (
    LeaderAndIsr,
    controlled_shutdown_partition_leader_election,
    new_partition_leader,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
)
from ..config.broker_config import BrokerConfig
from ..metadata.cache import MetadataCache
from ..metadata.records import MetadataRecord
from . import znodes
from .client import ZooKeeperClient
from .controller_election import ControllerElection, ControllerState
from .fenced_writes import ControllerFencedError, FencedWrites
from .kazoo_api import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    TransactionRequest,
    WatchedEvent,
)
from .reassignment import PartitionReassignments, ReassignmentResult
from .serial_job import SerialJob
from .topic_watcher import NO_LEADER, NO_STATE, TopicWatcher

log = logging.getLogger("brook.controller")


class ElectionType(enum.IntEnum):
    """ElectLeaders' election_type (Kafka's ElectionType)."""

    PREFERRED = 0
    UNCLEAN = 1


# A partition's outcome of an ElectLeaders: its error and the error's message.
ElectionResult = tuple[ErrorCode, str | None]
# Tries of an election whose state changed meanwhile (a leader's ISR write came first).
ELECTION_ATTEMPTS = 5
# Partition state writes a reconciliation keeps in flight to ZooKeeper (see _elect): a
# few transactions of FencedWrites' 100 at once. With 64, a broker handing over 5,000
# partitions waited for 80 round trips one after another, each behind whatever else its
# loop had to do (one run each: 10.2 s and 17 CPU s per broker at 512, against 14.8 s and 19-26).
WRITES_IN_FLIGHT = 512


@dataclasses.dataclass
class RoundTally:
    """What one reconciliation changed, by kind, for its one summary line: a line per
    partition (Kafka's state-change log, at TRACE there) would be thousands for a topic of
    thousands of partitions or a broker leaving; those lines are at DEBUG."""

    created: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    moved_from_shutting_down: collections.Counter[str] = dataclasses.field(
        default_factory=collections.Counter
    )
    elected: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    isr_shrunk: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)

    def summary(self) -> str | None:
        parts = [
            f"{what} {_count_by_topic(counter)}"
            for what, counter in (
                ("new partitions led:", self.created),
                ("leaders moved off brokers shutting down:", self.moved_from_shutting_down),
                ("leaders elected after a leader was lost:", self.elected),
                ("ISRs without brokers gone:", self.isr_shrunk),
            )
            if counter
        ]
        text = "; ".join(parts)
        return text[:1].upper() + text[1:] or None


def _count_by_topic(counter: collections.Counter[str], shown: int = 5) -> str:
    """`9000 (big 9000)`, the topics with most first."""
    top = counter.most_common(shown)
    named = ", ".join(f"{topic} {count}" for topic, count in top)
    if len(counter) > shown:
        named += f", {len(counter) - shown} more topics"
    return f"{sum(counter.values())} ({named})"


class ControllerDuties:
    def __init__(
        self,
        client: ZooKeeperClient,
        election: ControllerElection,
        topics: TopicWatcher,
        cache: MetadataCache,
        config: Callable[[], BrokerConfig],
    ) -> None:
        self._client = client
        self._election = election
        self._topics = topics
        self._cache = cache
        self._config = config
        self._job = SerialJob("the controller's reconciliation", self._reconcile)
        self._active = False
        self._waiting_deletions: set[str] = set()
        # Brokers in controlled shutdown, and the replicated partitions each still led
        # after the last round (what ControlledShutdown answers as remaining).
        # broker id -> the broker epoch (registration czxid) it asked with.
        self.shutting_down: dict[int, int] = {}
        self._still_leading: dict[int, list[tuple[str, int]]] = {}
        # The reconciliation and the elections asked for (ElectLeaders, the preferred
        # leader rebalance) write the same states: one at a time.
        self._lock = asyncio.Lock()
        self._writes = FencedWrites(client)
        # Topics whose partitions znode this controller made or found (see _create_state).
        self._partitions_znodes: set[str] = set()
        self._rebalance: asyncio.Future[None] | None = None
        self._tally = RoundTally()
        self.reassignments = PartitionReassignments(
            client, topics, self._active_brokers, self._fenced, self._job.schedule
        )
        election.add_listener(self._controller_changed)
        # Every read of the topics, changed or not (a topic without an id changes nothing
        # in the cache, and still needs the controller).
        topics.refreshed.append(self._topics_read)

    def close(self) -> None:
        self._active = False
        self._job.close()
        self._stop_rebalance()

    # --- triggers -----------------------------------------------------------------------

    def _controller_changed(self, state: ControllerState, is_controller: bool) -> None:
        self._active = is_controller
        self.reassignments.controller_changed()
        if not is_controller:
            self._stop_rebalance()
        elif self._rebalance is None:
            self._rebalance = asyncio.ensure_future(self._rebalance_loop())
        if is_controller:
            # A new controller reads everything and repairs what was left half done.
            self._topics.schedule()
            self._job.schedule()

    def metadata_changed(self, records: Sequence[MetadataRecord]) -> None:
        """Brokers came or went, topics or states changed: decide again."""
        if self._active:
            self._job.schedule()

    def _topics_read(self) -> None:
        if self._active:
            self._job.schedule()

    def _deletions_changed(self, event: WatchedEvent) -> None:
        if self._active:
            self._job.schedule()

    async def idle(self) -> None:
        await self._job.idle()

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership away from `broker_id` and take it out of every ISR (Kafka's
        KafkaController.doControlledShutdown); the replicated partitions it still leads
        afterwards (no other ISR member to take over, or a state that changed meanwhile:
        the broker asks again)."""
        if broker_id not in self.shutting_down:
            log.info("[Controller id=%d] Shutting down broker %d", self._own_id(), broker_id)
        self.shutting_down[broker_id] = broker_epoch
        self._job.schedule()
        await self._job.idle()
        return self._still_leading.get(broker_id, [])

    async def _forget_restarted(self, live: set[int]) -> None:
        """A broker that stopped, or came back as a new incarnation (a new registration,
        which the live set alone may not show), is no longer shutting down."""
        for broker_id, epoch in list(self.shutting_down.items()):
            stat = None
            if broker_id in live:
                stat = await self._client.exists(znodes.broker_id_path(broker_id))
            if stat is None or stat.czxid != epoch:
                del self.shutting_down[broker_id]

    def _own_id(self) -> int:
        return self._election.state.controller_id

    def _active_brokers(self) -> set[int]:
        """The live brokers that may lead or be added (not in controlled shutdown)."""
        return {b.broker_id for b in self._cache.brokers()} - self.shutting_down.keys()

    # --- the reconciliation -------------------------------------------------------------

    async def _reconcile(self) -> None:
        async with self._lock:
            await self._reconcile_locked()

    async def _reconcile_locked(self) -> None:
        if not self._active:
            return
        state = self._election.state
        try:
            await self._delete_marked_topics(state)
            await self._topics.reads_done()
            await self._elect(state)
        except ControllerFencedError:
            log.info(
                "[Controller id=%d] Controller epoch %d is no longer current; stopping",
                state.controller_id,
                state.epoch,
            )

    async def _elect(self, state: ControllerState) -> None:
        live = {broker.broker_id for broker in self._cache.brokers()}
        # A broker that stopped (its registration went) is no longer shutting down.
        await self._forget_restarted(live)
        still_leading: dict[int, list[tuple[str, int]]] = {b: [] for b in self.shutting_down}
        retry = False
        to_decide: list[tuple[str, int, list[int], znodes.PartitionState]] = []
        for name, (topic_id, assignment) in sorted(self._topics.assignments.items()):
            if topic_id is None:
                if assignment:
                    await self._assign_topic_id(state, name)
                continue  # the watch brings the topic again with its id
            for partition, replicas in sorted(assignment.items()):
                current = self._topics.states.get((name, partition))
                if current is None:
                    continue  # not read yet: its read schedules this again
                to_decide.append((name, partition, replicas, current))

        async def decide_in_turn(
            queue: Iterator[tuple[str, int, list[int], znodes.PartitionState]],
        ) -> None:
            nonlocal retry
            for name, partition, replicas, current in queue:
                try:
                    moved = await self._decide(state, name, partition, replicas, current, live)
                except BadVersionError:
                    moved = False
                    retry = True  # changed meanwhile: the watch brings the new state
                leader = current.leader if current is not NO_STATE else NO_LEADER
                # Kafka reports only replicated partitions: one replica has nowhere to go.
                if not moved and leader in still_leading and len(replicas) > 1:
                    still_leading[leader].append((name, partition))

        # Partitions are decided independently, each by at most one write of its own
        # state znode: WRITES_IN_FLIGHT deciders share the list, so that the writes of a
        # topic of thousands of new partitions, or of every partition a dead or stopping
        # broker led, are pipelined to ZooKeeper (as Kafka's controller writes them
        # asynchronously), not made one round trip after another. A partition that needs
        # no write costs its decider no wait.
        queue = iter(to_decide)
        self._tally = RoundTally()
        try:
            await asyncio.gather(*(decide_in_turn(queue) for _ in range(WRITES_IN_FLIGHT)))
        finally:
            summary = self._tally.summary()
            if summary:
                log.info("[Controller id=%d] %s", state.controller_id, summary)
        self._still_leading = still_leading
        # Moves an old tool asked for in /admin/reassign_partitions start; moves whose
        # target replicas have all caught up complete (a new controller's first round
        # resumes those its predecessor left).
        await self.reassignments.follow_admin_znode(state)
        await self.reassignments.complete_caught_up(state)
        if retry:
            self._topics.schedule()

    async def _decide(
        self,
        state: ControllerState,
        name: str,
        partition: int,
        replicas: list[int],
        current: znodes.PartitionState,
        live: set[int],
    ) -> bool:
        """Decide one partition; True when its leader changed."""
        # Brokers in controlled shutdown are registered but lead nothing new and leave
        # the ISRs (ControllerContext.isReplicaOnline without includeShuttingDownBrokers).
        active = live - self.shutting_down.keys()
        if current is NO_STATE:
            chosen = new_partition_leader(replicas, active)
            if chosen is None:
                return False  # no replica is live: it waits for one
            await self._create_state(state, name, partition, chosen.leader, chosen.isr)
            self._tally.created[name] += 1
            log.debug(
                "[Controller id=%d] %s-%d: new partition, leader %d, ISR %s",
                state.controller_id,
                name,
                partition,
                chosen.leader,
                list(chosen.isr),
            )
            return True
        if current.leader in self.shutting_down and current.leader in live:
            return await self._move_from_shutting_down(
                state, name, partition, replicas, current, live
            )
        if current.leader in active:
            # Only followers that are gone leave the ISR (never the last member).
            new_isr = tuple(member for member in current.isr if member in active)
            if new_isr and new_isr != current.isr:
                await self._write_state(
                    state, name, partition, current, current.leader, current.leader_epoch, new_isr
                )
                self._tally.isr_shrunk[name] += 1
                log.debug(
                    "[Controller id=%d] %s-%d: ISR %s -> %s (brokers gone)",
                    state.controller_id,
                    name,
                    partition,
                    list(current.isr),
                    list(new_isr),
                )
            return False
        chosen = offline_partition_leader_election(
            replicas, current.isr, active, self._unclean_allowed(name)
        )
        if chosen is None:
            if current.leader == NO_LEADER:
                return False  # offline already: waits for an ISR member to come back
            remaining = tuple(m for m in current.isr if m in active) or current.isr
            await self._write_state(
                state, name, partition, current, NO_LEADER, current.leader_epoch + 1, remaining
            )
            log.warning(
                "[Controller id=%d] %s-%d is offline: no live replica in the ISR %s may lead"
                " (unclean.leader.election.enable is false)",
                state.controller_id,
                name,
                partition,
                list(current.isr),
            )
            return True
        await self._write_state(
            state, name, partition, current, chosen.leader, current.leader_epoch + 1, chosen.isr
        )
        self._tally.elected[name] += 1
        log.log(
            logging.WARNING if chosen.unclean else logging.DEBUG,
            "[Controller id=%d] %s-%d: %sleader %d (was %d), leader epoch %d, ISR %s",
            state.controller_id,
            name,
            partition,
            "UNCLEAN election, " if chosen.unclean else "",
            chosen.leader,
            current.leader,
            current.leader_epoch + 1,
            list(chosen.isr),
        )
        return True

    async def _move_from_shutting_down(
        self,
        state: ControllerState,
        name: str,
        partition: int,
        replicas: list[int],
        current: znodes.PartitionState,
        live: set[int],
    ) -> bool:
        """The controlled-shutdown election of a partition its leader is leaving; with no
        other ISR member to lead, the leader keeps it (and the followers that are gone
        leave the ISR), and the broker is told the partition remains."""
        chosen = controlled_shutdown_partition_leader_election(
            replicas, current.isr, live, self.shutting_down
        )
        if chosen is None:
            new_isr = tuple(m for m in current.isr if m in live)
            if new_isr and new_isr != current.isr:
                await self._write_state(
                    state, name, partition, current, current.leader, current.leader_epoch, new_isr
                )
            return False
        await self._write_state(
            state, name, partition, current, chosen.leader, current.leader_epoch + 1, chosen.isr
        )
        self._tally.moved_from_shutting_down[name] += 1
        log.debug(
            "[Controller id=%d] %s-%d: leader %d (was %d, shutting down), leader epoch %d, ISR %s",
            state.controller_id,
            name,
            partition,
            chosen.leader,
            current.leader,
            current.leader_epoch + 1,
            list(chosen.isr),
        )
        return True

    # --- elections asked for (ElectLeaders, the preferred leader rebalance) --------------

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], ElectionResult]:
        """Kafka's KafkaController.processReplicaLeaderElection for the admin's request:
        each partition's result (None: every partition). Raises ControllerFencedError
        when this broker is not, or no longer, the controller."""
        async with self._lock:
            if not self._active:
                raise ControllerFencedError()
            await self._topics.reads_done()
            if partitions is None:
                partitions = [
                    (name, index)
                    for name, (topic_id, assignment) in sorted(self._topics.assignments.items())
                    if topic_id is not None
                    for index in sorted(assignment)
                ]
            results: dict[tuple[str, int], ElectionResult] = {}
            for name, index in partitions:
                results[(name, index)] = await self._elect_one(election_type, name, index)
            return results

    async def _elect_one(
        self, election_type: ElectionType, name: str, index: int
    ) -> ElectionResult:
        state = self._election.state
        for _ in range(ELECTION_ATTEMPTS):
            entry = self._topics.assignments.get(name)
            if entry is None or entry[0] is None or index not in entry[1]:
                return ErrorCode.unknown_topic_or_partition, "The partition does not exist."
            replicas = entry[1][index]
            current = self._topics.states.get((name, index))
            if current is None or current is NO_STATE:
                # Not elected yet: the reconciliation gives it its first leader.
                return ErrorCode.leader_not_available, f"{name}-{index} has no leader yet"
            live = {broker.broker_id for broker in self._cache.brokers()}
            active = live - self.shutting_down.keys()
            chosen: LeaderAndIsr | None
            if election_type is ElectionType.PREFERRED:
                if replicas and current.leader == replicas[0]:
                    return ErrorCode.election_not_needed, None
                chosen = preferred_replica_partition_leader_election(replicas, current.isr, active)
                strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
                error = ErrorCode.preferred_leader_not_available
            else:
                if current.leader in active:
                    return ErrorCode.election_not_needed, None
                chosen = offline_partition_leader_election(replicas, current.isr, active, True)
                strategy = "OfflinePartitionLeaderElectionStrategy(true)"
                error = ErrorCode.eligible_leaders_not_available
            if chosen is None:
                # Kafka's message (PartitionStateMachine's failed elections).
                return error, (
                    f"Failed to elect leader for partition {name}-{index} under strategy {strategy}"
                )
            try:
                await self._write_state(
                    state, name, index, current, chosen.leader, current.leader_epoch + 1, chosen.isr
                )
            except BadVersionError:
                # A leader's ISR change came first: decide again on the state its watch
                # brings.
                self._topics.schedule()
                await asyncio.sleep(0.05)
                await self._topics.reads_done()
                continue
            log.log(
                logging.WARNING if chosen.unclean else logging.INFO,
                "[Controller id=%d] %s-%d: %s election, leader %d (was %d), leader epoch %d,"
                " ISR %s",
                state.controller_id,
                name,
                index,
                election_type.name.lower(),
                chosen.leader,
                current.leader,
                current.leader_epoch + 1,
                list(chosen.isr),
            )
            return ErrorCode.none, None
        return ErrorCode.not_controller, f"the state of {name}-{index} kept changing; try again"

    # --- reassignments (AlterPartitionReassignments, ListPartitionReassignments) ----------

    async def alter_partition_reassignments(
        self, asked: dict[tuple[str, int], list[int] | None]
    ) -> dict[tuple[str, int], ReassignmentResult]:
        """Start, replace or cancel (None) moves; each partition's result. Raises
        ControllerFencedError when this broker is not, or no longer, the controller."""
        async with self._lock:
            if not self._active:
                raise ControllerFencedError()
            results = await self.reassignments.alter(self._election.state, asked)
        self._job.schedule()  # a move that needs no copying completes at once
        return results

    async def list_partition_reassignments(
        self, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], Any]:
        """The ongoing moves (ReplicaAssignment) of `partitions` (None: all)."""
        async with self._lock:
            if not self._active:
                raise ControllerFencedError()
            await self._topics.reads_done()
            return self.reassignments.ongoing(partitions)

    # --- the preferred leader rebalance (auto.leader.rebalance.enable) ---------------------

    def _stop_rebalance(self) -> None:
        if self._rebalance is not None:
            self._rebalance.cancel()
            self._rebalance = None

    async def _rebalance_loop(self) -> None:
        """Kafka's AutoPreferredReplicaLeaderElection task, every
        leader.imbalance.check.interval.seconds while this broker is the controller."""
        while True:
            await asyncio.sleep(self._config()["leader.imbalance.check.interval.seconds"])
            if not self._config()["auto.leader.rebalance.enable"]:
                continue
            try:
                await self.rebalance_preferred_leaders()
            except ControllerFencedError:
                return
            except Exception:
                log.exception("The preferred leader rebalance failed; next check goes on")

    async def rebalance_preferred_leaders(self) -> None:
        """Kafka's checkAndTriggerAutoLeaderRebalance: for each broker, the share of the
        partitions it is the preferred replica of that another broker leads; above
        leader.imbalance.per.broker.percentage, those it can lead again (live, not
        shutting down, in the ISR) get a preferred election."""
        threshold = self._config()["leader.imbalance.per.broker.percentage"] / 100
        live = {broker.broker_id for broker in self._cache.brokers()} - self.shutting_down.keys()
        preferred_of: dict[int, list[tuple[str, int]]] = {}
        elsewhere: dict[int, list[tuple[str, int]]] = {}
        for name, (topic_id, assignment) in sorted(self._topics.assignments.items()):
            if topic_id is None:
                continue
            for index, replicas in sorted(assignment.items()):
                current = self._topics.states.get((name, index))
                if not replicas or current is None or current is NO_STATE:
                    continue
                preferred = replicas[0]
                preferred_of.setdefault(preferred, []).append((name, index))
                if current.leader != preferred:
                    elsewhere.setdefault(preferred, []).append((name, index))
        for broker_id, partitions in sorted(preferred_of.items()):
            moved = elsewhere.get(broker_id, [])
            ratio = len(moved) / len(partitions)
            log.debug("Leader imbalance ratio for broker %d is %f", broker_id, ratio)
            if ratio <= threshold or broker_id not in live:
                continue
            candidates = [
                (name, index)
                for name, index in moved
                if broker_id in self._topics.states[(name, index)].isr
            ]
            if not candidates:
                continue
            log.info(
                "[Controller id=%d] Leader imbalance ratio for broker %d is %.2f: preferred"
                " leader election for %s",
                self._own_id(),
                broker_id,
                ratio,
                ", ".join(f"{name}-{index}" for name, index in candidates),
            )
            await self.elect_leaders(ElectionType.PREFERRED, candidates)

    def _unclean_allowed(self, name: str) -> bool:
        topic = self._cache.get(name)
        value = topic.configs.get("unclean.leader.election.enable") if topic else None
        if value is None:
            value = self._config()["unclean.leader.election.enable"]
        return bool(value)

    # --- writes, fenced by the controller epoch ------------------------------------------

    async def _fenced(
        self, state: ControllerState, build: Callable[[TransactionRequest], None]
    ) -> list[Any]:
        # Sent with the other writes of this turn of the loop, in one transaction.
        return await self._writes.write(state, build)

    async def _create_state(
        self, state: ControllerState, name: str, partition: int, leader: int, isr: Sequence[int]
    ) -> None:
        data = znodes.encode_partition_state(leader, 0, isr, state.epoch)
        partition_path = znodes.topic_partition_path(name, partition)
        path = znodes.topic_partition_state_path(name, partition)
        # The topic's partitions znode first, outside the transaction (as Kafka's
        # createTopicPartitions), once per topic; then the partition's znode and its state
        # in one transaction: one round trip a partition, for topics of thousands.
        if name not in self._partitions_znodes:
            with contextlib.suppress(NodeExistsError):
                await self._client.create(znodes.topic_partitions_path(name))
            self._partitions_znodes.add(name)

        def partition_and_state(transaction: TransactionRequest) -> None:
            transaction.create(partition_path)
            transaction.create(path, data)

        try:
            await self._fenced(state, partition_and_state)
            return
        except NodeExistsError:
            pass  # the partition's znode is there (a predecessor's half-done work)
        except NoNodeError:
            # The topic was made again since (its partitions znode went with it).
            self._partitions_znodes.discard(name)
            with contextlib.suppress(NodeExistsError):
                await self._client.create(znodes.topic_partitions_path(name))
            with contextlib.suppress(NodeExistsError):
                await self._client.create(partition_path)
        try:
            await self._fenced(state, lambda t: t.create(path, data))
        except NodeExistsError:
            raise BadVersionError() from None  # written meanwhile: decide on what is there

    async def _write_state(
        self,
        state: ControllerState,
        name: str,
        partition: int,
        current: znodes.PartitionState,
        leader: int,
        leader_epoch: int,
        isr: Sequence[int],
    ) -> None:
        data = znodes.encode_partition_state(leader, leader_epoch, isr, state.epoch)
        path = znodes.topic_partition_state_path(name, partition)
        await self._fenced(state, lambda t: t.set_data(path, data, current.zk_version))

    async def _assign_topic_id(self, state: ControllerState, name: str) -> None:
        """A topic a Kafka before 2.8 made has no id: the controller gives it one, as
        Kafka's controller does, so that every broker names it by the same id."""
        path = znodes.topic_path(name)
        try:
            data, stat = await self._client.get(path)
            held = znodes.decode_topic_znode(name, data)
        except (NoNodeError, ValueError):
            return
        if held.topic_id is not None:
            return
        new_id = uuid.uuid4()
        encoded = znodes.encode_topic(new_id, held.partitions, held.adding, held.removing)
        try:
            await self._fenced(state, lambda t: t.set_data(path, encoded, stat.version))
        except BadVersionError:
            return  # changed meanwhile: its watch brings it again
        log.info(
            "[Controller id=%d] Topic %s had no topic id: assigned %s",
            state.controller_id,
            name,
            topic_id_to_string(new_id),
        )

    # --- deletion -----------------------------------------------------------------------

    async def _delete_marked_topics(self, state: ControllerState) -> None:
        marked = await self._client.get_children(znodes.DELETE_TOPICS, self._deletions_changed)
        live = {broker.broker_id for broker in self._cache.brokers()}
        for name in sorted(marked):
            held = self._topics.assignments.get(name)
            replicas = {r for replicas in (held[1] if held else {}).values() for r in replicas}
            away = sorted(replicas - live)
            if away:
                # As Kafka's TopicDeletionManager: ineligible while a replica is offline,
                # so that every broker deletes its logs when the topic goes; tried again
                # when brokers register.
                if name not in self._waiting_deletions:
                    log.info(
                        "[Controller id=%d] Deletion of topic %s waits for brokers %s",
                        state.controller_id,
                        name,
                        ", ".join(map(str, away)),
                    )
                    self._waiting_deletions.add(name)
                continue
            self._waiting_deletions.discard(name)
            self._partitions_znodes.discard(name)
            paths = await self._tree(znodes.topic_path(name))
            config = znodes.config_entity_path("topics", name)
            if await self._client.exists(config) is not None:
                paths.append(config)
            paths.append(znodes.delete_topic_path(name))

            def build(transaction: TransactionRequest, paths: list[str] = paths) -> None:
                for path in paths:
                    transaction.delete(path)

            try:
                await self._fenced(state, build)
            except (NoNodeError, NodeExistsError, BadVersionError) as exc:
                # Changed while read (a partition state written meanwhile): next round.
                log.info("Deleting topic %s: %s; trying again", name, type(exc).__name__)
                self._job.schedule()
                continue
            log.info("[Controller id=%d] Deleted topic %s", state.controller_id, name)

    async def _tree(self, path: str) -> list[str]:
        """`path` and everything under it, children before their parents."""
        try:
            children = await self._client.get_children(path)
        except NoNodeError:
            return []
        found: list[str] = []
        for child in children:
            found += await self._tree(f"{path}/{child}")
        found.append(path)
        return found
