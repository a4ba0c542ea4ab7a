"""Controlled shutdown: a broker stopped cleanly (SIGTERM) in a cluster asks the controller
to move its leaders first, so that producers at acks=all go on without an error, the
partition states name the new leaders before the broker's registration goes, and the
stopped broker leads nothing. The last replica of a partition cannot move (reported, the
broker stops anyway); controlled.shutdown.enable=false skips it; the controller refuses
requests that are not its to act on."""

from __future__ import annotations

import json
import re
import signal
import threading
import urllib.request
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch

from brook.broker.local_ports import free_port
from brook.protocol.controlled_shutdown_schema import (
    ControlledShutdownRequestV1,
    ControlledShutdownRequestV2,
    ControlledShutdownRequestV3,
)
from brook.protocol.errors import ErrorCode
from tests.integration.raw_client import RawClient

from .harness import Cluster, ZooKeeperView, eventually, wait_ready
from .topics import REPLICATION, start_three, state_of, topic_of


def _create(bootstrap: str, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([topic], operation_timeout=20)[topic.topic].result(timeout=30)


class StateHistory:
    """Every version of a partition's state znode a watch sees: (leader, mzxid)."""

    def __init__(self, zk: ZooKeeperView, topic: str, partition: int) -> None:
        self.seen: list[tuple[int, int]] = []

        def watch(data: bytes | None, stat: ZnodeStat | None) -> None:
            if data is not None and stat is not None:
                self.seen.append((json.loads(data)["leader"], stat.mzxid))

        DataWatch(
            zk.client, zk.path(f"/brokers/topics/{topic}/partitions/{partition}/state"), watch
        )

    def first_led_by_another(self, leader: int) -> int:
        """The zxid of the first version seen whose leader is not `leader`."""
        return next(zxid for seen, zxid in self.seen if seen != leader)


def _registration_gone_zxid(zk: ZooKeeperView) -> int:
    """The zxid of the last change of /brokers/ids' children (the stopped broker's
    registration going, when nothing else joined or left after it)."""
    return zk.exists("/brokers/ids").pzxid  # type: ignore[union-attr]


def _sigterm(broker: Any) -> int:
    broker.process.send_signal(signal.SIGTERM)
    return broker.process.wait(60)  # type: ignore[no-any-return]


def test_a_stopping_leader_hands_over_while_producers_go_on(cluster: Cluster, zk: ZooKeeperView):
    """confluent-kafka and kafka-python produce at acks=all (min.insync.replicas 2) while the
    partition's leader is SIGTERMed: the state names a new leader (leader epoch + 1, the
    old leader out of the ISR) before the broker's registration goes, no produce error
    reaches either application, and every acknowledged record is read back."""
    from kafka import KafkaConsumer, KafkaProducer

    brokers = start_three(cluster, zk, **{"min.insync.replicas": 2})
    _create(brokers[1].bootstrap, NewTopic("orders", 1, 3))
    before = eventually(lambda: state_of(zk, "orders", 0), lambda s: sorted(s["isr"]) == [1, 2, 3])
    leader = before["leader"]
    others = [i for i in brokers if i != leader]
    bootstrap = ",".join(brokers[i].bootstrap for i in others)
    history = StateHistory(zk, "orders", 0)

    stop = threading.Event()
    errors: list[Any] = []
    acked: list[bytes] = []
    lock = threading.Lock()

    def confluent_loop() -> None:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "retries": 100}
        )

        def report(error: KafkaError | None, message: Any) -> None:
            with lock:
                (errors if error is not None else acked).append(error or message.value())

        sent = 0
        while not stop.is_set() or sent < 200:
            producer.produce("orders", f"ck-{sent}".encode(), partition=0, on_delivery=report)
            producer.poll(0.005)
            sent += 1
        if producer.flush(60) != 0:
            errors.append("confluent: records left unsent")

    def kafka_python_loop() -> None:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap.split(","), acks="all", retries=100, retry_backoff_ms=100
        )
        futures = []
        sent = 0
        while not stop.is_set() or sent < 200:
            futures.append(
                (f"kp-{sent}".encode(), producer.send("orders", f"kp-{sent}".encode(), partition=0))
            )
            sent += 1
            stop.wait(0.005)
        for value, future in futures:
            try:
                future.get(timeout=60)
                with lock:
                    acked.append(value)
            except Exception as exc:  # what the application would see
                errors.append(exc)
        producer.close()

    threads = [threading.Thread(target=confluent_loop), threading.Thread(target=kafka_python_loop)]
    for thread in threads:
        thread.start()
    eventually(lambda: len(acked), lambda n: n >= 100)

    assert _sigterm(brokers[leader]) == 0
    stop.set()
    for thread in threads:
        thread.join(120)

    assert errors == []
    after = state_of(zk, "orders", 0)
    assert after["leader"] in others
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert leader not in after["isr"]
    assert history.first_led_by_another(leader) < _registration_gone_zxid(zk)
    log = brokers[leader].log_path.read_text()
    assert "Controlled shutdown request returned successfully" in log
    # The controller (whichever broker it was) says what it did in one line a round.
    logs = "".join(broker.log_path.read_text() for broker in brokers.values()).lower()
    assert "new partitions led: 1 (orders 1)" in logs
    assert "leaders moved off brokers shutting down: 1 (orders 1)" in logs

    consumer = KafkaConsumer(
        "orders",
        bootstrap_servers=bootstrap.split(","),
        auto_offset_reset="earliest",
        consumer_timeout_ms=10000,
        group_id=None,
    )
    read = {message.value for message in consumer}
    consumer.close()
    assert set(acked) <= read


def test_a_stopped_controller_leads_nothing(cluster: Cluster, zk: ZooKeeperView):
    """The controller itself stopped cleanly: it moves its own leaders (its ControlledShutdown
    goes to itself) before it goes; Metadata from the others shows no partition it leads,
    each moved one at the next leader epoch."""
    brokers = start_three(cluster, zk)
    _create(brokers[1].bootstrap, NewTopic("spread", 6, 3))
    controller = zk.wait_controller(lambda c: c is not None)
    assert controller is not None
    before = {p: state_of(zk, "spread", p) for p in range(6)}
    led = [p for p, s in before.items() if s["leader"] == controller]
    assert led, "three brokers share the leaders of six partitions"

    assert _sigterm(brokers[controller]) == 0

    other = next(i for i in brokers if i != controller)
    # The leaders moved and the ISRs shrunk reach the other broker's metadata one by one:
    # wait for both.
    _, partitions = eventually(
        lambda: topic_of(brokers[other].port, "spread"),
        lambda seen: all(
            p.leader != controller and controller not in p.isr for p in seen[1].values()
        ),
    )
    for index, seen in partitions.items():
        assert seen.error == ErrorCode.none
        if index in led:
            assert seen.leader_epoch == before[index]["leader_epoch"] + 1
        else:
            assert seen.leader == before[index]["leader"]


def _taken_back(log_text: str, broker_id: int, since: str) -> int:
    """How often a leader's log says it expanded an ISR by `broker_id` at or after the
    time `since` (a log line's timestamp): "Expanding the ISR of t-0 from 1,3 to 1,3,2"."""
    count = 0
    for line in log_text.splitlines():
        if line[:23] < since:
            continue
        found = re.search(r"Expanding the ISR of \S+ from ([\d,]+) to ([\d,]+)", line)
        if found is None:
            continue
        added = set(found[2].split(",")) - set(found[1].split(","))
        count += added == {str(broker_id)}
    return count


def test_brokers_stopped_one_at_a_time_each_hand_over_at_the_first_attempt(
    cluster: Cluster, zk: ZooKeeperView
):
    """A stopping broker that follows many partitions goes on fetching while the
    controller takes it out of their ISRs, and no leader takes it back in (its
    registration says it is in controlled shutdown: KIP-841's rule). Leaders that took it
    back kept it in the ISRs the controller took it out of, round after round, and its
    ControlledShutdown went unanswered for 3 x 30 s."""
    # Kafka's replication settings, and the internal topics a cluster in use has (a
    # transaction and a consumer group made them): 130 partitions, replicated 3 times.
    replicated = {
        "default.replication.factor": 3,
        "offsets.topic.replication.factor": 3,
        "transaction.state.log.replication.factor": 3,
    }
    brokers = {i: cluster.start(i, replicated) for i in (1, 2, 3)}
    wait_ready(zk, brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(f"many-{i}", 6) for i in range(5)]
    for future in admin.create_topics(topics, operation_timeout=20).values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "stop-in-turn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("many-0", b"v")
    producer.commit_transaction(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stop-in-turn"})
    consumer.subscribe(["many-1"])
    eventually(lambda: consumer.poll(0.2) or consumer.assignment(), bool)
    consumer.close()
    controller = zk.json("/controller")["brokerid"]
    partitions = 5 * 6 + 50 + 50
    for broker_id in [b for b in brokers if b != controller] + [controller]:
        assert brokers[broker_id].stop() == 0
        log = brokers[broker_id].log_text()
        if broker_id != controller:
            assert "Controlled shutdown request returned successfully" in log
            # The controller answered at once, and nothing was left to move.
            assert "Retrying controlled shutdown" not in log
            assert "Controlled shutdown: controller" not in log
            # No leader took it back into an ISR though it fetched all along.
            started = next(
                line[:23] for line in log.splitlines() if "Starting controlled shutdown" in line
            )
            taken_back = sum(
                _taken_back(broker.log_text(), broker_id, started)
                for other, broker in brokers.items()
                if other != broker_id
            )
            assert taken_back == 0, f"taken back into ISRs {taken_back} times of {partitions}"


def test_a_stopping_follower_fetches_until_the_controller_takes_it_out_of_the_isr(
    cluster: Cluster, zk: ZooKeeperView
):
    """A follower in controlled shutdown says so in its registration and goes on fetching
    until the controller has taken it out of the ISR: an acks=all record produced while
    the controller has not got to it yet (its ControlledShutdown held 5 s by a fault) is
    acknowledged with the stopping follower still in the ISR. A follower that stopped
    fetching first held every such record back until the controller removed it."""
    admin_ports = {i: free_port() for i in (1, 2, 3)}
    brokers = {
        i: cluster.start(
            i,
            {
                **REPLICATION,
                # Kafka's default: the leader's own lag check would shrink the ISR first.
                "replica.lag.time.max.ms": 30000,
                "admin.listener": f"http://127.0.0.1:{admin_ports[i]}",
            },
        )
        for i in (1, 2, 3)
    }
    wait_ready(zk, brokers)
    controller = zk.wait_controller(lambda c: c is not None)
    assert controller is not None
    leader, stopping = [i for i in brokers if i != controller]
    _create(
        brokers[leader].bootstrap, NewTopic("steady", 1, replica_assignment=[[leader, stopping]])
    )
    eventually(lambda: state_of(zk, "steady", 0), lambda s: s["isr"] == [leader, stopping])
    _arm(admin_ports[controller], {"api": "ControlledShutdown", "delay_ms": 5000})
    producer = Producer({"bootstrap.servers": brokers[leader].bootstrap, "acks": "all"})
    producer.produce("steady", b"before")
    assert producer.flush(30) == 0

    brokers[stopping].process.send_signal(signal.SIGTERM)
    registration = f"/brokers/ids/{stopping}"
    zk.wait_data(registration, lambda data, _: bool(data) and b"in_controlled_shutdown" in data)
    _, before = zk.get("/brokers/topics/steady/partitions/0/state")
    acked: list[KafkaError | None] = []
    producer.produce("steady", b"during", on_delivery=lambda error, _: acked.append(error))
    assert producer.flush(30) == 0 and acked == [None]
    _, after = zk.get("/brokers/topics/steady/partitions/0/state")
    assert after.version == before.version, "the ISR changed before the record was acknowledged"
    assert stopping in state_of(zk, "steady", 0)["isr"]

    assert brokers[stopping].process.wait(60) == 0
    assert state_of(zk, "steady", 0)["isr"] == [leader]
    assert "Controlled shutdown request returned successfully" in brokers[stopping].log_text()
    assert _taken_back(brokers[leader].log_text(), stopping, "") == 0


def _arm(admin_port: int, fault: dict[str, Any]) -> None:
    request = urllib.request.Request(
        f"http://127.0.0.1:{admin_port}/v1/faults", data=json.dumps(fault).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


def test_the_last_replica_cannot_move_and_the_broker_stops_anyway(
    cluster: Cluster, zk: ZooKeeperView
):
    """A partition whose ISR is its leader alone has no one to hand it to: the controller
    reports it remaining, the broker retries per controlled.shutdown.max.retries, logs
    it, and stops anyway (exit 0); the partition then has no leader."""
    extra = {"controlled.shutdown.max.retries": 2, "controlled.shutdown.retry.backoff.ms": 100}
    brokers = start_three(cluster, zk, **extra)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    topic = NewTopic("lonely", 1, replica_assignment=[[2, 3]])
    admin.create_topics([topic], operation_timeout=20)["lonely"].result(timeout=30)
    eventually(lambda: state_of(zk, "lonely", 0), lambda s: sorted(s["isr"]) == [2, 3])

    # The follower goes first (its own controlled shutdown leaves the ISR to broker 2).
    assert _sigterm(brokers[3]) == 0
    eventually(lambda: state_of(zk, "lonely", 0), lambda s: s["isr"] == [2])

    assert _sigterm(brokers[2]) == 0
    log = brokers[2].log_path.read_text()
    assert log.count("have no other in-sync replica to lead them: lonely-0") == 2
    assert "Proceeding to do an unclean shutdown" in log
    # Offline now, keeping its last ISR member for when it returns.
    state = eventually(lambda: state_of(zk, "lonely", 0), lambda s: s["leader"] == -1)
    assert state["isr"] == [2]


def test_disabled_controlled_shutdown_is_skipped(cluster: Cluster, zk: ZooKeeperView):
    """controlled.shutdown.enable=false: the broker stops without asking; its partitions
    move only once its registration has gone (the controller's failover)."""
    brokers = start_three(cluster, zk, **{"controlled.shutdown.enable": False})
    _create(brokers[1].bootstrap, NewTopic("plain", 1, 3))
    before = eventually(lambda: state_of(zk, "plain", 0), lambda s: len(s["isr"]) == 3)
    leader = before["leader"]
    history = StateHistory(zk, "plain", 0)

    assert _sigterm(brokers[leader]) == 0
    gone = _registration_gone_zxid(zk)
    eventually(lambda: state_of(zk, "plain", 0), lambda s: s["leader"] not in (leader, -1))
    assert history.first_led_by_another(leader) > gone
    assert "controlled shutdown" not in brokers[leader].log_path.read_text().lower()


def test_controlled_shutdown_refusals(cluster: Cluster, zk: ZooKeeperView):
    """NOT_CONTROLLER from a broker that is not the controller; BROKER_NOT_AVAILABLE for a
    broker id that is not registered; STALE_BROKER_EPOCH for an epoch older than the
    broker's registration (v2+; v1 carries none). Nothing moves."""
    brokers = start_three(cluster, zk)
    _create(brokers[1].bootstrap, NewTopic("kept", 3, 3))
    controller = zk.wait_controller(lambda c: c is not None)
    assert controller is not None
    other = next(i for i in brokers if i != controller)
    before = {p: state_of(zk, "kept", p) for p in range(3)}
    epoch = zk.exists(f"/brokers/ids/{other}").czxid  # type: ignore[union-attr]

    def ask(port: int, request: Any) -> Any:
        with RawClient(port) as client:
            return client.request(request)

    answer = ask(
        brokers[other].port, ControlledShutdownRequestV3(broker_id=other, broker_epoch=epoch)
    )
    assert answer.error_code == ErrorCode.not_controller
    assert answer.remaining_partitions == ()
    answer = ask(
        brokers[controller].port, ControlledShutdownRequestV3(broker_id=9, broker_epoch=-1)
    )
    assert answer.error_code == ErrorCode.broker_not_available
    for request in (
        ControlledShutdownRequestV2(broker_id=other, broker_epoch=epoch - 1),
        ControlledShutdownRequestV3(broker_id=other, broker_epoch=epoch - 1),
    ):
        answer = ask(brokers[controller].port, request)
        assert answer.error_code == ErrorCode.stale_broker_epoch
    assert {p: state_of(zk, "kept", p) for p in range(3)} == before
    # v1 has no epoch: the controller acts on it.
    answer = ask(brokers[controller].port, ControlledShutdownRequestV1(broker_id=other))
    assert answer.error_code == ErrorCode.none and answer.remaining_partitions == ()
    after = eventually(
        lambda: [state_of(zk, "kept", p) for p in range(3)],
        lambda states: all(s["leader"] != other and other not in s["isr"] for s in states),
    )
    assert all(s["leader"] in brokers for s in after)
    # It still fetches (nothing told it to stop, as its own stop does): its stop ends that.
    assert _sigterm(brokers[other]) == 0
