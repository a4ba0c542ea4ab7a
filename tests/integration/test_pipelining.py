"""Many requests in flight on one connection: answered in request order, even when the
first one waits (a long-polling Fetch) and the later ones could be answered at once."""

from __future__ import annotations

import datetime

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.fetch.v11 import request as fetch11
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.metadata.v9 import request as metadata9
from kio.schema.metadata.v9.response import MetadataResponse

from .clients import create_topic, produce
from .raw_client import RawClient


def test_responses_follow_request_order_behind_a_parked_fetch(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        parked = client.send(
            fetch11.FetchRequest(
                replica_id=-1,
                max_wait=datetime.timedelta(seconds=20),
                min_bytes=1,
                max_bytes=1_000_000,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=(
                    fetch11.FetchTopic(
                        topic=topic_name,
                        partitions=(
                            fetch11.FetchPartition(
                                partition=0,
                                current_leader_epoch=-1,
                                fetch_offset=0,
                                log_start_offset=-1,
                                partition_max_bytes=1_000_000,
                            ),
                        ),
                    ),
                ),
                forgotten_topics_data=(),
                rack_id="",
            )
        )
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
