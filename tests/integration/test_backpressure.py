"""Clients that pipeline Fetches and read nothing: the broker's memory stays bounded, it
keeps answering everyone else, and the slow clients get every response, in order, whole,
when they finally read."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.metadata.v9 import request as metadata9
from kio.schema.produce.v7 import request as produce7

from brook.broker.testing import BrokerProcess
from brook.protocol.record_batch import Record, build_batch, split_batches

from .clients import create_topic
from .raw_client import RawClient, fetch_request

CONNECTIONS = 5
FETCHES_EACH = 50
BATCHES = 8
RECORDS_PER_BATCH = 1000
VALUE = b"v" * 1000
TOPIC_BYTES = BATCHES * RECORDS_PER_BATCH * len(VALUE)  # ~8 MB, returned by every Fetch
FETCH_MAX_BYTES = 50 * 1024 * 1024  # fetch.max.bytes of the Java consumer
# Headroom over the peak before the scenario: the interpreter's allocator and the kernel
# socket buffers of a few hundred requests and responses.
HEADROOM = 128 * 1024 * 1024


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker in its own process, so that its memory is its own."""
    process = BrokerProcess(tmp_path / "data").start()
    try:
        yield process
    finally:
        process.stop()


def _peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), which no sampling can miss."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def _fill(broker: BrokerProcess, topic: str) -> None:
    with RawClient(broker.port) as client:
        for batch_index in range(BATCHES):
            records = [Record(i, 1_700_000_000_000, None, VALUE) for i in range(RECORDS_PER_BATCH)]
            response = client.request(
                produce7.ProduceRequest(
                    transactional_id=None,
                    acks=1,
                    timeout=datetime.timedelta(seconds=10),
                    topic_data=(
                        produce7.TopicProduceData(
                            name=topic,
                            partition_data=(
                                produce7.PartitionProduceData(
                                    index=0, records=build_batch(records)
                                ),
                            ),
                        ),
                    ),
                )
            )
            partition = response.responses[0].partition_responses[0]
            assert partition.error_code.value == 0
            assert partition.base_offset == batch_index * RECORDS_PER_BATCH


def _receive_fetch(client: RawClient) -> tuple[int, bytes]:
    """The correlation id and the records of a one-partition Fetch v11 response."""
    correlation_id, response = client.receive_with_id(FetchResponse)
    [partition] = response.responses[0].partitions
    assert partition.error_code.value == 0
    return correlation_id, partition.records


def test_clients_that_pipeline_fetches_without_reading_hold_bounded_memory(
    broker: BrokerProcess, topic_name: str
) -> None:
    create_topic(broker.bootstrap, topic_name)
    _fill(broker, topic_name)
    with RawClient(broker.port) as reader:
        reader.send(fetch_request(topic_name, max_bytes=FETCH_MAX_BYTES))
        _, expected = _receive_fetch(reader)
    headers = split_batches(expected)
    assert [h.base_offset for h in headers] == [i * RECORDS_PER_BATCH for i in range(BATCHES)]
    assert len(expected) > TOPIC_BYTES
    pid = broker.process.pid  # type: ignore[union-attr]
    broker_process = psutil.Process(pid)
    peak_before = _peak_rss(pid)

    # Every slow client sends all its Fetches at once and reads nothing.
    slow = [RawClient(broker.port) for _ in range(CONNECTIONS)]
    sent: list[list[int]] = []
    try:
        for client in slow:
            client.sock.settimeout(120)
            sent.append(
                [
                    client.send(fetch_request(topic_name, max_bytes=FETCH_MAX_BYTES))
                    for _ in range(FETCHES_EACH)
                ]
            )

        # Meanwhile the broker answers others.
        with RawClient(broker.port) as bystander:
            bystander.request(
                ApiVersionsRequest(client_software_name="bystander", client_software_version="1")
            )
            metadata = bystander.request(
                metadata9.MetadataRequest(
                    topics=None,
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                )
            )
            assert topic_name in {topic.name for topic in metadata.topics}
        rss_while_blocked = broker_process.memory_info().rss

        # Then they read: every response, in request order, each with the whole topic.
        for client, correlation_ids in zip(slow, sent, strict=True):
            for correlation_id in correlation_ids:
                received_id, records = _receive_fetch(client)
                assert received_id == correlation_id
                assert records == expected
    finally:
        for client in slow:
            client.close()

    # Unbounded, the broker would have held every response at once: 250 x 8 MB = 2 GB.
    # Bounded, each connection holds about one response while its client does not read,
    # and a response being built exists a second time while it is encoded.
    bound = peak_before + (CONNECTIONS + 2) * len(expected) + HEADROOM
    assert rss_while_blocked < bound, f"RSS {rss_while_blocked >> 20} MiB > {bound >> 20} MiB"
    peak = _peak_rss(pid)
    assert peak < bound, f"peak RSS {peak >> 20} MiB, bound {bound >> 20} MiB"
