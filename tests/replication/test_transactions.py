"""Transactions whose coordinator and partitions sit on different brokers: the
coordinator sends the markers to the partitions' leaders (WriteTxnMarkers), and a
partition leader asks the coordinator whether a transactional write belongs to the
transaction (AddPartitionsToTxn v5), as Kafka's brokers do between them."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from brook.coordinator_state.transaction_metadata import TransactionState
from tests.integration.raw_client import RawClient
from tests.integration.test_transaction_version_2 import TXN_ID, _end, _init, _produce

from .harness import ScriptedController


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    while True:
        message = consumer.poll(10)
        assert message is not None, "no end of partition within 10 s"
        if message.error() is not None:
            assert message.error().code() == -191, message.error()  # _PARTITION_EOF
            break
        values.append(message.value())
    consumer.close()
    return values


def _split_cluster(cluster: ScriptedController) -> tuple:
    """Broker 1 coordinates transactions; broker 0 leads `near`, broker 1 leads `far`."""
    first, second = cluster.start(0), cluster.start(1)
    cluster.create_topic("__transaction_state", [0, 1])
    cluster.elect("__transaction_state", 0, leader=1)
    cluster.create_topic("near", [0, 1])
    cluster.create_topic("far", [0, 1])
    cluster.elect("far", 0, leader=1)
    return first, second


def test_markers_reach_partitions_led_by_other_brokers(cluster: ScriptedController):
    first, second = _split_cluster(cluster)
    bootstrap = f"{first.bootstrap},{second.bootstrap}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "split-tx"})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("near", value=b"committed-near", partition=0)
    producer.produce("far", value=b"committed-far", partition=0)
    producer.commit_transaction(20)
    producer.begin_transaction()
    producer.produce("near", value=b"aborted-near", partition=0)
    assert producer.flush(20) == 0  # written, so that the abort needs its marker
    producer.abort_transaction(20)
    # The commit marker went from broker 1 to broker 0's `near` over the network, the
    # abort marker too; read_committed shows the committed record only.
    assert _read_committed(bootstrap, "near") == [b"committed-near"]
    assert _read_committed(bootstrap, "far") == [b"committed-far"]
    # Both replicas end with both markers (2 records, 2 markers), everything stable.
    for broker_id in (0, 1):
        cluster.wait_for(
            lambda b=broker_id: (
                cluster.partition_state(b, "near")["last_stable_offset"]
                == cluster.partition_state(b, "near")["high_watermark"]
                == 4
            ),
            f"broker {broker_id}'s markers",
        )


def test_a_leader_asks_a_remote_coordinator_to_add_its_partition(cluster: ScriptedController):
    first, second = _split_cluster(cluster)
    with RawClient(second.port) as coordinator, RawClient(first.port) as leader:
        producer = _init(coordinator)
        # Transaction version 2: Produce v12 to broker 0, which asks broker 1 to add
        # `near` to the producer's transaction before it appends.
        assert _produce(leader, "near", producer, 0, [b"v2"]) == "none"
        error, next_id, next_epoch = _end(coordinator, producer, commit=True)
        assert error == "none" and (next_id, next_epoch) == (producer[0], producer[1] + 1)
        # The commit done (its marker written on broker 0, CompleteCommit logged): until
        # then the coordinator answers a check CONCURRENT_TRANSACTIONS, as Kafka's does.
        cluster.wait_for(
            lambda: (
                second.call(lambda: second.broker.transactions.describe(TXN_ID)).state
                is TransactionState.COMPLETE_COMMIT
            ),
            "the commit's completion",
        )
        # An older Produce (v11) outside the transaction is refused by the coordinator's
        # answer to the leader's check: TRANSACTION_ABORTABLE.
        assert (
            _produce(leader, "near", (next_id, next_epoch), 0, [b"late"], version=11)
            == "transaction_abortable"
        )
    assert _read_committed(first.bootstrap, "near") == [b"v2"]


def test_markers_carry_the_coordinators_epoch_and_fence_a_replaced_one(
    cluster: ScriptedController,
):
    from kio.schema.write_txn_markers.v1 import request as markers_request

    first, second = _split_cluster(cluster)  # broker 1 coordinates, in leader epoch 1
    bootstrap = f"{first.bootstrap},{second.bootstrap}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "moving-tx"})
    producer.init_transactions(20)
    producer.begin_transaction()
    producer.produce("near", value=b"one", partition=0)
    producer.commit_transaction(20)
    # The coordinator moves to broker 0 (leader epoch 2), which loads the transaction.
    cluster.elect("__transaction_state", 0, leader=0)
    producer.begin_transaction()
    producer.produce("near", value=b"two", partition=0)
    producer.commit_transaction(20)
    assert _read_committed(bootstrap, "near") == [b"one", b"two"]
    # A late marker of the replaced coordinator (epoch 1) is refused by the partition.
    pid = first.call(
        lambda: first.broker.replicas.partition("near", 0).active_producers()[0].producer_id
    )
    with RawClient(first.port) as client:
        response = client.request(
            markers_request.WriteTxnMarkersRequest(
                markers=(
                    markers_request.WritableTxnMarker(
                        producer_id=pid,
                        producer_epoch=0,
                        transaction_result=False,
                        topics=(
                            markers_request.WritableTxnMarkerTopic(
                                name="near", partition_indexes=(0,)
                            ),
                        ),
                        coordinator_epoch=1,
                    ),
                )
            )
        )
    error = response.markers[0].topics[0].partitions[0].error_code
    assert error.name == "transaction_coordinator_fenced"
