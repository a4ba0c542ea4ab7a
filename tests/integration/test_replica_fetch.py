"""Fetch by replica id: a broker id marks a follower's fetch (Kafka's FetchParams), which
only a replica of the partition may send; consumers (-1) read as before."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.fetch.v15 import request as fetch15
from kio.schema.types import BrokerId

from brook.broker.client import BlockingClient

from .clients import create_topic, produce
from .raw_client import fetch_request

NOT_LEADER_OR_FOLLOWER = 6


def _fetch_v15(topic_id, replica_id: int) -> fetch15.FetchRequest:
    return fetch15.FetchRequest(
        cluster_id=None,
        replica_state=fetch15.ReplicaState(replica_id=BrokerId(replica_id), replica_epoch=-1),
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1_000_000,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            fetch15.FetchTopic(
                topic_id=topic_id,
                partitions=(
                    fetch15.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1_000_000,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


@pytest.mark.parametrize("replica_id", [0, 1, 7])
def test_a_fetch_from_a_broker_that_is_no_follower_is_refused(brook_broker, topic_name, replica_id):
    """The partition's only replica is this broker (id 0), so no broker id may fetch as
    its follower: NOT_LEADER_OR_FOLLOWER and no records, while a consumer reads them."""
    create_topic(brook_broker.bootstrap, topic_name)
    produce(brook_broker.bootstrap, topic_name, [(None, b"secret")])
    topic_id = brook_broker.call(lambda: brook_broker.broker.metadata.get(topic_name).topic_id)
    with BlockingClient("127.0.0.1", brook_broker.port, "replica-fetch-test") as client:
        v11 = client.request(fetch_request(topic_name, max_wait_ms=0, replica_id=replica_id))
        v15 = client.request(_fetch_v15(topic_id, replica_id))
        consumer = client.request(fetch_request(topic_name, max_wait_ms=0))
    for response in (v11, v15):
        [partition] = response.responses[0].partitions
        assert partition.error_code.value == NOT_LEADER_OR_FOLLOWER
        assert not partition.records
    assert b"secret" in consumer.responses[0].partitions[0].records
