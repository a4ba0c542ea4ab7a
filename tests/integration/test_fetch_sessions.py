"""Fetch sessions (KIP-227) and fetch limits, driven request by request."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.fetch.v12 import request as fetch12
from kio.schema.fetch.v16 import request as fetch16

from brook.protocol.record_batch import split_batches

from .clients import create_topic, produce
from .raw_client import RawClient, topic_id

WAIT = datetime.timedelta(milliseconds=0)


def _fetch_v12(
    topic: str,
    partitions: list[tuple[int, int]],
    session_id: int,
    epoch: int,
    forgotten: tuple = (),
    max_bytes: int = 10_000_000,
    partition_max_bytes: int = 1_000_000,
) -> fetch12.FetchRequest:
    return fetch12.FetchRequest(
        replica_id=-1,
        max_wait=WAIT,
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=(
            fetch12.FetchTopic(
                topic=topic,
                partitions=tuple(
                    fetch12.FetchPartition(
                        partition=index,
                        fetch_offset=offset,
                        partition_max_bytes=partition_max_bytes,
                    )
                    for index, offset in partitions
                ),
            ),
        )
        if partitions
        else (),
        forgotten_topics_data=forgotten,
        rack_id="",
    )


def _partitions(response) -> dict[int, tuple[int, int]]:
    """partition -> (error code, bytes of records)."""
    return {
        p.partition_index: (p.error_code.value, len(p.records or b""))
        for topic in response.responses
        for p in topic.partitions
    }


@pytest.fixture
def three_partitions(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=3)
    for partition in range(3):
        produce(
            brook_broker.bootstrap,
            topic_name,
            [(None, b"p%d" % partition)] * 5,
            partition=partition,
        )
    return brook_broker, topic_name


def test_full_then_incremental_fetch_leaves_out_unchanged_partitions(three_partitions):
    broker, topic = three_partitions
    with RawClient(broker.port) as client:
        full = client.request(_fetch_v12(topic, [(0, 0), (1, 0), (2, 0)], 0, 0))
        assert full.error_code.value == 0
        assert full.session_id > 0
        assert sorted(_partitions(full)) == [0, 1, 2]
        # Epoch 1: partition 0 moved to its end; 1 and 2 are not named and unchanged.
        incremental = client.request(_fetch_v12(topic, [(0, 5)], full.session_id, 1))
        assert incremental.error_code.value == 0
        # Partitions 1 and 2 still have data at their cached offsets 0, so they come back;
        # partition 0, at its end with nothing new, does not.
        assert sorted(_partitions(incremental)) == [1, 2]
        # Move everything to the end: an incremental fetch then has nothing to say.
        quiet = client.request(_fetch_v12(topic, [(1, 5), (2, 5)], full.session_id, 2))
        assert _partitions(quiet) == {}
        produce(broker.bootstrap, topic, [(None, b"new")], partition=2)
        news = client.request(_fetch_v12(topic, [], full.session_id, 3))
        assert list(_partitions(news)) == [2]


def test_forgotten_partitions_leave_the_session(three_partitions):
    broker, topic = three_partitions
    with RawClient(broker.port) as client:
        full = client.request(_fetch_v12(topic, [(0, 5), (1, 5), (2, 5)], 0, 0))
        forgotten = (fetch12.ForgottenTopic(topic=topic, partitions=(2,)),)
        client.request(_fetch_v12(topic, [], full.session_id, 1, forgotten=forgotten))
        produce(broker.bootstrap, topic, [(None, b"new")], partition=2)
        after = client.request(_fetch_v12(topic, [], full.session_id, 2))
        assert _partitions(after) == {}


def test_session_errors(three_partitions):
    broker, topic = three_partitions
    with RawClient(broker.port) as client:
        full = client.request(_fetch_v12(topic, [(0, 0)], 0, 0))
        wrong_epoch = client.request(_fetch_v12(topic, [], full.session_id, 5))
        assert wrong_epoch.error_code.value == 71  # INVALID_FETCH_SESSION_EPOCH
        unknown = client.request(_fetch_v12(topic, [], 987_654_321, 1))
        assert unknown.error_code.value == 70  # FETCH_SESSION_ID_NOT_FOUND
        sessionless = client.request(_fetch_v12(topic, [(0, 0)], 0, -1))
        assert sessionless.session_id == 0
        assert _partitions(sessionless)[0][1] > 0


def test_max_bytes_still_returns_one_whole_batch(three_partitions):
    broker, topic = three_partitions
    with RawClient(broker.port) as client:
        tiny = client.request(
            _fetch_v12(topic, [(0, 0), (1, 0)], 0, -1, max_bytes=1, partition_max_bytes=1)
        )
        sizes = _partitions(tiny)
        assert sizes[0][1] > 1  # one whole batch despite the limits
        assert sizes[1][1] == 0  # the response is full after the first batch


def test_out_of_range_and_unknown_partition(three_partitions):
    broker, topic = three_partitions
    with RawClient(broker.port) as client:
        response = client.request(_fetch_v12(topic, [(0, 999), (7, 0)], 0, -1))
        errors = {index: error for index, (error, _) in _partitions(response).items()}
        assert errors == {0: 1, 7: 3}  # OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_by_topic_id_from_v13(three_partitions):
    broker, topic = three_partitions

    def by_id(topic_id: uuid.UUID, partition: int, max_bytes: int) -> fetch16.FetchRequest:
        return fetch16.FetchRequest(
            max_wait=WAIT,
            min_bytes=0,
            session_id=0,
            session_epoch=-1,
            topics=(
                fetch16.FetchTopic(
                    topic_id=topic_id,
                    partitions=(
                        fetch16.FetchPartition(
                            partition=partition, fetch_offset=0, partition_max_bytes=max_bytes
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
            rack_id="",
        )

    with RawClient(broker.port) as client:
        known = topic_id(client, topic)
        response = client.request(by_id(known, 1, 100_000))
        assert response.responses[0].topic_id == known
        assert len(response.responses[0].partitions[0].records) > 0
        unknown = client.request(by_id(uuid.uuid4(), 0, 100))
        assert unknown.responses[0].partitions[0].error_code.value == 100  # UNKNOWN_TOPIC_ID


@pytest.mark.brook_config(fetch_max_bytes=1024)
def test_broker_fetch_max_bytes_caps_what_a_client_asks_for(brook_broker, topic_name):
    """fetch.max.bytes bounds every response, as Kafka's broker does, whatever the
    request's max_bytes; only a first batch larger than it still goes out whole."""
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    for _ in range(5):  # five batches of about 370 bytes
        produce(brook_broker.bootstrap, topic_name, [(None, b"x" * 300)], partition=0)
    produce(brook_broker.bootstrap, topic_name, [(None, b"y" * 3000)], partition=1)
    with RawClient(brook_broker.port) as client:
        asked_much = client.request(_fetch_v12(topic_name, [(0, 0)], 0, -1, max_bytes=10**7))
        [partition] = asked_much.responses[0].partitions
        batches = split_batches(partition.records)
        assert len(partition.records) <= 1024
        assert [batch.base_offset for batch in batches] == [0, 1]
        big_first = client.request(_fetch_v12(topic_name, [(1, 0)], 0, -1, max_bytes=10**7))
        [partition] = big_first.responses[0].partitions
        assert len(partition.records) > 3000
        assert [batch.base_offset for batch in split_batches(partition.records)] == [0]
