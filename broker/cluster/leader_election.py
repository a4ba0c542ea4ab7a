"""Partition leader election, as Kafka's ZooKeeper-era controller decides it.

Kafka's PartitionLeaderElectionAlgorithms pick a leader, and kafka.controller.Election
derives the new ISR from it; this module does both, as pure functions over plain data:

- the partition's replicas (its assignment, in order: the first is the preferred leader),
- the current ISR,
- the live brokers (registered in ZooKeeper; for every election but controlled shutdown,
  brokers shutting down count as not live, as ControllerContext.isReplicaOnline has it),
- the brokers in controlled shutdown, and the topic's unclean.leader.election.enable.

Each returns the new LeaderAndIsr, or None when no replica may lead (the partition stays
offline, or keeps its leader, as the caller decides). The caller bumps the leader epoch and
writes the state with a conditional write; the leader and ISR are all decided here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The outcome of an election: the new leader and the new ISR.

    `unclean` is True when the leader came from outside the ISR (possible data loss): Kafka
    counts it in UncleanLeaderElectionsPerSec and, from 3.2, marks the partition's leader
    recovery state RECOVERING until the new leader has settled its log."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False


def new_partition_leader(replicas: Sequence[int], live: Collection[int]) -> LeaderAndIsr | None:
    """A new partition's first leader and ISR (PartitionStateMachine's
    initializeLeaderAndIsrForPartitions): the live replicas in replica order, the first of
    them leading. None when no replica is live."""
    live_replicas = tuple(replica for replica in replicas if replica in live)
    if not live_replicas:
        return None
    return LeaderAndIsr(live_replicas[0], live_replicas)


def offline_partition_leader_election(
    replicas: Sequence[int],
    isr: Sequence[int],
    live: Collection[int],
    unclean_leader_election_enable: bool,
) -> LeaderAndIsr | None:
    """The leader of a partition whose leader went offline (or that has none yet after a
    controller failover): the first replica, in replica order, that is live and in the ISR;
    the new ISR is the old one without the brokers that are not live.

    When no ISR member is live, only unclean.leader.election.enable lets the first live
    replica lead, and then the ISR is that leader alone: what the others hold beyond its log
    is lost, which is what enabling unclean election accepts."""
    for replica in replicas:
        if replica in live and replica in isr:
            return LeaderAndIsr(replica, tuple(member for member in isr if member in live))
    if not unclean_leader_election_enable:
        return None
    for replica in replicas:
        if replica in live:
            return LeaderAndIsr(replica, (replica,), unclean=True)
    return None


def reassign_partition_leader_election(
    target_replicas: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> LeaderAndIsr | None:
    """The leader while a reassignment moves a partition (when the current leader is not among
    the target replicas, or is not live): the first of the target replicas that is live and
    in the ISR. The ISR is kept as it is; the reassignment shrinks it later."""
    for replica in target_replicas:
        if replica in live and replica in isr:
            return LeaderAndIsr(replica, tuple(isr))
    return None


def preferred_replica_partition_leader_election(
    replicas: Sequence[int], isr: Sequence[int], live: Collection[int]
) -> LeaderAndIsr | None:
    """Preferred leader election (ElectLeaders PREFERRED, auto.leader.rebalance.enable): the
    first replica leads, but only if it is live and in the ISR; no other replica is tried.
    The ISR is kept."""
    if not replicas:
        return None
    preferred = replicas[0]
    if preferred in live and preferred in isr:
        return LeaderAndIsr(preferred, tuple(isr))
    return None


def controlled_shutdown_partition_leader_election(
    replicas: Sequence[int],
    isr: Sequence[int],
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> LeaderAndIsr | None:
    """A new leader for a partition whose leader is shutting down (ControlledShutdown): the
    first replica that is live, in the ISR and not shutting down. The brokers shutting down
    leave the new ISR, so that acks=all stops waiting for them.

    `live_or_shutting_down`: unlike the other elections, brokers in controlled shutdown are
    still registered and count as live here (isReplicaOnline with includeShuttingDownBrokers).
    """
    for replica in replicas:
        if replica in live_or_shutting_down and replica in isr and replica not in shutting_down:
            new_isr = tuple(member for member in isr if member not in shutting_down)
            return LeaderAndIsr(replica, new_isr)
    return None
