"""Many requests in flight on one connection: answered in request order, even when the
first one waits (a long-polling Fetch) and the later ones could be answered at once."""

from __future__ import annotations

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.metadata.v9 import request as metadata9
from kio.schema.metadata.v9.response import MetadataResponse

from .clients import create_topic, produce
from .raw_client import RawClient, fetch_request


def test_responses_follow_request_order_behind_a_parked_fetch(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        parked = client.send(fetch_request(topic_name, max_wait_ms=20_000))
        followers = []
        for i in range(30):
            if i % 2:
                followers.append(
                    (
                        client.send(
                            ApiVersionsRequest(
                                client_software_name="pipeline", client_software_version="1"
                            )
                        ),
                        ApiVersionsResponse,
                    )
                )
            else:
                followers.append(
                    (
                        client.send(
                            metadata9.MetadataRequest(
                                topics=None,
                                allow_auto_topic_creation=False,
                                include_cluster_authorized_operations=False,
                                include_topic_authorized_operations=False,
                            )
                        ),
                        MetadataResponse,
                    )
                )
        # Nothing may overtake the parked fetch: wake it with a record.
        produce(brook_broker.bootstrap, topic_name, [(b"k", b"wake-up")])
        received = [client.receive_with_id(FetchResponse)]
        received += [client.receive_with_id(kind) for _, kind in followers]
    assert [correlation for correlation, _ in received] == [parked] + [c for c, _ in followers]
    fetch_response = received[0][1]
    assert b"wake-up" in fetch_response.responses[0].partitions[0].records
