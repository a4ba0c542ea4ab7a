"""The transaction coordinator's writes of `__transaction_state` that fail answer with
Kafka's retriable coordinator errors, never with a fatal one:

- too few in-sync replicas for `transaction.state.log.min.isr` (honoured as the topic's
  min.insync.replicas): COORDINATOR_NOT_AVAILABLE, and nothing of the state changes;
- the coordinator killed again and again under a transactional producer: the producer
  never has to be thrown away, and a read_committed consumer reads exactly the
  transactions whose commit it was told of.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.raw_client import RawClient

from .harness import Cluster, ZooKeeperView, eventually, wait_ready
from .test_coordinators import _find_coordinator
from .test_open_transaction_failover import _transaction_state
from .topics import REPLICATION

TRANSACTION_LOG = {
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.min.isr": 2,
    "default.replication.factor": 3,
    "min.insync.replicas": 2,
    **REPLICATION,
}
STATE = "/brokers/topics/__transaction_state/partitions/0/state"


def _coordinator(brokers: dict[int, Any], transactional_id: str) -> int:
    """The broker that coordinates the id, as any live broker answers FindCoordinator."""
    live = [b for b in brokers.values() if b.process is not None and b.process.poll() is None]

    def find() -> tuple[int, int, str | None]:
        return _find_coordinator(live[0].port, transactional_id, key_type=1)

    return int(eventually(find, lambda found: found[0] == 0)[1])


def _init(client: RawClient, transactional_id: str) -> Any:
    from kio.schema.init_producer_id.v1 import request as init1

    return client.request(
        init1.InitProducerIdRequest(
            transactional_id=transactional_id,
            transaction_timeout=datetime.timedelta(seconds=60),
        )
    )


def _add_partition(client: RawClient, transactional_id: str, session: Any, topic: str) -> str:
    from kio.schema.add_partitions_to_txn.v1 import request as add1

    response = client.request(
        add1.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id,
            v3_and_below_producer_id=session.producer_id,
            v3_and_below_producer_epoch=session.producer_epoch,
            v3_and_below_topics=(add1.AddPartitionsToTxnTopic(name=topic, partitions=(0,)),),
        )
    )
    result = response.results_by_topic_v3_and_below[0].results_by_partition[0]
    return str(result.partition_error_code.name)


def _end_txn(client: RawClient, transactional_id: str, session: Any) -> str:
    from kio.schema.end_txn.v1 import request as end1

    response = client.request(
        end1.EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=session.producer_id,
            producer_epoch=session.producer_epoch,
            committed=True,
        )
    )
    return str(response.error_code.name)


def test_writes_below_the_transaction_log_min_isr_are_retriable(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers = {i: cluster.start(i, TRANSACTION_LOG) for i in (1, 2, 3)}
    wait_ready(zk, brokers)
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic("goods", 1)])["goods"].result(30)
    _coordinator(brokers, "checkout")  # __transaction_state is made at the first look
    zk.wait_data(STATE, lambda data, _: data is not None and len(zk.json(STATE)["isr"]) == 3)

    def init() -> tuple[int, Any]:
        # The coordinator answers once it has loaded its partition (NOT_COORDINATOR or
        # COORDINATOR_LOAD_IN_PROGRESS before: a client looks again and retries).
        node = _coordinator(brokers, "checkout")
        with RawClient(brokers[node].port) as client:
            return node, _init(client, "checkout")

    node, session = eventually(init, lambda found: found[1].error_code.name == "none")
    assert zk.json(STATE)["leader"] == node
    with RawClient(brokers[node].port) as client:
        assert _add_partition(client, "checkout", session, "goods") == "none"
    # Kafka creates the log with transaction.state.log.min.isr as its min.insync.replicas.
    assert zk.json("/config/topics/__transaction_state")["config"]["min.insync.replicas"] == "2"

    followers = [i for i in brokers if i != node]
    for broker_id in followers:
        assert brokers[broker_id].stop() == 0
    zk.wait_data(STATE, lambda data, _: data is not None and b'"isr":[%d]' % node in data)
    with RawClient(brokers[node].port) as client:
        assert _end_txn(client, "checkout", session) == "coordinator_not_available"
        assert _init(client, "other").error_code.name == "coordinator_not_available"
    assert _transaction_state(brokers[node].port, "checkout") == "Ongoing"

    for broker_id in followers:
        brokers[broker_id] = cluster.restart(brokers[broker_id], broker_id, extra=TRANSACTION_LOG)
    zk.wait_data(STATE, lambda data, _: data is not None and len(zk.json(STATE)["isr"]) >= 2)

    def end() -> str:
        with RawClient(brokers[node].port) as client:
            return _end_txn(client, "checkout", session)

    assert eventually(end, lambda error: error == "none") == "none"


KILLS = 4


class _TransactionalWriter(threading.Thread):
    """Transactions of three records each, one after another, until told to stop: what
    it was told committed, what it aborted, and any error that made the producer
    unusable (fatal)."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": "ledger-writer",
                "transaction.timeout.ms": 30000,
                "linger.ms": 1,
            }
        )
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.fatal: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        producer = self.producer
        producer.init_transactions(60)
        number = 0
        while not self.stopping.is_set():
            values = [f"t{number}-{i}".encode() for i in range(3)]
            number += 1
            try:
                producer.begin_transaction()
                for value in values:
                    producer.produce("ledger", value=value, partition=0)
                producer.commit_transaction(60)
                self.committed.extend(values)
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal():
                    self.fatal.append(str(error))
                    return
                if error.txn_requires_abort():
                    self._abort(values)
                elif not error.retriable():
                    self.fatal.append(f"not retriable: {error}")
                    return
                else:
                    # A commit that timed out: try it again, as librdkafka asks.
                    self._commit_again(values)

    def _abort(self, values: list[bytes]) -> None:
        self._until_done("abort", self.producer.abort_transaction, self.aborted, values)

    def _commit_again(self, values: list[bytes]) -> None:
        self._until_done("commit again", self.producer.commit_transaction, self.committed, values)

    def _until_done(
        self, what: str, end: Callable[[float], None], into: list[bytes], values: list[bytes]
    ) -> None:
        """End the transaction as librdkafka asks: again while it is retriable, by an abort
        when a commit turns out to need one; anything else is fatal for the test."""
        while True:
            try:
                end(60)
                into.extend(values)
                return
            except KafkaException as exc:
                error = exc.args[0]
                if what != "abort" and error.txn_requires_abort():
                    self._abort(values)
                    return
                if error.fatal() or not error.retriable():
                    self.fatal.append(f"{what}: {error}")
                    self.stopping.set()
                    return


def test_a_transactional_producer_lives_through_coordinator_kills(
    cluster: Cluster, zk: ZooKeeperView
):
    fast = {**TRANSACTION_LOG, "zookeeper.session.timeout.ms": 1000}
    brokers = {i: cluster.start(i, fast) for i in (1, 2, 3)}
    wait_ready(zk, brokers)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("ledger", 1)])["ledger"].result(30)
    writer = _TransactionalWriter(bootstrap)
    writer.start()
    try:
        for kill in range(KILLS):
            done = len(writer.committed)
            eventually(lambda: len(writer.committed), lambda n, d=done: n >= d + 30, timeout=60)
            node = _coordinator(brokers, "ledger-writer")
            brokers[node].kill()
            # A new coordinator takes over once the killed broker's session expires.
            zk.wait_data(
                STATE, lambda data, _, n=node: data is not None and zk.json(STATE)["leader"] != n
            )
            brokers[node] = cluster.restart(brokers[node], node, extra=fast)
            zk.wait_broker_ids([1, 2, 3])
            assert not writer.fatal, f"after kill {kill + 1}: {writer.fatal}"
        done = len(writer.committed)
        eventually(lambda: len(writer.committed), lambda n: n >= done + 30, timeout=60)
    finally:
        writer.stopping.set()
        writer.join(120)
    assert not writer.fatal
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ledger-audit",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition("ledger", 0, 0)])
        read: list[bytes] = []
        deadline = time.monotonic() + 60
        # Past the last committed record, or the markers' offsets: until the log end.
        _, end = consumer.get_watermark_offsets(TopicPartition("ledger", 0), timeout=10)
        while time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                if consumer.position([TopicPartition("ledger", 0)])[0].offset >= end:
                    break
                continue
            if message.error() is None:
                read.append(message.value())
    finally:
        consumer.close()
    assert read == writer.committed
    assert not set(read) & set(writer.aborted)
