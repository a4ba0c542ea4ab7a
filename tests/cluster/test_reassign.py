"""Partition reassignment (AlterPartitionReassignments / ListPartitionReassignments, KIP-455
in ZooKeeper mode) on four `brook serve` brokers: replicas move while clients produce at
acks=all, the leader moves off a removed replica, removed replicas delete their logs,
cancelling restores, bad input gets Kafka's errors and changes nothing, and a move
survives the controller's failover."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from brook.protocol.errors import ErrorCode
from tests.integration.acked import AckRecorder, read_all

from .harness import Cluster, ZooKeeperView, eventually, metadata_of
from .reassign_requests import alter, moved_to, ongoing, topic_znode
from .topics import REPLICATION, state_of, topic_of

TOPIC = "moves"
log = logging.getLogger("tests.cluster.reassign")


def start_four(cluster: Cluster, zk: ZooKeeperView, **extra: Any) -> dict[int, Any]:
    brokers = {
        i: cluster.start(i, {**REPLICATION, "auto.leader.rebalance.enable": False, **extra})
        for i in (1, 2, 3, 4)
    }
    zk.wait_broker_ids([1, 2, 3, 4])
    zk.wait_controller(lambda controller: controller is not None)
    for broker in brokers.values():
        eventually(lambda b=broker: len(metadata_of(b.port).brokers), lambda n: n == 4)
    return brokers


def create(brokers: dict[int, Any], assignment: list[list[int]], **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    topic = NewTopic(TOPIC, len(assignment), replica_assignment=assignment, config=configs)
    admin.create_topics([topic], operation_timeout=20)[TOPIC].result(timeout=30)


def log_dir(broker: Any, partition: int = 0) -> Path:
    return Path(broker.data_dir) / f"{TOPIC}-{partition}"


class KafkaPythonAcks:
    """kafka-python's idempotent producer at acks=all in a thread, recording every
    acknowledged (partition, offset, value)."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self._bootstrap = bootstrap
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> KafkaPythonAcks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        from kafka import KafkaProducer

        try:
            producer = KafkaProducer(
                bootstrap_servers=self._bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=2,
                retries=1000,
                retry_backoff_ms=50,
                delivery_timeout_ms=120_000,
                request_timeout_ms=30_000,
            )
            sequence = 0
            while not self._stop.is_set():
                value = f"kp-{sequence:08d}".encode()
                future = producer.send(TOPIC, value=value, partition=0)
                future.add_callback(
                    lambda meta, v=value: self.acked.append((meta.partition, meta.offset, v))
                )
                future.add_errback(lambda _: self._failed())
                sequence += 1
                if sequence % 50 == 0:
                    producer.flush(60)
            producer.flush(60)
            producer.close(30)
        except BaseException as exc:
            self._error = exc

    def _failed(self) -> None:
        self.failed += 1

    def wait_for(self, count: int) -> None:
        eventually(lambda: len(self.acked), lambda n: n >= count or self._error is not None, 60)
        assert self._error is None, self._error


def test_move_while_producing_keeps_every_acknowledged_record(cluster: Cluster, zk: ZooKeeperView):
    """RF 3 {1,2,3} -> {2,3,4} while confluent-kafka and kafka-python produce at acks=all
    (min.insync.replicas=2): the leader (1, the removed replica) moves, broker 4 has a
    copy, broker 1's log directory is gone, and every acknowledged record is read back
    once, from the new replicas."""
    brokers = start_four(cluster, zk)
    create(brokers, [[1, 2, 3]], **{"min.insync.replicas": "2"})
    eventually(lambda: state_of(zk, TOPIC, 0)["leader"], lambda leader: leader == 1)
    before = state_of(zk, TOPIC, 0)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    with (
        AckRecorder(
            bootstrap, TOPIC, "ck", partitions=1, acks="all", idempotent=True, rate=2000
        ) as confluent,
        KafkaPythonAcks(bootstrap) as kafka_python,
    ):
        confluent.wait_for_acks(500, timeout=60)
        kafka_python.wait_for(200)
        started = time.monotonic()
        top, results = alter(brokers[3].port, {(TOPIC, 0): [2, 3, 4]})
        assert (top, results) == (ErrorCode.none, {(TOPIC, 0): (ErrorCode.none, None)})
        zk.wait_data(
            f"/brokers/topics/{TOPIC}",
            lambda data, _: data is not None and moved_to(zk, TOPIC, 0, [2, 3, 4]),
        )
        moved_s = time.monotonic() - started
        # The clients go on at the new leader.
        confluent.wait_for_acks(len(confluent.acked) + 500, timeout=60)
        kafka_python.wait_for(len(kafka_python.acked) + 200)
    after = state_of(zk, TOPIC, 0)
    assert after["leader"] == 2  # the first target replica in the ISR
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert 1 not in after["isr"]
    eventually(lambda: log_dir(brokers[1]).exists(), lambda exists: not exists)
    assert log_dir(brokers[4]).exists()
    for broker in brokers.values():
        eventually(
            lambda b=broker: topic_of(b.port, TOPIC)[1][0].replicas, lambda r: r == (2, 3, 4)
        )
    stored = read_all(bootstrap, TOPIC, 1)
    by_value = {value: offset for offset, value in stored[0]}
    assert len(by_value) == len(stored[0]), "a record is stored twice"
    for partition, offset, value in confluent.acked + kafka_python.acked:
        assert (partition, by_value.get(value)) == (0, offset), value
    assert ongoing(brokers[1].port) == (ErrorCode.none, {})
    log.warning(  # what the closing notes report
        "reassignment under load: moved in %.2f s; acknowledged %d (confluent-kafka) + %d"
        " (kafka-python), failed %d + %d, stored %d; 0 lost, 0 duplicates",
        moved_s,
        len(confluent.acked),
        len(kafka_python.acked),
        confluent.failed,
        kafka_python.failed,
        len(stored[0]),
    )


def _held_by_a_stopped_replica(cluster: Cluster, zk: ZooKeeperView) -> dict[int, Any]:
    """Four brokers, "moves" on {1,2,3}, and broker 3 stopped cleanly: a move to {2,3,4}
    then stays in progress (3 cannot be in the ISR) until 3 comes back, so the tests can
    look at it without racing it."""
    brokers = start_four(cluster, zk)
    create(brokers, [[1, 2, 3]])
    brokers[3].stop(timeout=30)
    zk.wait_broker_ids([1, 2, 4])
    eventually(lambda: state_of(zk, TOPIC, 0)["isr"], lambda isr: 3 not in isr)
    return brokers


def test_a_move_in_progress_is_listed_and_cancelled(cluster: Cluster, zk: ZooKeeperView):
    """While a move waits for a target replica: ListPartitionReassignments (from any
    broker) shows replicas, adding and removing; Metadata shows the union of the replicas;
    the added broker has a copy in the ISR; CreatePartitions is refused. Cancelling
    restores the original replicas, takes the added one out of the ISR and deletes its
    log; cancelling again is NO_REASSIGNMENT_IN_PROGRESS."""
    brokers = _held_by_a_stopped_replica(cluster, zk)
    top, results = alter(brokers[4].port, {(TOPIC, 0): [2, 3, 4]})
    assert (top, results) == (ErrorCode.none, {(TOPIC, 0): (ErrorCode.none, None)})
    moving = ([2, 3, 4, 1], [4], [1])
    for broker_id in (1, 2, 4):
        assert ongoing(brokers[broker_id].port) == (ErrorCode.none, {(TOPIC, 0): moving})
        assert ongoing(brokers[broker_id].port, [(TOPIC, 0), (TOPIC, 9), ("nope", 0)]) == (
            ErrorCode.none,
            {(TOPIC, 0): moving},
        )
        eventually(
            lambda b=brokers[broker_id]: topic_of(b.port, TOPIC)[1][0].replicas,
            lambda replicas: replicas == (2, 3, 4, 1),
        )
    held = topic_znode(zk, TOPIC)
    assert (held["adding_replicas"], held["removing_replicas"]) == ({"0": [4]}, {"0": [1]})
    from tests.integration.processes import run_brook

    described = run_brook(
        ["topics", "--bootstrap-server", brokers[2].bootstrap, "--describe", "--topic", TOPIC]
    )
    assert "Replicas: 2,3,4,1" in described.output, described.output
    eventually(lambda: state_of(zk, TOPIC, 0)["isr"], lambda isr: 4 in isr)
    assert log_dir(brokers[4]).exists()
    admin = AdminClient({"bootstrap.servers": brokers[2].bootstrap})
    from confluent_kafka.admin import NewPartitions

    refused = admin.create_partitions([NewPartitions(TOPIC, 2)])[TOPIC]
    try:
        refused.result(timeout=30)
        raise AssertionError("CreatePartitions during a move was accepted")
    except Exception as exc:
        assert "REASSIGNMENT_IN_PROGRESS" in repr(exc) or "reassignment" in str(exc).lower()

    top, results = alter(brokers[1].port, {(TOPIC, 0): None})
    assert (top, results) == (ErrorCode.none, {(TOPIC, 0): (ErrorCode.none, None)})
    # Kafka's original replicas: the union less the adding ones, in the union's order.
    assert moved_to(zk, TOPIC, 0, [2, 3, 1])
    eventually(lambda: state_of(zk, TOPIC, 0)["isr"], lambda isr: 4 not in isr)
    eventually(lambda: log_dir(brokers[4]).exists(), lambda exists: not exists)
    assert ongoing(brokers[2].port) == (ErrorCode.none, {})
    assert alter(brokers[2].port, {(TOPIC, 0): None}) == (
        ErrorCode.none,
        {(TOPIC, 0): (ErrorCode.no_reassignment_in_progress, None)},
    )
    assert len(topic_of(brokers[1].port, TOPIC)[1]) == 1


def test_bad_reassignments_get_kafkas_errors_and_change_nothing(
    cluster: Cluster, zk: ZooKeeperView
):
    """Empty, duplicate and negative replica lists and brokers that are not alive are
    INVALID_REPLICA_ASSIGNMENT with Kafka's messages, an unknown topic or partition
    UNKNOWN_TOPIC_OR_PARTITION, a cancel of nothing NO_REASSIGNMENT_IN_PROGRESS, each
    answered per partition beside a good one; a forwarded request that lands on a broker
    that is not the controller is NOT_CONTROLLER. The topic's znode is untouched."""
    brokers = start_four(cluster, zk)
    create(brokers, [[1, 2, 3], [2, 3, 4]])
    data_before, stat_before = zk.get(f"/brokers/topics/{TOPIC}")
    controller = zk.wait_controller(lambda c: c is not None)
    other = next(b for b in brokers if b != controller)
    top, results = alter(
        brokers[other].port,
        {
            (TOPIC, 0): [],
            (TOPIC, 1): [2, 2, 3],
            ("nope", 0): [1, 2, 3],
            (TOPIC, 7): [1, 2],
            ("nope", 1): None,
        },
    )
    assert top == ErrorCode.none
    assert results == {
        (TOPIC, 0): (
            ErrorCode.invalid_replica_assignment,
            "Empty replica list specified in partition reassignment.",
        ),
        (TOPIC, 1): (
            ErrorCode.invalid_replica_assignment,
            "Duplicate replica ids in partition reassignment replica list: List(2, 2, 3)",
        ),
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, "The partition does not exist."),
        (TOPIC, 7): (ErrorCode.unknown_topic_or_partition, "The partition does not exist."),
        ("nope", 1): (ErrorCode.no_reassignment_in_progress, None),
    }
    top, results = alter(brokers[other].port, {(TOPIC, 0): [1, -2], (TOPIC, 1): [2, 3, 9]})
    assert results == {
        (TOPIC, 0): (
            ErrorCode.invalid_replica_assignment,
            "Invalid broker id in replica list: List(1, -2)",
        ),
        (TOPIC, 1): (
            ErrorCode.invalid_replica_assignment,
            "Replica assignment has brokers that are not alive. Replica list: List(9),"
            " live broker list: Set(1, 2, 3, 4)",
        ),
    }
    data_after, stat_after = zk.get(f"/brokers/topics/{TOPIC}")
    assert (data_after, stat_after.version) == (data_before, stat_before.version)
    # A request forwarded once is answered where it lands, never forwarded again.
    from kio.schema.alter_partition_reassignments.v0 import request as alter0

    from tests.integration.raw_client import RawClient

    with RawClient(brokers[other].port, client_id="broker-9") as client:
        response = client.request(
            alter0.AlterPartitionReassignmentsRequest(
                topics=(
                    alter0.ReassignableTopic(
                        name=TOPIC,
                        partitions=(
                            alter0.ReassignablePartition(partition_index=0, replicas=(2, 3, 4)),
                        ),
                    ),
                )
            )
        )
    assert (response.error_code, response.responses) == (ErrorCode.not_controller, ())
    assert zk.get(f"/brokers/topics/{TOPIC}")[1].version == stat_before.version
    # The brokers still serve: a good move completes.
    assert alter(brokers[controller].port, {(TOPIC, 1): [4, 3, 2]})[1] == {
        (TOPIC, 1): (ErrorCode.none, None)
    }
    zk.wait_data(
        f"/brokers/topics/{TOPIC}",
        lambda data, _: data is not None and moved_to(zk, TOPIC, 1, [4, 3, 2]),
    )


def test_a_move_survives_the_controllers_failover(cluster: Cluster, zk: ZooKeeperView):
    """A move held in progress, then the controller killed: the state is in ZooKeeper, so
    the next controller completes the move once the held replica is back."""
    brokers = _held_by_a_stopped_replica(cluster, zk)
    assert alter(brokers[1].port, {(TOPIC, 0): [2, 3, 4]})[1] == {
        (TOPIC, 0): (ErrorCode.none, None)
    }
    eventually(lambda: state_of(zk, TOPIC, 0)["isr"], lambda isr: 4 in isr)
    epoch = zk.controller_epoch()
    controller = zk.wait_controller(lambda c: c is not None)
    assert controller is not None
    brokers[controller].kill()
    successor = zk.wait_controller(lambda c: c not in (None, controller))
    assert zk.controller_epoch() > epoch
    # Until the successor has taken its win in (NOT_CONTROLLER before: a client retries).
    _, moves = eventually(
        lambda: ongoing(brokers[successor].port), lambda answer: answer[0] == ErrorCode.none
    )
    assert moves == {(TOPIC, 0): ([2, 3, 4, 1], [4], [1])}
    # Broker 3 back (and the killed one: it may be a target replica too).
    brokers[3] = cluster.restart(brokers[3], 3, extra=REPLICATION)
    brokers[controller] = cluster.restart(brokers[controller], controller, extra=REPLICATION)
    zk.wait_data(
        f"/brokers/topics/{TOPIC}",
        lambda data, _: data is not None and moved_to(zk, TOPIC, 0, [2, 3, 4]),
    )
    after = state_of(zk, TOPIC, 0)
    assert after["leader"] in (2, 3, 4) and 1 not in after["isr"]
    eventually(lambda: log_dir(brokers[1]).exists(), lambda exists: not exists)
    assert ongoing(brokers[2].port) == (ErrorCode.none, {})


def test_an_old_tools_admin_znode_is_honoured(cluster: Cluster, zk: ZooKeeperView):
    """/admin/reassign_partitions written as Kafka 2.x's tool wrote it: the controller
    moves the partitions it names, drops the entries it cannot move (an unknown topic, a
    broker that is not alive), and deletes the znode once every move completed."""
    brokers = start_four(cluster, zk)
    create(brokers, [[1, 2, 3], [1, 2, 3]])
    moves = {
        "version": 1,
        "partitions": [
            {"topic": TOPIC, "partition": 0, "replicas": [4, 3, 2]},
            {"topic": TOPIC, "partition": 1, "replicas": [1, 9]},
            {"topic": "nope", "partition": 0, "replicas": [1]},
        ],
    }
    import json

    zk.client.create(zk.path("/admin/reassign_partitions"), json.dumps(moves).encode())
    zk.wait_data("/admin/reassign_partitions", lambda data, stat: stat is None)
    assert moved_to(zk, TOPIC, 0, [4, 3, 2])
    assert moved_to(zk, TOPIC, 1, [1, 2, 3])
    eventually(lambda: log_dir(brokers[1]).exists(), lambda exists: not exists)
    assert ongoing(brokers[2].port) == (ErrorCode.none, {})
