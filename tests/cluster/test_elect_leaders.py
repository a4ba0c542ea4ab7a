"""Leader elections asked for: ElectLeaders (confluent-kafka's AdminClient.elect_leaders and
raw requests to any broker), PREFERRED and UNCLEAN with Kafka's per-partition errors, and
the controller's own preferred leader rebalance (auto.leader.rebalance.enable)."""

from __future__ import annotations

import json
import signal
from typing import Any

from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brook.protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient

from .harness import Cluster, ZooKeeperView, eventually, metadata_of
from .topics import REPLICATION, start_three, state_of

NO_REBALANCE = {"auto.leader.rebalance.enable": False}


def _create(admin: AdminClient, topic: NewTopic) -> None:
    admin.create_topics([topic], operation_timeout=20)[topic.topic].result(timeout=30)


def _elect(admin: AdminClient, kind: ElectionType, partitions: list[TopicPartition] | None) -> Any:
    results = admin.elect_leaders(kind, partitions).result(timeout=30)
    return {
        (tp.topic, tp.partition): None if error is None else _code(error)
        for tp, error in results.items()
    }


def _code(error: Any) -> int:
    inner = error.args[0] if isinstance(error, KafkaException) else error
    assert isinstance(inner, KafkaError)
    return inner.code()


def _sigterm(broker: Any) -> None:
    broker.process.send_signal(signal.SIGTERM)
    assert broker.process.wait(60) == 0


def _moved_away(cluster: Cluster, zk: ZooKeeperView, brokers: dict[int, Any], broker_id: int):  # type: ignore[no-untyped-def]
    """Stop `broker_id` cleanly (its leaders move away), start it again, and wait until it
    is back in every ISR of "prefs"."""
    _sigterm(brokers[broker_id])
    brokers[broker_id] = cluster.restart(
        brokers[broker_id], broker_id, extra={**REPLICATION, **NO_REBALANCE}
    )
    zk.wait_broker_ids([1, 2, 3])
    for index in range(3):
        eventually(lambda i=index: state_of(zk, "prefs", i), lambda s: broker_id in s["isr"])


def test_preferred_election(cluster: Cluster, zk: ZooKeeperView):
    """A broker back after a stop leads nothing; PREFERRED gives it back the partitions it
    is the preferred replica of (leader epoch + 1); the others get ELECTION_NOT_NEEDED,
    a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION. Asked for every partition,
    only those that needed an election are answered."""
    brokers = start_three(cluster, zk, **NO_REBALANCE)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    _create(admin, NewTopic("prefs", 3, 3))
    preferred = {i: state_of(zk, "prefs", i)["leader"] for i in range(3)}
    target = preferred[0]
    _moved_away(cluster, zk, brokers, target)
    moved = [i for i in range(3) if preferred[i] == target]
    before = {i: state_of(zk, "prefs", i) for i in range(3)}
    assert all(before[i]["leader"] != target for i in moved)

    admin = AdminClient({"bootstrap.servers": brokers[target].bootstrap})
    asked = [TopicPartition("prefs", i) for i in range(3)]
    asked += [TopicPartition("prefs", 7), TopicPartition("missing", 0)]
    results = _elect(admin, ElectionType.PREFERRED, asked)
    assert results[("prefs", 7)] == ErrorCode.unknown_topic_or_partition
    assert results[("missing", 0)] == ErrorCode.unknown_topic_or_partition
    for i in range(3):
        assert results[("prefs", i)] == (None if i in moved else ErrorCode.election_not_needed)
        after = state_of(zk, "prefs", i)
        assert after["leader"] == preferred[i]
        expected_epoch = before[i]["leader_epoch"] + (1 if i in moved else 0)
        assert after["leader_epoch"] == expected_epoch
    # Every partition, again: none needs an election, so none is listed.
    assert _elect(admin, ElectionType.PREFERRED, None) == {}


def test_preferred_leader_not_available_and_forwarding(cluster: Cluster, zk: ZooKeeperView):
    """The preferred replica is down: PREFERRED_LEADER_NOT_AVAILABLE with Kafka's message,
    nothing changes. A raw ElectLeaders to a broker that is not the controller is forwarded
    to it; an unknown election type is INVALID_REQUEST."""
    from kio.schema.elect_leaders.v1 import request as elect1

    brokers = start_three(cluster, zk, **NO_REBALANCE)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    _create(admin, NewTopic("prefs", 3, 3))
    target = state_of(zk, "prefs", 0)["leader"]
    _sigterm(brokers[target])
    zk.wait_broker_ids(sorted(set(brokers) - {target}))
    before = state_of(zk, "prefs", 0)
    controller = zk.wait_controller(lambda c: c is not None and c != target)
    other = next(i for i in brokers if i not in (target, controller))

    def ask(election_type: int) -> Any:
        request = elect1.ElectLeadersRequest(
            election_type=election_type,
            topic_partitions=(elect1.TopicPartitions(topic="prefs", partitions=(0,)),),
        )
        with RawClient(brokers[other].port) as client:
            return client.request(request)

    response = ask(0)
    assert response.error_code == ErrorCode.none
    (topic,) = response.replica_election_results
    (partition,) = topic.partition_result
    assert partition.error_code == ErrorCode.preferred_leader_not_available
    assert partition.error_message == (
        "Failed to elect leader for partition prefs-0 under strategy"
        " PreferredReplicaPartitionLeaderElectionStrategy"
    )
    response = ask(5)
    assert response.error_code == ErrorCode.invalid_request
    assert state_of(zk, "prefs", 0) == before


def test_unclean_election(cluster: Cluster, zk: ZooKeeperView):
    """A partition whose only ISR member is gone stays offline
    (unclean.leader.election.enable is false): UNCLEAN elects the live replica outside the
    ISR; ELIGIBLE_LEADERS_NOT_AVAILABLE while no replica is live; ELECTION_NOT_NEEDED for
    a partition with a live leader."""
    brokers = start_three(cluster, zk, **NO_REBALANCE)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    _create(admin, NewTopic("fragile", 1, replica_assignment=[[2, 3]]))
    _create(admin, NewTopic("healthy", 1, 3))
    eventually(lambda: state_of(zk, "fragile", 0), lambda s: sorted(s["isr"]) == [2, 3])
    _sigterm(brokers[3])
    eventually(lambda: state_of(zk, "fragile", 0), lambda s: s["isr"] == [2])
    _sigterm(brokers[2])
    eventually(lambda: state_of(zk, "fragile", 0), lambda s: s["leader"] == -1)

    results = _elect(admin, ElectionType.UNCLEAN, [TopicPartition("fragile", 0)])
    assert results == {("fragile", 0): ErrorCode.eligible_leaders_not_available}

    brokers[3] = cluster.restart(brokers[3], 3, extra={**REPLICATION, **NO_REBALANCE})
    zk.wait_broker_ids([1, 3])
    # The controller (broker 1, the one left) has seen broker 3 come back.
    eventually(lambda: sorted(metadata_of(brokers[1].port).brokers), lambda ids: ids == [1, 3])
    # Outside the ISR, 3 may not lead on its own.
    assert state_of(zk, "fragile", 0)["leader"] == -1
    before = state_of(zk, "fragile", 0)
    partitions = [TopicPartition("fragile", 0), TopicPartition("healthy", 0)]
    results = _elect(admin, ElectionType.UNCLEAN, partitions)
    assert results == {("fragile", 0): None, ("healthy", 0): ErrorCode.election_not_needed}
    after = state_of(zk, "fragile", 0)
    assert after["leader"] == 3 and after["isr"] == [3]
    assert after["leader_epoch"] == before["leader_epoch"] + 1


def test_auto_leader_rebalance(cluster: Cluster, zk: ZooKeeperView):
    """auto.leader.rebalance.enable with a check every second: a broker back after a stop
    gets its preferred partitions back from the controller, unasked."""
    brokers = start_three(cluster, zk, **{"leader.imbalance.check.interval.seconds": 1})
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    _create(admin, NewTopic("prefs", 3, 3))
    preferred = {i: state_of(zk, "prefs", i)["leader"] for i in range(3)}
    target = preferred[0]
    _sigterm(brokers[target])
    eventually(lambda: state_of(zk, "prefs", 0), lambda s: s["leader"] != target)
    brokers[target] = cluster.restart(
        brokers[target],
        target,
        extra={**REPLICATION, "leader.imbalance.check.interval.seconds": 1},
    )
    for i in range(3):
        eventually(lambda i=i: state_of(zk, "prefs", i), lambda s, i=i: s["leader"] == preferred[i])


def test_brook_leader_election(cluster: Cluster, zk: ZooKeeperView, tmp_path):  # type: ignore[no-untyped-def]
    """`brook leader-election` as kafka-leader-election.sh: its output lines, exit 1 when a
    partition could not be elected, usage errors (exit 2) before anything connects."""
    from tests.integration.processes import run_brook

    brokers = start_three(cluster, zk, **NO_REBALANCE)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    _create(admin, NewTopic("prefs", 3, 3))
    preferred = {i: state_of(zk, "prefs", i)["leader"] for i in range(3)}
    target = preferred[0]
    _moved_away(cluster, zk, brokers, target)
    moved = [f"prefs-{i}" for i in range(3) if preferred[i] == target]
    kept = [f"prefs-{i}" for i in range(3) if preferred[i] != target]
    bootstrap = ["--bootstrap-server", brokers[1].bootstrap]

    chosen = tmp_path / "partitions.json"
    chosen.write_text(
        json.dumps({"partitions": [{"topic": "prefs", "partition": i} for i in range(3)]})
    )
    done = run_brook(
        [
            "leader-election",
            *bootstrap,
            "--election-type",
            "preferred",
            "--path-to-json-file",
            str(chosen),
        ]
    )
    assert done.returncode == 0, done.output
    lines = done.output.splitlines()
    assert (
        f"Successfully completed leader election (PREFERRED) for partitions {', '.join(moved)}"
        in lines
    )
    if kept:
        assert f"Valid replica already elected for partitions {', '.join(kept)}" in lines
    assert all(state_of(zk, "prefs", i)["leader"] == preferred[i] for i in range(3))

    # Nothing needs an election any more: nothing to list.
    done = run_brook(
        ["leader-election", *bootstrap, "--election-type", "PREFERRED", "--all-topic-partitions"]
    )
    assert (done.returncode, done.output) == (0, "")

    done = run_brook(
        [
            "leader-election",
            *bootstrap,
            "--election-type",
            "UNCLEAN",
            "--topic",
            "missing",
            "--partition",
            "0",
        ]
    )
    assert done.returncode == 1
    assert done.output.startswith(
        "Error completing leader election (UNCLEAN) for partition: missing-0: "
    )
    assert "1 replica(s) could not be elected" in done.output

    for usage in (
        ["--election-type", "PREFERRED"],
        ["--election-type", "PREFERRED", "--topic", "prefs"],
        ["--election-type", "PREFERRED", "--all-topic-partitions", "--topic", "prefs"],
        ["--election-type", "SOMETIMES", "--all-topic-partitions"],
    ):
        assert run_brook(["leader-election", *bootstrap, *usage]).returncode == 2, usage
    chosen.write_text('{"partitions": [{"topic": "prefs"}]}')
    done = run_brook(
        [
            "leader-election",
            *bootstrap,
            "--election-type",
            "PREFERRED",
            "--path-to-json-file",
            str(chosen),
        ]
    )
    assert done.returncode == 1 and "is not" in done.output
