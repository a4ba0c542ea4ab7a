"""Partition reassignment by the controller (Kafka 2.4+'s KIP-455 in ZooKeeper mode:
KafkaController.onPartitionReassignment).

AlterPartitionReassignments and ListPartitionReassignments reach the controller: a broker
that is not the controller forwards them over the inter-broker listener, as ElectLeaders
(broker/apis/elect_leaders.py). Not through Kafka 2.x's /admin/reassign_partitions znode:
the answer needs each partition's result (INVALID_REPLICA_ASSIGNMENT,
NO_REASSIGNMENT_IN_PROGRESS, ...), which a znode cannot carry back, and Kafka's own admin
clients send both requests to the controller. The znode is still honoured when an old
tool writes it, as Kafka 2.4+'s controller honours it (follow_admin_znode).

The move, with its state in the topic's znode only, so that a new controller resumes it:

1. Asked for: the topic znode gets replicas = target + original (target first, each once),
   `adding_replicas` and `removing_replicas` (one conditional write per topic). Every
   broker's watch does the rest of phase A: a broker added makes the log and follows the
   leader; the leader tracks it and takes it into the ISR once it has caught up. Replicas
   that a replaced move had added and the new target lacks leave the ISR at once (a
   leader among them hands over to the first live target replica in the ISR).
2. Once every target replica is in the ISR (the reconciliation after each state change,
   or a new controller's first one): one ZooKeeper transaction writes the state (the
   leader and its epoch kept if it is a live target replica, else the first live target
   replica in the ISR with leader epoch + 1; the removed replicas out of the ISR) and the
   topic znode (replicas = target, adding and removing cleared). The removed brokers'
   watches then drop the partition and delete its log (Kafka's StopReplica with delete).

A null target cancels: the move is replaced by one back to the original replicas, which
are all in the ISR already, so it completes at the next reconciliation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from brook.protocol.errors import ErrorCode

from ..cluster.leader_election import reassign_partition_leader_election
from ..cluster.reassignment import (
    ReplicaAssignment,
    is_reassignment_complete,
    validate_target_replicas,
)
from . import znodes
from .client import ZooKeeperClient
from .controller_election import ControllerState
from .kazoo_api import BadVersionError, NoNodeError, TransactionRequest
from .topic_watcher import NO_LEADER, NO_STATE, TopicWatcher

log = logging.getLogger("brook.controller")

TopicPartition = tuple[str, int]
# A partition's outcome of an AlterPartitionReassignments: its error and message.
ReassignmentResult = tuple[ErrorCode, str | None]
Fenced = Callable[[ControllerState, Callable[[TransactionRequest], None]], Awaitable[list[Any]]]
# Tries of a topic's write whose znode changed meanwhile (a leader's ISR write came first).
WRITE_ATTEMPTS = 5
UNKNOWN_PARTITION = (ErrorCode.unknown_topic_or_partition, "The partition does not exist.")


class PartitionReassignments:
    def __init__(
        self,
        client: ZooKeeperClient,
        topics: TopicWatcher,
        live: Callable[[], set[int]],
        fenced: Fenced,
        on_change: Callable[[], None],
    ) -> None:
        self._client = client
        self._topics = topics
        self._live = live  # the live brokers that are not shutting down
        self._fenced = fenced
        self._on_change = on_change  # the controller decides again
        # Whether a watch on /admin/reassign_partitions is set (one at a time).
        self._admin_watch_set = False

    def controller_changed(self) -> None:
        """A new term (or session): the old watch may be gone."""
        self._admin_watch_set = False

    def assignment(self, name: str, index: int) -> ReplicaAssignment | None:
        held = self._topics.topic_znodes.get(name)
        if held is None or held[0].topic_id is None or index not in held[0].partitions:
            return None
        znode = held[0]
        return ReplicaAssignment(
            tuple(znode.partitions[index]),
            tuple(znode.adding.get(index, ())),
            tuple(znode.removing.get(index, ())),
        )

    # --- ListPartitionReassignments ---------------------------------------------------------

    def ongoing(
        self, partitions: Sequence[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """The partitions being reassigned, of those asked (None: all); others are left out,
        as Kafka's controller leaves them out."""
        if partitions is None:
            partitions = [
                (name, index)
                for name, (znode, _) in sorted(self._topics.topic_znodes.items())
                for index in sorted(set(znode.adding) | set(znode.removing))
            ]
        found = {}
        for name, index in partitions:
            assignment = self.assignment(name, index)
            if assignment is not None and assignment.is_being_reassigned:
                found[(name, index)] = assignment
        return found

    # --- AlterPartitionReassignments --------------------------------------------------------

    async def alter(
        self, state: ControllerState, asked: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, ReassignmentResult]:
        """Kafka's processApiPartitionReassignment: each partition checked, in Kafka's
        order, then the accepted moves written, one transaction per topic."""
        await self._topics.reads_done()
        marked = set(await self._client.get_children(znodes.DELETE_TOPICS))
        live = self._live()
        results: dict[TopicPartition, ReassignmentResult] = {}
        accepted: dict[str, dict[int, Sequence[int] | None]] = {}
        for (name, index), target in asked.items():
            current = self.assignment(name, index) or ReplicaAssignment(())
            if target is not None:
                error = validate_target_replicas(current, target, live)
                if error is not None:
                    results[(name, index)] = error
                    continue
            elif not current.is_being_reassigned:
                results[(name, index)] = (ErrorCode.no_reassignment_in_progress, None)
                continue
            if name in marked or self.assignment(name, index) is None:
                # Kafka skips a topic queued for deletion with the same answer.
                results[(name, index)] = UNKNOWN_PARTITION
                continue
            accepted.setdefault(name, {})[index] = target
        # The latest request wins over an old tool's znode (Kafka's
        # maybeRemoveFromZkReassignment).
        await self._drop_from_admin_znode(
            state, {(name, index) for name, moves in accepted.items() for index in moves}
        )
        for name, moves in accepted.items():
            outcome = await self._start(state, name, moves, live)
            for index in moves:
                results[(name, index)] = outcome
        return {tp: results[tp] for tp in asked}

    async def _start(
        self,
        state: ControllerState,
        name: str,
        moves: Mapping[int, Sequence[int] | None],
        live: set[int],
    ) -> ReassignmentResult:
        """Write the moves of one topic's partitions; re-read and try again when a leader's
        ISR change came first."""
        for _ in range(WRITE_ATTEMPTS):
            held = self._topics.topic_znodes.get(name)
            if held is None:
                return UNKNOWN_PARTITION
            znode, version = held
            partitions = {p: list(r) for p, r in znode.partitions.items()}
            adding = {p: list(r) for p, r in znode.adding.items()}
            removing = {p: list(r) for p, r in znode.removing.items()}
            state_writes: list[tuple[int, znodes.PartitionState, int, int, tuple[int, ...]]] = []
            for index, target in moves.items():
                current = self.assignment(name, index)
                if current is None:
                    return UNKNOWN_PARTITION  # deleted meanwhile
                new = current.reassign_to(
                    target if target is not None else current.original_replicas
                )
                partitions[index] = list(new.replicas)
                adding[index] = list(new.adding)
                removing[index] = list(new.removing)
                # Replicas a replaced move had added and this one drops go at once
                # (Kafka's updateCurrentReassignment stops the unneeded replicas).
                unneeded = set(current.replicas) - set(new.replicas)
                write = self._without(name, index, unneeded, new.target_replicas, live)
                if write is not None:
                    state_writes.append((index, *write))
                log.info(
                    "[Controller id=%d] %s-%d: %s; replicas %s, adding %s, removing %s",
                    state.controller_id,
                    name,
                    index,
                    "reassignment cancelled" if target is None else f"reassigning to {target}",
                    list(new.replicas),
                    list(new.adding),
                    list(new.removing),
                )
            assert znode.topic_id is not None
            data = znodes.encode_topic(znode.topic_id, partitions, adding, removing)
            try:
                await self._write(state, name, version, data, state_writes)
            except BadVersionError:
                await self._reread(name, [index for index, *_ in state_writes])
                continue
            await self._reread(name, [index for index, *_ in state_writes])
            return ErrorCode.none, None
        return ErrorCode.not_controller, f"the assignment of {name} kept changing; try again"

    def _without(
        self,
        name: str,
        index: int,
        leaving: set[int],
        target: Sequence[int],
        live: set[int],
    ) -> tuple[znodes.PartitionState, int, int, tuple[int, ...]] | None:
        """The state write that takes `leaving` out of a partition's ISR (and its
        leadership to the first live target replica in the ISR): (current, leader, leader
        epoch, ISR); None when none of them is in it."""
        current = self._topics.states.get((name, index))
        if current is None or current is NO_STATE:
            return None
        if not leaving & set(current.isr) and current.leader not in leaving:
            return None
        isr = tuple(member for member in current.isr if member not in leaving)
        if current.leader not in leaving:
            # A follower leaving: the leader and its epoch stay, as for a broker gone.
            return current, current.leader, current.leader_epoch, isr or current.isr
        chosen = reassign_partition_leader_election(target, isr, live)
        if chosen is None:
            return current, NO_LEADER, current.leader_epoch + 1, isr or current.isr
        return current, chosen.leader, current.leader_epoch + 1, chosen.isr

    # --- /admin/reassign_partitions, written by an old tool ----------------------------------

    def _admin_changed(self, _event: Any) -> None:
        self._admin_watch_set = False
        self._on_change()

    async def _read_admin_znode(self) -> tuple[bytes, int] | None:
        watch = None if self._admin_watch_set else self._admin_changed
        try:
            data, stat = await self._client.get(znodes.REASSIGN_PARTITIONS, watch)
        except NoNodeError:
            if watch is not None:
                self._admin_watch_set = True
                if await self._client.exists(znodes.REASSIGN_PARTITIONS, watch) is not None:
                    self._on_change()  # made meanwhile: read it next round
            return None
        if watch is not None:
            self._admin_watch_set = True
        return data, stat.version

    async def follow_admin_znode(self, state: ControllerState) -> None:
        """Kafka 2.x's /admin/reassign_partitions ({"version":1,"partitions":[{"topic",
        "partition","replicas"}]}), as Kafka 2.4+'s controller still honours it: each move
        is started as an AlterPartitionReassignments would start it; a partition leaves the
        znode when its move completed or could not start (unknown, or Kafka's checks of the
        replicas: a log line says why), and the znode goes once empty."""
        read = await self._read_admin_znode()
        if read is None:
            return
        data, version = read
        try:
            moves = znodes.decode_reassign_partitions(data)
        except ValueError as exc:
            log.error("%s; %s deleted", exc, znodes.REASSIGN_PARTITIONS)
            moves = {}
        live = self._live()
        keep: dict[TopicPartition, list[int]] = {}
        for (name, index), target in moves.items():
            current = self.assignment(name, index)
            if current is None:
                log.warning(
                    "%s asks to move %s-%d, which does not exist; dropped",
                    znodes.REASSIGN_PARTITIONS,
                    name,
                    index,
                )
                continue
            if current.is_being_reassigned and current.target_replicas == tuple(target):
                keep[(name, index)] = target  # under way
                continue
            if not current.is_being_reassigned and current.replicas == tuple(target):
                continue  # done
            error = validate_target_replicas(current, target, live)
            if error is not None:
                log.warning(
                    "%s asks to move %s-%d to %s: %s (%s); dropped",
                    znodes.REASSIGN_PARTITIONS,
                    name,
                    index,
                    target,
                    error[0].name.upper(),
                    error[1],
                )
                continue
            outcome = await self._start(state, name, {index: target}, live)
            if outcome[0] is ErrorCode.none:
                keep[(name, index)] = target
        if keep != moves:
            await self._write_admin_znode(state, keep, version)

    async def _drop_from_admin_znode(
        self, state: ControllerState, partitions: set[TopicPartition]
    ) -> None:
        read = await self._read_admin_znode()
        if read is None:
            return
        data, version = read
        try:
            moves = znodes.decode_reassign_partitions(data)
        except ValueError:
            return  # the next round deletes it
        keep = {tp: target for tp, target in moves.items() if tp not in partitions}
        if keep != moves:
            await self._write_admin_znode(state, keep, version)

    async def _write_admin_znode(
        self, state: ControllerState, moves: dict[TopicPartition, list[int]], version: int
    ) -> None:
        path = znodes.REASSIGN_PARTITIONS
        data = znodes.encode_reassign_partitions(moves)

        def build(transaction: TransactionRequest) -> None:
            if moves:
                transaction.set_data(path, data, version)
            else:
                transaction.delete(path, version)

        try:
            await self._fenced(state, build)
        except (BadVersionError, NoNodeError):
            self._on_change()  # changed meanwhile: read it again

    # --- completion -------------------------------------------------------------------------

    async def complete_caught_up(self, state: ControllerState) -> bool:
        """Phase B of every move whose target replicas are all in the ISR (Kafka's
        processPartitionReassignmentIsrChange, and a new controller's resumption): True
        when something was written (the watches bring the new state)."""
        live = self._live()
        wrote = False
        for name, (znode, version) in sorted(self._topics.topic_znodes.items()):
            moving = sorted(set(znode.adding) | set(znode.removing))
            if not moving or znode.topic_id is None:
                continue
            partitions = {p: list(r) for p, r in znode.partitions.items()}
            adding = {p: list(r) for p, r in znode.adding.items()}
            removing = {p: list(r) for p, r in znode.removing.items()}
            state_writes = []
            for index in moving:
                assignment = self.assignment(name, index)
                current = self._topics.states.get((name, index))
                if assignment is None or current is None or current is NO_STATE:
                    continue
                if not is_reassignment_complete(assignment, current.isr):
                    continue
                target = assignment.target_replicas
                isr = tuple(m for m in current.isr if m not in assignment.removing)
                # The leader stays (and its epoch) when it is a live target replica.
                epoch = current.leader_epoch
                if current.leader in target and current.leader in live:
                    leader = current.leader
                else:
                    epoch += 1
                    chosen = reassign_partition_leader_election(target, isr, live)
                    if chosen is None:
                        continue  # no target replica may lead yet: wait for one
                    leader = chosen.leader
                state_writes.append((index, current, leader, epoch, isr))
                partitions[index] = list(target)
                adding.pop(index, None)
                removing.pop(index, None)
                log.info(
                    "[Controller id=%d] Target replicas %s have all caught up with the leader"
                    " for reassigning partition %s-%d: leader %d (was %d), leader epoch %d,"
                    " ISR %s; removed replicas %s",
                    state.controller_id,
                    list(target),
                    name,
                    index,
                    leader,
                    current.leader,
                    epoch,
                    list(isr),
                    list(assignment.removing),
                )
            if not state_writes:
                continue
            data = znodes.encode_topic(znode.topic_id, partitions, adding, removing)
            try:
                await self._write(state, name, version, data, state_writes)
            except BadVersionError:
                log.info("Completing the reassignment of %s: changed meanwhile; next round", name)
            wrote = True
            await self._reread(name, [index for index, *_ in state_writes])
        return wrote

    # --- writes -----------------------------------------------------------------------------

    async def _write(
        self,
        state: ControllerState,
        name: str,
        version: int,
        topic_data: bytes,
        state_writes: Sequence[tuple[int, znodes.PartitionState, int, int, tuple[int, ...]]],
    ) -> None:
        """The topic znode and the partitions' states in one transaction, each conditional
        on the version read: brokers never see the replicas without the ISR that goes
        with them, nor the other way round, stored."""
        writes = [
            (
                znodes.topic_partition_state_path(name, index),
                znodes.encode_partition_state(leader, epoch, isr, state.epoch),
                current.zk_version,
            )
            for index, current, leader, epoch, isr in state_writes
        ]

        def build(transaction: TransactionRequest) -> None:
            transaction.set_data(znodes.topic_path(name), topic_data, version)
            for path, data, zk_version in writes:
                transaction.set_data(path, data, zk_version)

        try:
            await self._fenced(state, build)
        except NoNodeError:
            raise BadVersionError() from None  # deleted meanwhile: read again

    async def _reread(self, name: str, indexes: Sequence[int]) -> None:
        self._topics.reread_topic(name)
        for index in indexes:
            self._topics.reread_state(name, index)
        await self._topics.reads_done()
