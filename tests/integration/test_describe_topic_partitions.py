"""DescribeTopicPartitions (key 75), as the Java admin client's describeTopics asks it
(Kafka 3.8+, KIP-966): a page of at most response_partition_limit partitions (and
max.request.partition.size.limit), topics in name order, a cursor for the rest; unknown
and invalid names answered with Kafka's errors, nothing created. The Java client's own
describeTopics over it is in tests/java_client/.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.describe_topic_partitions.v0 import request as dtp

from brook.protocol.errors import ErrorCode

from .clients import create_topic
from .raw_client import RawClient, topic_id


def _ask(
    port: int, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> Any:
    request = dtp.DescribeTopicPartitionsRequest(
        topics=tuple(dtp.TopicRequest(name=name) for name in names),
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else dtp.Cursor(topic_name=cursor[0], partition_index=cursor[1]),
    )
    with RawClient(port) as client:
        return client.request(request)


def _pages(port: int, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    """Every page of an answer, as (topic, partition) pairs, following the cursor."""
    pages = []
    cursor = None
    while True:
        answer = _ask(port, names, limit, cursor)
        pages.append([(t.name, p.partition_index) for t in answer.topics for p in t.partitions])
        if answer.next_cursor is None:
            return pages
        cursor = (answer.next_cursor.topic_name, answer.next_cursor.partition_index)


def test_topics_in_name_order_with_their_partitions(brook_broker, topic_name):
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    create_topic(brook_broker.bootstrap, second, partitions=2)
    create_topic(brook_broker.bootstrap, first, partitions=3)
    answer = _ask(brook_broker.port, [second, first])
    assert [t.name for t in answer.topics] == [first, second]
    assert answer.next_cursor is None
    with RawClient(brook_broker.port) as client:
        assert answer.topics[0].topic_id == topic_id(client, first)
    for topic, count in zip(answer.topics, (3, 2), strict=True):
        assert topic.error_code == ErrorCode.none
        assert topic.is_internal is False
        assert [p.partition_index for p in topic.partitions] == list(range(count))
        for partition in topic.partitions:
            assert partition.error_code == ErrorCode.none
            assert partition.leader_id == int(brook_broker.config["broker.id"])
            assert partition.leader_epoch >= 0
            assert partition.replica_nodes == (int(brook_broker.config["broker.id"]),)
            assert partition.isr_nodes == (int(brook_broker.config["broker.id"]),)
            assert partition.offline_replicas == ()
        # No authorizer: every operation a topic supports (Kafka always fills it in here).
        assert topic.topic_authorized_operations > 0


def test_pages_follow_the_cursor_across_topics(brook_broker, topic_name):
    names = [f"{topic_name}-{suffix}" for suffix in "abc"]
    for name, count in zip(names, (3, 1, 4), strict=True):
        create_topic(brook_broker.bootstrap, name, partitions=count)
    everything = [
        (name, index)
        for name, count in zip(names, (3, 1, 4), strict=True)
        for index in range(count)
    ]
    pages = _pages(brook_broker.port, names, limit=2)
    assert [pair for page in pages for pair in page] == everything
    assert all(len(page) <= 2 for page in pages)
    # A page that fills up inside a topic names that topic's next partition; one that
    # fills up at a topic's end names the next topic at 0.
    first = _ask(brook_broker.port, names, limit=2)
    assert (first.next_cursor.topic_name, first.next_cursor.partition_index) == (names[0], 2)
    second = _ask(brook_broker.port, names, limit=2, cursor=(names[0], 2))
    assert (second.next_cursor.topic_name, second.next_cursor.partition_index) == (names[2], 0)


@pytest.mark.brook_config(max_request_partition_size_limit=3)
def test_the_broker_limit_caps_a_larger_request_limit(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=5)
    answer = _ask(brook_broker.port, [topic_name], limit=100)
    assert [p.partition_index for p in answer.topics[0].partitions] == [0, 1, 2]
    assert answer.next_cursor.partition_index == 3


def test_a_cursor_past_the_last_partition_gives_the_topic_without_partitions(
    brook_broker, topic_name
):
    """As Kafka 4.4 answers it (asked beside Brook): the topic, no partition, no cursor."""
    create_topic(brook_broker.bootstrap, topic_name, partitions=3)
    answer = _ask(brook_broker.port, [topic_name], limit=5, cursor=(topic_name, 7))
    assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [
        (topic_name, ErrorCode.none, ())
    ]
    assert answer.next_cursor is None
    # The page's count is not thrown off: a later topic still gets its partitions.
    second = f"{topic_name}-z"
    create_topic(brook_broker.bootstrap, second, partitions=4)
    answer = _ask(brook_broker.port, [topic_name, second], limit=2, cursor=(topic_name, 7))
    assert [len(t.partitions) for t in answer.topics] == [0, 2]
    assert (answer.next_cursor.topic_name, answer.next_cursor.partition_index) == (second, 2)


def test_every_topic_when_none_is_named(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    answer = _ask(brook_broker.port, [])
    names = [t.name for t in answer.topics]
    assert topic_name in names
    assert names == sorted(names)


def test_unknown_and_invalid_names_get_kafkas_errors_and_nothing_is_created(brook_broker):
    answer = _ask(brook_broker.port, ["no-such-topic", "bad name!"])
    errors = [(t.name, t.error_code, t.partitions) for t in answer.topics]
    assert errors == [
        ("bad name!", ErrorCode.invalid_topic_exception, ()),
        ("no-such-topic", ErrorCode.unknown_topic_or_partition, ()),
    ]
    # Kafka fills in the asker's operations on these names too (every one a topic
    # supports, without an authorizer).
    assert {t.topic_authorized_operations for t in answer.topics} == {3576}
    # Auto-creation is on, but this API creates nothing.
    assert _ask(brook_broker.port, ["no-such-topic"]).topics[0].error_code == (
        ErrorCode.unknown_topic_or_partition
    )


def test_a_cursor_outside_the_named_topics_is_an_invalid_request(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    answer = _ask(brook_broker.port, [topic_name], cursor=("elsewhere", 0))
    assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [
        (topic_name, ErrorCode.invalid_request, ())
    ]
    # The broker serves on.
    assert _ask(brook_broker.port, [topic_name]).topics[0].error_code == ErrorCode.none
