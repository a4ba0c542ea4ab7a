"""Brook's own asyncio client (broker/client.py) against a real broker: several requests
in flight on one connection, each answer handed to its own request, and a connection the
broker closes failing every request still waiting instead of hanging it."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.list_offsets.v9.request import ListOffsetsRequest as ListOffsetsV9
from kio.schema.metadata.v9 import request as metadata9
from kio.schema.metadata.v9.response import MetadataResponse
from kio.schema.types import BrokerId

from brook.broker.client import BlockingClient, Client, ConnectionClosedError
from brook.protocol.record_batch import Record, build_batch

from .clients import consume_all, create_topic, produce
from .raw_client import fetch_request, produce_request


def _metadata(topic: str) -> metadata9.MetadataRequest:
    return metadata9.MetadataRequest(
        topics=(metadata9.MetadataRequestTopic(name=topic),),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def test_requests_in_flight_each_get_their_own_answer(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)

    async def scenario() -> None:
        async with await Client.connect("127.0.0.1", brook_broker.port, "client-test") as client:
            # A parked Fetch first: the answers behind it must wait for it and still
            # reach their own requests, not each other's.
            parked = client.send(fetch_request(topic_name, max_wait_ms=20_000))
            followers = [
                client.send(
                    ApiVersionsRequest(client_software_name="c", client_software_version="1")
                )
                if i % 2
                else client.send(_metadata(topic_name))
                for i in range(10)
            ]
            await asyncio.to_thread(produce, brook_broker.bootstrap, topic_name, [(b"k", b"v")])
            fetched = await parked
            answers = await asyncio.gather(*followers)
            assert isinstance(fetched, FetchResponse)
            records = fetched.responses[0].partitions[0].records
            assert records and b"v" in records
            for i, answer in enumerate(answers):
                if i % 2:
                    assert isinstance(answer, ApiVersionsResponse)
                    assert answer.error_code.value == 0
                else:
                    assert isinstance(answer, MetadataResponse)
                    assert [t.name for t in answer.topics] == [topic_name]

    asyncio.run(scenario())


def test_closed_connection_fails_every_waiting_request(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)

    async def scenario() -> None:
        client = await Client.connect("127.0.0.1", brook_broker.port)
        try:
            # ListOffsets v9 is above what Brook serves: it closes the connection, as Kafka
            # does for a version it does not serve.
            refused = client.send(
                ListOffsetsV9(replica_id=BrokerId(-1), isolation_level=0, topics=())
            )
            behind = client.send(_metadata(topic_name))  # sent, never to be answered
            for future in (refused, behind):
                with pytest.raises(ConnectionClosedError):
                    await future
            with pytest.raises(ConnectionClosedError):
                client.send(_metadata(topic_name))
        finally:
            await client.close()

    asyncio.run(scenario())
    # The broker keeps serving everyone else.
    produce(brook_broker.bootstrap, topic_name, [(b"k", b"after")])
    assert [m.value() for m in consume_all(brook_broker.bootstrap, topic_name, 1)] == [b"after"]


def test_blocking_client_produces_and_reads_back(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    batch = build_batch([Record(0, 1_700_000_000_000, b"k", b"blocking")])
    with BlockingClient("127.0.0.1", brook_broker.port, "blocking-test") as client:
        response = client.request(produce_request(topic_name, 0, batch))
        partition = response.responses[0].partition_responses[0]
        assert (partition.error_code.value, partition.base_offset) == (0, 0)
        fetched = client.request(fetch_request(topic_name, max_wait_ms=0))
    assert b"blocking" in fetched.responses[0].partitions[0].records
