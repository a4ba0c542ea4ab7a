"""Every served version of every API, request by request over a raw socket.

Clients each use one version of an API; these tests make sure the others work too,
with the answers Kafka gives (errors included).
"""

from __future__ import annotations

import datetime
import logging
import uuid
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.index import load_request_schema

from brook.protocol.api_table import ApiKey
from brook.protocol.record_batch import Record, build_batch

from .clients import create_topic
from .raw_client import RawClient, make, nested, produce_request, versions
from .raw_client import topic_id as raw_topic_id

NOW_MS = int(datetime.datetime.now().timestamp() * 1000)


@pytest.fixture
def loaded(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    base = NOW_MS - 10_000
    producer = Producer({"bootstrap.servers": brook_broker.bootstrap, "linger.ms": 0})
    for i in range(4):
        producer.produce(
            topic_name, key=b"k", value=b"v%d" % i, partition=0, timestamp=base + i * 1000
        )
        producer.flush(10)
    return brook_broker, topic_name, base


@pytest.mark.parametrize("version", versions(ApiKey.API_VERSIONS))
def test_api_versions_every_version(brook_broker, version):
    request_type = load_request_schema(ApiKey.API_VERSIONS, version)
    with RawClient(brook_broker.port) as client:
        response = client.request(
            make(request_type, client_software_name="test", client_software_version="1")
        )
    assert response.error_code.value == 0
    advertised = {
        entry.api_key: (entry.min_version, entry.max_version) for entry in response.api_keys
    }
    assert advertised[ApiKey.PRODUCE] == (0, 12)
    assert advertised[ApiKey.FETCH] == (4, 16)
    assert advertised[ApiKey.METADATA] == (0, 12)


@pytest.mark.parametrize("version", versions(ApiKey.METADATA))
def test_metadata_every_version(loaded, version):
    broker, topic, _ = loaded
    request_type = load_request_schema(ApiKey.METADATA, version)
    topic_type = nested(request_type, "MetadataRequestTopic")
    with RawClient(broker.port) as client:
        response = client.request(
            make(
                request_type,
                topics=(make(topic_type, name=topic, topic_id=None),),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )
        )
    assert [b.port for b in response.brokers] == [broker.port]
    [described] = response.topics
    assert described.error_code.value == 0
    assert described.name == topic
    assert [p.partition_index for p in described.partitions] == [0, 1]
    assert all(p.leader_id == 0 and tuple(p.isr_nodes) == (0,) for p in described.partitions)
    if version >= 10:
        assert described.topic_id != uuid.UUID(int=0)
    if version >= 2:
        assert response.cluster_id


def test_metadata_auto_creation_rules(brook_broker):
    request_type = load_request_schema(ApiKey.METADATA, 12)
    topic_type = nested(request_type, "MetadataRequestTopic")

    def ask(name: str, allow: bool) -> int:
        with RawClient(brook_broker.port) as client:
            response = client.request(
                make(
                    request_type,
                    topics=(make(topic_type, name=name, topic_id=None),),
                    allow_auto_topic_creation=allow,
                    include_topic_authorized_operations=False,
                )
            )
        return response.topics[0].error_code.value

    assert ask("not-asked-to-create", allow=False) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert ask("created-on-demand", allow=True) == 0
    assert ask("bad/name", allow=True) == 17  # INVALID_TOPIC_EXCEPTION
    assert ask("not-asked-to-create", allow=False) == 3


def test_metadata_v12_looks_topics_up_by_id(loaded):
    """By id with a null name, or with "" beside the id as the Java consumer of KIP-848
    sends it (Kafka reads any entry with an id as a lookup by id); an unknown id is
    UNKNOWN_TOPIC_ID, named by nothing."""
    broker, topic, _ = loaded
    request_type = load_request_schema(ApiKey.METADATA, 12)
    topic_type = nested(request_type, "MetadataRequestTopic")
    with RawClient(broker.port) as client:
        topic_id = raw_topic_id(client, topic)
        unknown = uuid.UUID(int=12345)
        response = client.request(
            make(
                request_type,
                topics=(
                    make(topic_type, name=None, topic_id=topic_id),
                    make(topic_type, name="", topic_id=topic_id),
                    make(topic_type, name="", topic_id=unknown),
                ),
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    found = [(t.error_code.value, t.name, t.topic_id) for t in response.topics]
    # Each topic once, as Kafka answers it (checked against Kafka 4.4).
    assert found == [(0, topic, topic_id), (100, None, unknown)]


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_topic_ids_before_v12_are_invalid_requests(loaded, version):
    """v10 and v11 carry topic ids and nullable names, but only v12 may use them: Kafka
    answers every topic INVALID_REQUEST (a null name as ""). Found by the fuzzer: the
    null name went into a response field that cannot hold it, and the connection
    closed without an answer."""
    broker, topic, _ = loaded
    request_type = load_request_schema(ApiKey.METADATA, version)
    topic_type = nested(request_type, "MetadataRequestTopic")
    some_id = uuid.uuid4()
    asks = [
        (make(topic_type, name=None, topic_id=some_id), ""),
        (make(topic_type, name=topic, topic_id=some_id), topic),
    ]
    for entry, answered_name in asks:
        with RawClient(broker.port) as client:
            response = client.request(
                make(
                    request_type,
                    topics=(make(topic_type, name=topic, topic_id=None), entry),
                    allow_auto_topic_creation=False,
                    include_cluster_authorized_operations=False,
                    include_topic_authorized_operations=False,
                )
            )
        assert [(t.name, t.error_code.value) for t in response.topics] == [
            (topic, 42),  # INVALID_REQUEST, the valid one too
            (answered_name, 42),
        ]
        assert response.brokers == ()


@pytest.mark.parametrize("version", versions(ApiKey.PRODUCE))
def test_produce_every_version(loaded, version):
    broker, topic, _ = loaded
    batch = build_batch([Record(0, NOW_MS, b"key", b"v%d" % version)])
    request = produce_request(topic, 1, batch, version)
    with RawClient(broker.port) as client:
        response = client.request(request)
    [result] = response.responses[0].partition_responses
    assert result.error_code.value == 0
    assert result.base_offset >= 0


@pytest.mark.parametrize("version", versions(ApiKey.LIST_OFFSETS))
def test_list_offsets_every_version(loaded, version):
    broker, topic, base = loaded
    request_type = load_request_schema(ApiKey.LIST_OFFSETS, version)
    partition_type = nested(request_type, "ListOffsetsPartition")
    specs = [-2, -1, base + 1500, base + 99_000] + ([-3] if version >= 7 else [])

    def ask(timestamp: int, partition: int = 0, epoch: int = -1) -> Any:
        request = make(
            request_type,
            replica_id=-1,
            isolation_level=0,
            topics=(
                make(
                    nested(request_type, "ListOffsetsTopic"),
                    name=topic,
                    partitions=(
                        make(
                            partition_type,
                            partition_index=partition,
                            timestamp=timestamp,
                            current_leader_epoch=epoch,
                        ),
                    ),
                ),
            ),
        )
        with RawClient(broker.port) as client:
            return client.request(request).topics[0].partitions[0]

    found = {spec: ask(spec) for spec in specs}
    assert found[-2].offset == 0
    assert found[-1].offset == 4
    assert (found[base + 1500].offset, found[base + 1500].timestamp) == (2, base + 2000)
    assert found[base + 99_000].offset == -1
    if version >= 7:
        assert (found[-3].offset, found[-3].timestamp) == (3, base + 3000)
    assert ask(-1, partition=9).error_code.value == 3
    if version >= 4:
        assert ask(-1, epoch=7).error_code.value == 75  # UNKNOWN_LEADER_EPOCH


@pytest.mark.parametrize("version", versions(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch_every_version(loaded, version):
    broker, topic, _ = loaded
    request_type = load_request_schema(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)

    def ask(epoch: int, current: int = -1, partition: int = 0) -> Any:
        request = make(
            request_type,
            replica_id=-1,
            topics=(
                make(
                    nested(request_type, "OffsetForLeaderTopic"),
                    topic=topic,
                    partitions=(
                        make(
                            nested(request_type, "OffsetForLeaderPartition"),
                            partition=partition,
                            current_leader_epoch=current,
                            leader_epoch=epoch,
                        ),
                    ),
                ),
            ),
        )
        with RawClient(broker.port) as client:
            return client.request(request).topics[0].partitions[0]

    answer = ask(0, current=0)
    assert (answer.error_code.value, answer.leader_epoch, answer.end_offset) == (0, 0, 4)
    assert ask(0, current=3).error_code.value == 75  # UNKNOWN_LEADER_EPOCH
    assert ask(0, partition=5).error_code.value == 3


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_TOPICS))
def test_create_topics_every_version(brook_broker, version):
    request_type = load_request_schema(ApiKey.CREATE_TOPICS, version)
    name = f"created-v{version}"
    config_type = nested(request_type, "CreatableTopicConfig")

    def create(topic: str, partitions: int, configs: tuple = (), validate_only: bool = False):
        request = make(
            request_type,
            timeout=datetime.timedelta(seconds=5),
            validate_only=validate_only,
            topics=(
                make(
                    nested(request_type, "CreatableTopic"),
                    name=topic,
                    num_partitions=partitions,
                    replication_factor=1,
                    assignments=(),
                    configs=configs,
                ),
            ),
        )
        with RawClient(brook_broker.port) as client:
            return client.request(request).topics[0]

    assert create(name, 3, validate_only=True).error_code.value == 0
    assert not (brook_broker.data_dir / f"{name}-0").exists()
    created = create(name, 3, (make(config_type, name="segment.bytes", value="100000"),))
    assert created.error_code.value == 0
    if version >= 5:
        assert created.num_partitions == 3
        configs = {entry.name: entry.value for entry in created.configs}
        assert configs["segment.bytes"] == "100000"
    if version >= 7:
        assert created.topic_id != uuid.UUID(int=0)
    assert create(name, 3).error_code.value == 36  # TOPIC_ALREADY_EXISTS
    assert create(name + "-zero", 0).error_code.value == 37  # INVALID_PARTITIONS
    bad = create(name + "-cfg", 1, (make(config_type, name="segment.bytes", value="x"),))
    assert bad.error_code.value == 40  # INVALID_CONFIG
    unknown = create(name + "-cfg", 1, (make(config_type, name="no.such.key", value="1"),))
    assert unknown.error_code.value == 40


@pytest.mark.parametrize("version", versions(ApiKey.DELETE_TOPICS))
def test_delete_topics_every_version(brook_broker, version):
    name = f"deleted-v{version}"
    create_topic(brook_broker.bootstrap, name)
    request_type = load_request_schema(ApiKey.DELETE_TOPICS, version)
    if version >= 6:
        state = nested(request_type, "DeleteTopicState")
        request = make(
            request_type,
            timeout=datetime.timedelta(seconds=5),
            topics=(
                make(state, name=name, topic_id=uuid.UUID(int=0)),
                make(state, name="never-was", topic_id=uuid.UUID(int=0)),
            ),
        )
    else:
        request = make(
            request_type, timeout=datetime.timedelta(seconds=5), topic_names=(name, "never-was")
        )
    with RawClient(brook_broker.port) as client:
        response = client.request(request)
    errors = {result.name: result.error_code.value for result in response.responses}
    assert errors == {name: 0, "never-was": 3}
    assert not (brook_broker.data_dir / f"{name}-0").exists()


def test_delete_topics_v6_with_neither_or_both_of_name_and_id(brook_broker, caplog):
    """Kafka's answers: neither given is a topic that does not exist; both given refuses
    the whole request (INVALID_REQUEST for every topic), deleting nothing."""
    caplog.set_level(logging.INFO, logger="brook.apis.delete_topics")
    name = "kept-v6"
    create_topic(brook_broker.bootstrap, name)
    request_type = load_request_schema(ApiKey.DELETE_TOPICS, 6)
    state = nested(request_type, "DeleteTopicState")

    def delete(*topics: Any) -> Any:
        request = make(request_type, timeout=datetime.timedelta(seconds=5), topics=topics)
        with RawClient(brook_broker.port) as client:
            return client.request(request).responses

    (neither,) = delete(make(state, name=None, topic_id=uuid.UUID(int=0)))
    assert (neither.name, neither.error_code.value) == (None, 3)  # UNKNOWN_TOPIC_OR_PARTITION
    both = delete(
        make(state, name=name, topic_id=uuid.uuid4()),
        make(state, name=name, topic_id=uuid.UUID(int=0)),
    )
    assert [result.error_code.value for result in both] == [42, 42]  # INVALID_REQUEST
    assert both[0].error_message == "Topic name and topic ID can not both be specified."
    assert (brook_broker.data_dir / f"{name}-0").exists()
    assert f"refused: {both[0].error_message}" in caplog.text


@pytest.mark.parametrize("version", versions(ApiKey.CREATE_PARTITIONS))
def test_create_partitions_every_version(brook_broker, version):
    name = f"grown-v{version}"
    create_topic(brook_broker.bootstrap, name, partitions=2)
    request_type = load_request_schema(ApiKey.CREATE_PARTITIONS, version)

    def grow(topic: str, count: int) -> int:
        request = make(
            request_type,
            timeout=datetime.timedelta(seconds=5),
            validate_only=False,
            topics=(
                make(
                    nested(request_type, "CreatePartitionsTopic"),
                    name=topic,
                    count=count,
                    assignments=None,
                ),
            ),
        )
        with RawClient(brook_broker.port) as client:
            return client.request(request).results[0].error_code.value

    assert grow(name, 4) == 0
    assert (brook_broker.data_dir / f"{name}-3").is_dir()
    assert grow(name, 3) == 37  # INVALID_PARTITIONS: fewer than now
    assert grow("never-was", 3) == 3
