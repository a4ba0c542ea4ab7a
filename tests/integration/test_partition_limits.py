"""Requests that ask for too many partitions: refused whole, as Kafka's controller does
(POLICY_VIOLATION above 10,000 per request), with nothing created on disk, and the
broker serving everyone else. Manual assignments get Kafka's checks and messages."""

from __future__ import annotations

import asyncio
import datetime
from pathlib import Path

import pytest
from aiokafka import errors as aioerrors
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin import NewPartitions as AioNewPartitions
from aiokafka.admin import NewTopic as AioNewTopic
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic
from kio.schema.errors import ErrorCode

from brook.protocol.api_table import ApiKey, request_type

from .clients import consume_all, create_topic, produce
from .raw_client import RawClient, make, nested

TOO_MANY = "Excessively large number of partitions per request."


def _partition_dirs(data_dir: Path, topic: str) -> list[str]:
    return sorted(p.name for p in data_dir.iterdir() if p.name.rsplit("-", 1)[0] == topic)


def _still_serving(bootstrap: str, topic: str) -> None:
    """Another topic takes and returns records after the refusal."""
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, [(b"k", b"after the refusal")])
    [message] = consume_all(bootstrap, topic, 1)
    assert message.value() == b"after the refusal"


def _confluent_error(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(15)
    return raised.value.args[0]


def test_confluent_create_partitions_over_the_limit_is_refused(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # librdkafka itself refuses more than 100,000; 10,001 new partitions are one too many.
    for count in (100_000, 10_002):
        futures = admin.create_partitions([NewPartitions(topic_name, count)])
        error = _confluent_error(futures[topic_name])
        assert error.code() == KafkaError.POLICY_VIOLATION
        assert error.str() == TOO_MANY
    assert _partition_dirs(brook_broker.data_dir, topic_name) == [f"{topic_name}-0"]
    metadata = admin.list_topics(topic_name, timeout=10)
    assert len(metadata.topics[topic_name].partitions) == 1
    _still_serving(bootstrap, topic_name + "-other")


def test_confluent_create_topics_over_the_limit_creates_none(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-c"]
    futures = admin.create_topics(
        [NewTopic(names[0], 5_000, 1), NewTopic(names[1], 5_000, 1), NewTopic(names[2], 1, 1)]
    )
    for name in names:  # 10,001 in all: every topic refused, the small one too
        error = _confluent_error(futures[name])
        assert (error.code(), error.str()) == (KafkaError.POLICY_VIOLATION, TOO_MANY)
    single = admin.create_topics([NewTopic(names[0], 100_000, 1)])[names[0]]
    assert _confluent_error(single).code() == KafkaError.POLICY_VIOLATION
    for name in names:
        assert _partition_dirs(brook_broker.data_dir, name) == []
    assert not set(names) & set(admin.list_topics(timeout=10).topics)
    # Exactly 10,000 passes the limit (validated only: no files for them here).
    allowed = admin.create_topics([NewTopic(names[0], 10_000, 1)], validate_only=True)
    allowed[names[0]].result(15)
    assert _partition_dirs(brook_broker.data_dir, names[0]) == []
    _still_serving(bootstrap, topic_name + "-other")


def test_kafka_python_admin_gets_policy_violation(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    try:
        grown = admin.create_partitions({topic_name: 20_000}, raise_errors=False)
        [result] = grown.results
        assert (result.error_code, result.error_message) == (
            ErrorCode.policy_violation.value,
            TOO_MANY,
        )
        created = admin.create_topics(
            [KpNewTopic(topic_name + "-big", 10_001, 1)], raise_errors=False
        )
        [topic] = created["topics"]
        assert (topic["error_code"], topic["error_message"]) == (
            ErrorCode.policy_violation.value,
            TOO_MANY,
        )
    finally:
        admin.close()
    assert _partition_dirs(brook_broker.data_dir, topic_name) == [f"{topic_name}-0"]
    assert _partition_dirs(brook_broker.data_dir, topic_name + "-big") == []
    _still_serving(bootstrap, topic_name + "-other")


def test_aiokafka_admin_gets_policy_violation(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)

    async def scenario() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
        await admin.start()
        try:
            with pytest.raises(aioerrors.PolicyViolationError):
                await admin.create_partitions({topic_name: AioNewPartitions(2_147_483_647)})
            response = await admin.create_topics([AioNewTopic(topic_name + "-big", 10_001, 1)])
            [(name, code, message)] = response.topic_errors
            assert (name, code, message) == (
                topic_name + "-big",
                ErrorCode.policy_violation.value,
                TOO_MANY,
            )
        finally:
            await admin.close()

    asyncio.run(scenario())
    assert _partition_dirs(brook_broker.data_dir, topic_name) == [f"{topic_name}-0"]
    assert _partition_dirs(brook_broker.data_dir, topic_name + "-big") == []
    _still_serving(bootstrap, topic_name + "-other")


# --- raw requests: assignments and the counts Kafka takes from them ------------------


def _create_partitions(port: int, version: int, name: str, count: int, assignments=None):
    request_class = request_type(ApiKey.CREATE_PARTITIONS, version)
    assignment_class = nested(request_class, "CreatePartitionsAssignment")
    topic_class = nested(request_class, "CreatePartitionsTopic")
    topic = topic_class(
        name=name,
        count=count,
        assignments=None
        if assignments is None
        else tuple(assignment_class(broker_ids=tuple(ids)) for ids in assignments),
    )
    request = request_class(
        topics=(topic,), timeout=datetime.timedelta(seconds=15), validate_only=False
    )
    with RawClient(port) as client:
        [result] = client.request(request).results
    return result.error_code, result.error_message


def _create_topic(port: int, version: int, name: str, assignments, num_partitions=-1, rf=-1):
    request_class = request_type(ApiKey.CREATE_TOPICS, version)
    topic = make(
        nested(request_class, "CreatableTopic"),
        name=name,
        num_partitions=num_partitions,
        replication_factor=rf,
        assignments=tuple(
            make(
                nested(request_class, "CreatableReplicaAssignment"),
                partition_index=index,
                broker_ids=tuple(ids),
            )
            for index, ids in assignments
        ),
        configs=(),
    )
    request = make(
        request_class,
        topics=(topic,),
        timeout=datetime.timedelta(seconds=15),
        validate_only=False,
    )
    with RawClient(port) as client:
        [result] = client.request(request).topics
    return result.error_code, result.error_message


@pytest.mark.parametrize("version", [0, 3])
def test_create_partitions_assignments_must_match_the_increase(brook_broker, topic_name, version):
    port = brook_broker.port
    create_topic(brook_broker.bootstrap, topic_name)
    manual = "The manual partition assignment includes"
    cases = [
        (3, [[0]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were"),
        (
            2,
            [[0], [0]],
            "Attempted to add 1 additional partition(s), but only 2 assignment(s) were",
        ),
        (2, [[]], f"{manual} an empty replica list."),
        (2, [[7]], f"{manual} broker 7, but no such broker is registered."),
        (2, [[0, 0]], f"{manual} the broker 0 more than once."),
    ]
    for count, assignments, message in cases:
        if message.endswith(" were"):
            message += " specified."
        assert _create_partitions(port, version, topic_name, count, assignments) == (
            ErrorCode.invalid_replica_assignment.value,
            message,
        )
    assert _create_partitions(port, version, topic_name, 1) == (
        ErrorCode.invalid_partitions.value,
        "Topic already has 1 partition(s).",
    )
    # 10,001 assignments (or a count that big) are refused before any of them is read.
    assert _create_partitions(port, version, topic_name, 10_002, [[0]] * 10_001) == (
        ErrorCode.policy_violation.value,
        TOO_MANY,
    )
    assert _partition_dirs(brook_broker.data_dir, topic_name) == [f"{topic_name}-0"]
    assert _create_partitions(port, version, topic_name, 3, [[0], [0]]) == (0, None)
    assert _partition_dirs(brook_broker.data_dir, topic_name) == [
        f"{topic_name}-{i}" for i in range(3)
    ]


@pytest.mark.parametrize("version", [2, 7])
def test_create_topics_manual_assignments(brook_broker, topic_name, version):
    port = brook_broker.port
    invalid = ErrorCode.invalid_replica_assignment.value
    cases = [
        (
            [(0, [0]), (2, [0])],
            invalid,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            [(0, [0]), (0, [0])],
            invalid,
            "Found multiple manual partition assignments for partition 0",
        ),
        (
            [(0, [5])],
            invalid,
            "The manual partition assignment includes broker 5, but no such broker is registered.",
        ),
    ]
    for assignments, code, message in cases:
        assert _create_topic(port, version, topic_name, assignments) == (code, message)
    assert _create_topic(port, version, topic_name, [(0, [0])], num_partitions=1) == (
        ErrorCode.invalid_request.value,
        "A manual partition assignment was specified, but numPartitions was not set to -1.",
    )
    assert _create_topic(port, version, topic_name, [(i, [0]) for i in range(10_001)]) == (
        ErrorCode.policy_violation.value,
        TOO_MANY,
    )
    assert _partition_dirs(brook_broker.data_dir, topic_name) == []
    assert _create_topic(port, version, topic_name, [(1, [0]), (0, [0])]) == (0, None)
    assert _partition_dirs(brook_broker.data_dir, topic_name) == [
        f"{topic_name}-0",
        f"{topic_name}-1",
    ]
