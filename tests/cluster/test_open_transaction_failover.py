"""A transaction still open when its coordinator's broker is SIGKILLed.

The coordinator that takes over loads the transaction from the replicated
`__transaction_state` as it stood: Ongoing, with the partitions it has added. A producer
that lives on commits it through the new coordinator, and a read_committed consumer reads
every record of it exactly once; a producer that died with the old coordinator has its
transaction aborted by the new one when it times out, so that the partition's last stable
offset moves past its records and the next transaction there reads as committed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.processes import read_partition
from tests.integration.raw_client import RawClient

from .harness import Cluster, ZooKeeperView, eventually, metadata_of
from .test_coordinators import INTERNAL, _find_coordinator

# The timed-out transaction is aborted within about a second of its timeout.
CLUSTER = {**INTERNAL, "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500}


def _start(cluster: Cluster, zk: ZooKeeperView, transactional_id: str):  # type: ignore[no-untyped-def]
    """Three brokers; the transaction coordinator of `transactional_id`; a topic `orders`
    led by another broker, so that its records and markers outlive the coordinator."""
    brokers = {i: cluster.start(i, CLUSTER) for i in (1, 2, 3)}
    zk.wait_broker_ids([1, 2, 3])
    for broker in brokers.values():
        eventually(lambda b=broker: sorted(metadata_of(b.port).brokers), lambda ids: len(ids) == 3)
    _, coordinator, _ = eventually(
        lambda: _find_coordinator(brokers[1].port, transactional_id, key_type=1),
        lambda found: found[0] == 0,
    )
    others = [i for i in brokers if i != coordinator]
    admin = AdminClient({"bootstrap.servers": brokers[others[0]].bootstrap})
    admin.create_topics(
        [NewTopic("orders", 1, replica_assignment=[[*others, coordinator]])],
        operation_timeout=20,
    )["orders"].result(timeout=30)
    survivors = ",".join(brokers[i].bootstrap for i in others)
    return brokers, coordinator, others, survivors


def _high_watermark(bootstrap: str) -> int:
    # read_uncommitted: librdkafka's ListOffsets takes the consumer's isolation level.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "peek", "isolation.level": "read_uncommitted"}
    )
    try:
        return consumer.get_watermark_offsets(TopicPartition("orders", 0), timeout=10)[1]  # type: ignore[no-any-return]
    finally:
        consumer.close()


def _last_stable_offset(port: int) -> int:
    """The partition's last stable offset, from its leader (ListOffsets, read_committed)."""
    from kio.schema.list_offsets.v2 import request as list2
    from kio.schema.types import BrokerId, TopicName

    request = list2.ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=1,
        topics=(
            list2.ListOffsetsTopic(
                name=TopicName("orders"),
                partitions=(list2.ListOffsetsPartition(partition_index=0, timestamp=-1),),
            ),
        ),
    )
    with RawClient(port) as client:
        response = client.request(request)
    (partition,) = response.topics[0].partitions
    assert partition.error_code == 0
    return partition.offset  # type: ignore[no-any-return]


def _transaction_state(port: int, transactional_id: str) -> str:
    """The state DescribeTransactions gives at the broker that coordinates the id now (read
    as `brook transactions` reads it: a start time of -1, no transaction under way, is
    beyond kio's datetime reader)."""
    from kio.schema.describe_transactions.v0 import request as describe0

    from brook.broker.tools.wire_client import describe_transactions_response

    with RawClient(port) as client:
        client.send(describe0.DescribeTransactionsRequest(transactional_ids=(transactional_id,)))
        _, response = client.receive_with_id(describe_transactions_response())
    (state,) = response.transaction_states
    return state.transaction_state if state.error_code == 0 else f"error {state.error_code}"


def test_an_open_transaction_commits_through_the_new_coordinator(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers, coordinator, others, survivors = _start(cluster, zk, "open-commit")
    producer = Producer(
        {
            "bootstrap.servers": survivors,
            "transactional.id": "open-commit",
            "acks": "all",
            "transaction.timeout.ms": 60000,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("orders", f"before-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    # Written and replicated, not yet readable: the transaction is open.
    assert _high_watermark(survivors) == 10
    assert _last_stable_offset(brokers[others[0]].port) == 0
    assert _transaction_state(brokers[coordinator].port, "open-commit") == "Ongoing"

    brokers[coordinator].kill()
    zk.wait_broker_ids(sorted(others))
    # The transaction goes on and commits at the coordinator that took over.
    for i in range(5):
        producer.produce("orders", f"after-{i}".encode(), partition=0)
    producer.commit_transaction(60)

    expected = [f"before-{i}".encode() for i in range(10)] + [
        f"after-{i}".encode() for i in range(5)
    ]
    # 15 records (offsets 0-14), then the commit marker.
    records = read_partition(survivors, "orders", 0, 15)
    assert [r.value() for r in records] == expected
    _, new_coordinator, _ = _find_coordinator(brokers[others[0]].port, "open-commit", key_type=1)
    assert new_coordinator in others
    # EndTxn answers once PrepareCommit is written; CompleteCommit follows the markers.
    assert (
        eventually(
            lambda: _transaction_state(brokers[new_coordinator].port, "open-commit"),
            lambda state: state == "CompleteCommit",
        )
        == "CompleteCommit"
    )
    assert _last_stable_offset(brokers[others[0]].port) == 16


APPLICATION = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": sys.argv[1],
        "transactional.id": "open-abort",
        "acks": "all",
        "transaction.timeout.ms": 3000,
    })
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("orders", f"lost-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    print("written", flush=True)
    sys.stdin.read()  # until the test kills this process
    """
)


def test_an_open_transaction_of_a_dead_producer_is_aborted_by_the_new_coordinator(
    cluster: Cluster, zk: ZooKeeperView
):
    brokers, coordinator, others, survivors = _start(cluster, zk, "open-abort")
    # The application writes in a transaction and dies before it ends it.
    application = subprocess.Popen(
        [sys.executable, "-c", APPLICATION, survivors],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert application.stdout is not None
        assert application.stdout.readline().strip() == "written"
    finally:
        application.kill()
        application.wait()
    assert _high_watermark(survivors) == 10
    assert _transaction_state(brokers[coordinator].port, "open-abort") == "Ongoing"

    # Its coordinator dies too, before the transaction times out.
    brokers[coordinator].kill()
    zk.wait_broker_ids(sorted(others))

    # The new coordinator aborts it when it times out: an abort marker after the records.
    def state() -> str:
        error, node, _ = _find_coordinator(brokers[others[0]].port, "open-abort", key_type=1)
        if error != 0 or node == coordinator:  # the survivors have not seen the move yet
            return f"coordinator {node}, error {error}"
        return _transaction_state(brokers[node].port, "open-abort")

    assert eventually(state, lambda found: found == "CompleteAbort") == "CompleteAbort"
    assert (
        eventually(lambda: _last_stable_offset(brokers[others[0]].port), lambda lso: lso == 11)
        == 11
    )

    # The next transaction on the partition reads as committed, and only it.
    producer = Producer(
        {"bootstrap.servers": survivors, "transactional.id": "after-abort", "acks": "all"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("orders", f"kept-{i}".encode(), partition=0)
    producer.commit_transaction(30)
    # The aborted records (0-9) and their marker (10) are skipped; kept at 11-13.
    records = read_partition(survivors, "orders", 0, 14)
    assert [r.value() for r in records] == [f"kept-{i}".encode() for i in range(3)]
