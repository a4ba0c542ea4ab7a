"""Replica assignment of new topics and new partitions, as Kafka's AdminUtils does it.

Kafka's three goals (AdminUtils.assignReplicasToBrokers, Kafka 2.x/3.x): spread replicas
evenly over the brokers; spread the followers of the partitions one broker leads over the
other brokers; and when every broker has a rack, put the replicas of a partition on
different racks while racks without one remain.

Rack-unaware: the first replica (the preferred leader) of partition p goes to broker
(p + start_index) % n of the broker list, and replica j + 1 sits at a shift of
1 + (next_replica_shift + j) % (n - 1) after it; the shift grows by one each time p wraps
around the list, so consecutive rounds do not repeat the same follower sets. Both the start
index and the first shift are random unless fixed, which Kafka uses to keep the spread of
an existing topic when partitions are added.

Rack-aware: the brokers are first interleaved by rack (racks in name order, brokers of a
rack in id order), then the leader goes round-robin over that list, and each follower is the
next broker along the shifted walk that neither sits on a rack already holding a replica
(while racks without one remain) nor already holds one (while brokers without one remain).

The random start comes from an injected random.Random, so tests (and a caller that wants a
reproducible layout) choose the seed.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from brook.protocol.errors import (
    ErrorCode,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    KafkaError,
)

# Kafka's AdminUtils keeps one process-wide java.util.Random; this is ours.
_RANDOM = random.Random()


class AdminOperationError(KafkaError):
    """Kafka's kafka.admin.AdminOperationException: an admin operation that cannot proceed
    for a reason no client error code names (brokers with and without racks, an assignment
    missing partition 0). It is not an ApiException, so Kafka's ApiError.fromThrowable answers
    UNKNOWN_SERVER_ERROR and leaves the message out of the response (only the log has it)."""

    error_code = ErrorCode.unknown_server_error


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """Kafka's kafka.admin.BrokerMetadata: a broker's id and rack (None: no broker.rack)."""

    id: int
    rack: str | None = None


class RackAwareMode(enum.Enum):
    """Kafka's RackAwareMode: how broker racks are used when a tool gathers the brokers.

    ENFORCED refuses a mix of brokers with and without racks; SAFE drops the racks when any
    broker lacks one; DISABLED always drops them."""

    ENFORCED = "enforced"
    SAFE = "safe"
    DISABLED = "disabled"


def broker_metadatas(
    brokers: Iterable[BrokerMetadata], rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED
) -> list[BrokerMetadata]:
    """The brokers an assignment is made over, sorted by id, as AdminZkClient's
    getBrokerMetadatas gives them (CreatePartitions and the reassignment tool use it)."""
    brokers = list(brokers)
    with_rack = [broker for broker in brokers if broker.rack is not None]
    partial = 0 < len(with_rack) < len(brokers)
    if rack_aware_mode is RackAwareMode.ENFORCED and partial:
        raise AdminOperationError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line"
            " to make replica assignment without rack information."
        )
    if rack_aware_mode is RackAwareMode.DISABLED or (
        rack_aware_mode is RackAwareMode.SAFE and partial
    ):
        brokers = [BrokerMetadata(broker.id) for broker in brokers]
    return sorted(brokers, key=lambda broker: broker.id)


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerMetadata],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rand: random.Random | None = None,
) -> dict[int, list[int]]:
    """Kafka's AdminUtils.assignReplicasToBrokers: partition id -> replica broker ids, the
    first of them the preferred leader.

    `brokers` in the order the caller gathered them (Kafka sorts by id; broker_metadatas
    does). A negative `fixed_start_index` draws the start index and the first shift from
    `rand`; a negative `start_partition_id` numbers the partitions from 0.
    """
    if n_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers:"
            f" {len(brokers)}."
        )
    rand = rand or _RANDOM
    if all(broker.rack is None for broker in brokers):
        return _assign_rack_unaware(
            [broker.id for broker in brokers],
            n_partitions,
            replication_factor,
            fixed_start_index,
            start_partition_id,
            rand,
        )
    if any(broker.rack is None for broker in brokers):
        raise AdminOperationError(
            "Not all brokers have rack information for replica rack aware assignment."
        )
    racks = {broker.id: broker.rack for broker in brokers if broker.rack is not None}
    return _assign_rack_aware(
        racks, n_partitions, replication_factor, fixed_start_index, start_partition_id, rand
    )


def assign_new_partitions(
    topic: str,
    existing: Mapping[int, Sequence[int]],
    brokers: Sequence[BrokerMetadata],
    num_partitions: int,
    *,
    rand: random.Random | None = None,
) -> dict[int, list[int]]:
    """The replicas of the partitions CreatePartitions adds to `topic` (ids from
    len(existing) up to num_partitions - 1), as AdminZkClient.createNewPartitionsAssignment
    chooses them: the existing replication factor, and the start index at the first broker
    whose id is not below the preferred leader of partition 0, so the new partitions carry on
    the existing spread instead of starting afresh."""
    partition_zero = existing.get(0)
    if partition_zero is None:
        shown = {partition: list(replicas) for partition, replicas in sorted(existing.items())}
        raise AdminOperationError(
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is"
            f" missing. Assignment: {shown}"
        )
    to_add = num_partitions - len(existing)
    if to_add <= 0:
        raise InvalidPartitionsError(
            "The number of partitions for a topic can only be increased."
            f" Topic {topic} currently has {len(existing)} partitions,"
            f" {num_partitions} would not be an increase."
        )
    leader_zero = partition_zero[0]
    start_index = next(
        (index for index, broker in enumerate(brokers) if broker.id >= leader_zero), 0
    )
    return assign_replicas_to_brokers(
        brokers,
        to_add,
        len(partition_zero),
        fixed_start_index=start_index,
        start_partition_id=len(existing),
        rand=rand,
    )


def rack_alternated_broker_list(racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker of each rack in turn (racks in name
    order, brokers of a rack in id order) until every broker is listed; racks that run out
    are skipped. {0: r1, 1: r1, 2: r2} gives [0, 2, 1]."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    queues = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    for turn in range(max((len(queue) for queue in queues), default=0)):
        result.extend(queue[turn] for queue in queues if turn < len(queue))
    return result


def _replica_index(first: int, shift: int, replica: int, n_brokers: int) -> int:
    """Where follower `replica` (0-based) of a partition led at `first` sits: never on the
    leader itself, since the step is between 1 and n_brokers - 1."""
    step = 1 + (shift + replica) % (n_brokers - 1)
    return (first + step) % n_brokers


def _starts(fixed_start_index: int, n_brokers: int, rand: random.Random) -> tuple[int, int]:
    """The start index and the first replica shift: both fixed, or both drawn (in this
    order, as Kafka draws them)."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    start_index = rand.randrange(n_brokers)
    return start_index, rand.randrange(n_brokers)


def _assign_rack_unaware(
    broker_ids: list[int],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rand: random.Random,
) -> dict[int, list[int]]:
    n_brokers = len(broker_ids)
    start_index, shift = _starts(fixed_start_index, n_brokers, rand)
    first_partition = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n_brokers == 0:
            shift += 1
        first = (partition + start_index) % n_brokers
        replicas = [broker_ids[first]]
        replicas.extend(
            broker_ids[_replica_index(first, shift, j, n_brokers)]
            for j in range(replication_factor - 1)
        )
        assignment[partition] = replicas
    return assignment


def _assign_rack_aware(
    racks: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition_id: int,
    rand: random.Random,
) -> dict[int, list[int]]:
    arranged = rack_alternated_broker_list(racks)
    n_brokers = len(arranged)
    n_racks = len(set(racks.values()))
    start_index, shift = _starts(fixed_start_index, n_brokers, rand)
    first_partition = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n_brokers == 0:
            shift += 1
        first = (partition + start_index) % n_brokers
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        # One walk per partition, shared by its followers: a broker skipped for one follower
        # is not offered again to the next (Kafka's running k).
        step = 0
        while len(replicas) < replication_factor:
            broker = arranged[_replica_index(first, shift * n_racks, step, n_brokers)]
            rack = racks[broker]
            step += 1
            # Skip a broker whose rack already has a replica while some rack has none, and a
            # broker that already has a replica while some broker has none.
            if rack in racks_used and len(racks_used) < n_racks:
                continue
            if broker in brokers_used and len(brokers_used) < n_brokers:
                continue
            replicas.append(broker)
            racks_used.add(rack)
            brokers_used.add(broker)
        assignment[partition] = replicas
    return assignment
