"""A transaction left open past its transaction.timeout.ms is aborted by the coordinator:
its producer is fenced, its records never reach a read_committed consumer, and the last
stable offset moves past it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from brook.coordinator_state.transaction_metadata import TransactionState

from .clients import create_topic, produce

TIMEOUT_S = 30


@pytest.mark.brook_config(transaction_abort_timed_out_transaction_cleanup_interval_ms=100)
def test_a_timed_out_transaction_is_aborted_and_stays_invisible(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    stalled = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "tx-stalls",
            "transaction.timeout.ms": 1000,
        }
    )
    stalled.init_transactions(TIMEOUT_S)
    stalled.begin_transaction()
    stalled.produce(topic_name, value=b"never-committed", partition=0)
    stalled.flush(TIMEOUT_S)
    produce(bootstrap, topic_name, [(None, b"plain")])  # after it, outside any transaction

    def state() -> TransactionState:
        return brook_broker.call(
            lambda: brook_broker.broker.transactions.describe("tx-stalls").state
        )

    deadline = time.monotonic() + TIMEOUT_S
    while state() is not TransactionState.COMPLETE_ABORT:
        assert time.monotonic() < deadline, state()
        time.sleep(0.05)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic_name}-reader",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    _low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), TIMEOUT_S)
    assert high == 3  # the aborted record, the plain one, the ABORT marker: all stable
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    values = []
    while not values:
        message = consumer.poll(1.0)
        if message is not None and not message.error():
            values.append(message.value())
    assert values == [b"plain"]
    consumer.close()
    with pytest.raises(KafkaException):
        stalled.commit_transaction(TIMEOUT_S)  # fenced by the abort's epoch bump
