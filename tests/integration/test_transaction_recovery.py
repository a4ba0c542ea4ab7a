"""A broker killed in the middle of completing a transaction finishes it after restart.

The broker dies at a crash point (BROOK_CRASH_POINT, broker/server/crash_points.py) right after
the first COMMIT marker of a transaction is written: the PrepareCommit is stored, the
other markers are not. After a restart the coordinator writes the rest, the client's
commit_transaction (retrying across the outage) succeeds, and the offsets the
transaction committed are the group's.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.index import load_request_schema

from brook.broker.server.crash_points import TRANSACTION_MARKER_WRITTEN
from brook.protocol import coordinator_records as cr
from brook.protocol.api_table import ApiKey

from .clients import create_topic, produce, stored_batches
from .raw_client import RawClient

TIMEOUT_S = 60


def _wait_for_state(port: int, transactional_id: str, state: str) -> None:
    """Until the coordinator itself reports the transaction in `state`."""
    request_type = load_request_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0)
    deadline = time.monotonic() + TIMEOUT_S
    with RawClient(port) as client:
        while True:
            [found] = client.request(
                request_type(transactional_ids=(transactional_id,))
            ).transaction_states
            if found.transaction_state == state:
                return
            assert time.monotonic() < deadline, found
            time.sleep(0.05)


def _markers(data_dir, topic: str, partition: int) -> int:
    return sum(header.is_control for header in stored_batches(data_dir, topic, partition))


def test_a_transaction_prepared_before_a_crash_commits_after_restart(brokers, topic_name):
    crashing = brokers.start(env={"BROOK_CRASH_POINT": TRANSACTION_MARKER_WRITTEN})
    bootstrap = crashing.bootstrap
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-group"
    create_topic(bootstrap, source)
    create_topic(bootstrap, sink, partitions=2)
    produce(bootstrap, source, [(None, b"in-%d" % i) for i in range(5)])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-crash"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for partition in (0, 1):
        producer.produce(sink, value=b"out", partition=partition)
    producer.send_offsets_to_transaction(
        [TopicPartition(source, 0, 5)], consumer.consumer_group_metadata(), TIMEOUT_S
    )
    outcome: list[BaseException | None] = []

    def commit() -> None:
        try:
            producer.commit_transaction(TIMEOUT_S)
            outcome.append(None)
        except BaseException as exc:  # reported by the assertion below
            outcome.append(exc)

    committing = threading.Thread(target=commit)
    committing.start()
    assert crashing.process.wait(TIMEOUT_S) < 0  # killed at the crash point
    offsets_partition = cr.group_partition(group, 50)
    written = [_markers(crashing.data_dir, sink, 0), _markers(crashing.data_dir, sink, 1)]
    written.append(_markers(crashing.data_dir, cr.CONSUMER_OFFSETS_TOPIC, offsets_partition))
    assert sum(written) == 1, written  # one marker of three made it before the crash
    assert "Crash point transaction-marker-written reached" in crashing.log_text()

    restarted = brokers.restart(crashing)
    committing.join(TIMEOUT_S)
    assert outcome == [None]
    assert "completing its transaction (PREPARE_COMMIT) after a restart" in restarted.log_text()
    _wait_for_state(restarted.port, "tx-crash", "CompleteCommit")
    after = [_markers(restarted.data_dir, sink, 0), _markers(restarted.data_dir, sink, 1)]
    after.append(_markers(restarted.data_dir, cr.CONSUMER_OFFSETS_TOPIC, offsets_partition))
    # Every partition has its marker; the one written before the crash got it again, as
    # Kafka's coordinator sends all markers again after a restart.
    assert after == [count + 1 for count in written]
    admin = AdminClient({"bootstrap.servers": restarted.bootstrap})
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(source, 0)])]
    )[group].result(TIMEOUT_S)
    assert listed.topic_partitions[0].offset == 5
    consumer.close()
