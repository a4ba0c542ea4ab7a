"""A CreateTopics of thousands of partitions makes its logs in slices (broker/metadata/
publisher.py, apply_in_slices): the broker serves other clients meanwhile, the topic shows
only once it is whole, and a second creation of it in the meantime is refused as Kafka
refuses one of an existing topic."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from brook.broker.testing import BrokerThread
from brook.protocol.api_table import ApiKey, request_type, response_type

from .clients import consume_all, create_topic, produce
from .raw_client import RawClient, make, nested

PARTITIONS = 1000


@pytest.fixture
def broker(own_broker: BrokerThread) -> BrokerThread:
    return own_broker


def _create_request(name: str, partitions: int, validate_only: bool = False) -> Any:
    request_class = request_type(ApiKey.CREATE_TOPICS, 7)
    topic = make(
        nested(request_class, "CreatableTopic"),
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    return make(
        request_class,
        topics=(topic,),
        timeout=datetime.timedelta(seconds=120),
        validate_only=validate_only,
    )


def _metadata(client: RawClient, name: str, auto_create: bool = False) -> Any:
    from kio.schema.metadata.v12 import request as metadata12

    [topic] = client.request(
        metadata12.MetadataRequest(
            topics=(metadata12.MetadataRequestTopic(topic_id=None, name=name),),
            allow_auto_topic_creation=auto_create,
            include_topic_authorized_operations=False,
        )
    ).topics
    return topic


def test_others_are_served_while_thousands_of_partitions_are_made(broker: BrokerThread) -> None:
    create_topic(broker.bootstrap, "bystander")
    with RawClient(broker.port) as creator, RawClient(broker.port) as other:
        creator.send(_create_request("big", PARTITIONS))
        # Seen in progress: absent from Metadata just after a second creation of it was
        # refused as existing. Only a broker serving `other` between the slices of the
        # first creation can answer so.
        seen_in_progress = False
        auto_created: Any = None
        for _ in range(10_000):
            [attempt] = other.request(_create_request("big", 1, validate_only=True)).topics
            after = _metadata(other, "big")
            if after.error_code == ErrorCode.none:
                break  # made whole meanwhile
            if attempt.error_code == ErrorCode.topic_already_exists:
                assert after.error_code == ErrorCode.unknown_topic_or_partition
                seen_in_progress = True
                # Auto-creation by Metadata is not a second creation either.
                auto_created = _metadata(other, "big", auto_create=True)
                break
        assert seen_in_progress
        assert auto_created.error_code in (ErrorCode.leader_not_available, ErrorCode.none)
        [created] = creator.receive(response_type(ApiKey.CREATE_TOPICS, 7)).topics
        assert created.error_code == ErrorCode.none
        assert created.num_partitions == PARTITIONS
        topic = _metadata(other, "big")
        assert topic.error_code == ErrorCode.none
        assert len(topic.partitions) == PARTITIONS
    # Every partition takes records; the bystander's topic kept working throughout.
    produce(broker.bootstrap, "big", [(b"k", b"last")], partition=PARTITIONS - 1)
    last = consume_all(broker.bootstrap, "big", 1, partition=PARTITIONS - 1)
    assert [m.value() for m in last] == [b"last"]
    produce(broker.bootstrap, "bystander", [(b"k", b"v")])
    assert [m.value() for m in consume_all(broker.bootstrap, "bystander", 1)] == [b"v"]
