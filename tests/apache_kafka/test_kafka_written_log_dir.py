"""Brook serves a log dir Apache Kafka wrote (tests/apache_kafka/kafka_written.py: every
codec with keys and headers, idempotent producers, transactions committed and aborted, a
compacted topic, a KIP-848 consumer group). A Brook broker started on a copy of Kafka's
log dir (with Kafka's node id as its broker.id, as Kafka itself would demand) serves
every record at its offset with its timestamp, read_uncommitted and read_committed alike,
and answers a retried batch of an inherited idempotent producer as the duplicate it is;
the consumer group that Kafka left with live members is loaded from Kafka's records as
Kafka described it, with its committed offsets. (Brook's Spark jobs over the same dir:
tests/spark/test_kafka_written_dir.py.)"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brook.broker.testing import BrokerThread
from brook.protocol.record_batch import split_batches
from brook.storage.reader import SegmentReader
from tests.integration.groups import broker_committed, consumer_group_view
from tests.integration.raw_client import RawClient, produce_request

from .kafka_written import GROUP, KAFKA_NODE_ID, KEYS, KafkaWritten, all_rows, last_values, read


@pytest.fixture
def brook_on_a_copy(kafka_written: KafkaWritten, tmp_path: Path) -> Iterator[BrokerThread]:
    copy = tmp_path / "copy"
    shutil.copytree(kafka_written.data_dir, copy)
    broker = BrokerThread(copy, {"broker.id": KAFKA_NODE_ID}).start()
    try:
        yield broker
    finally:
        broker.stop()


def test_every_record_is_served_at_its_offset_with_its_timestamp(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    topics = {topic: 2 if topic.startswith("codec-") else 1 for topic, _ in kafka_written.rows}
    served = all_rows(brook_on_a_copy.bootstrap, topics)
    for key, rows in kafka_written.rows.items():
        if key[0] == "compacted":
            # Kafka's cleaner may run again between the read and the stop: what Brook serves
            # is then a subset of what was read, with every key's last value kept.
            assert set(served[key]) <= set(rows), key
            assert last_values(served[key]) == last_values(rows), key
        else:
            assert served[key] == rows, key
    # The data set is what it claims to be: aborted records hidden from read_committed,
    # compacted keys.
    txn = {isolation: [row[4] for row in served[("txn", isolation)]] for _, isolation in served}
    assert b"aborted 0" in txn["read_uncommitted"]
    assert b"aborted 0" not in txn["read_committed"] and b"kept 4" in txn["read_committed"]
    compacted = served[("compacted", "read_uncommitted")]
    assert len({row[3] for row in compacted}) == KEYS < len(compacted) < compacted[-1][1] + 1


def test_a_consumer_group_of_kip_848_is_loaded_as_kafka_left_it(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    """Kafka's consumer group records (its epoch, members, target and current
    assignments) replayed by Brook: the same group, members and assignments, and the
    same committed offsets."""
    assert consumer_group_view(brook_on_a_copy.port, GROUP) == kafka_written.group
    assert broker_committed(brook_on_a_copy.port, GROUP) == kafka_written.group_offsets
    assert sorted(kafka_written.group.members) == [f"{GROUP}-a", f"{GROUP}-b"]


def test_kafkas_own_metadata_log_is_not_a_topic(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    names = brook_on_a_copy.call(lambda: {t.name for t in brook_on_a_copy.broker.metadata.topics()})
    assert "__cluster_metadata" not in names
    assert {"txn", "compacted", "codec-zstd"} <= names


def test_a_retried_batch_of_an_inherited_producer_is_a_duplicate(
    kafka_written: KafkaWritten, brook_on_a_copy: BrokerThread
) -> None:
    """The last batch Kafka appended for an idempotent producer, sent again as its
    producer would retry it: Brook answers with the offset Kafka gave it, and appends
    nothing (the producer's state came from Kafka's snapshot and log)."""
    partition_dir = brook_on_a_copy.data_dir / "codec-none-0"
    segment = sorted(partition_dir.glob("*.log"))[-1]
    with SegmentReader(segment) as reader:
        last = [batch for batch in reader.batches() if batch.header.producer_id >= 0][-1]
    raw = bytes(last.data)
    (header,) = split_batches(raw)
    end_before = len(read(brook_on_a_copy.bootstrap, "codec-none", 2, "read_uncommitted"))
    with RawClient(brook_on_a_copy.port) as client:
        response = client.request(produce_request("codec-none", 0, raw))
    answer: Any = response.responses[0].partition_responses[0]
    assert answer.error_code == 0
    assert answer.base_offset == header.base_offset
    assert len(read(brook_on_a_copy.bootstrap, "codec-none", 2, "read_uncommitted")) == end_before
