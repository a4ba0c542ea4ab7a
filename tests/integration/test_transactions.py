"""The transaction coordinator with real transactional clients over real sockets:
sessions, commit and abort with their markers, offsets in a transaction, zombie fencing,
and Kafka's errors for bad requests (each changing nothing)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kio.index import load_request_schema

from brook.broker.tools.wire_client import describe_transactions_response
from brook.coordinator_state.transaction_metadata import TransactionState
from brook.protocol.api_table import ApiKey

from .clients import create_topic, kafka_python_producer, stored_batches
from .raw_client import RawClient, make, nested, versions

TIMEOUT_S = 20


def _state(brook_broker, transactional_id: str) -> TransactionState | None:
    found = brook_broker.call(lambda: brook_broker.broker.transactions.describe(transactional_id))
    return found.state if found is not None else None


def _markers(brook_broker, topic: str, partition: int = 0) -> list[tuple[int, int]]:
    """(producer id, epoch) of each control batch stored in the partition."""
    return [
        (header.producer_id, header.producer_epoch)
        for header in stored_batches(brook_broker.data_dir, topic, partition)
        if header.is_control
    ]


def _transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def test_confluent_commit_and_abort_write_markers(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    producer = _transactional_producer(bootstrap, "tx-confluent")
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic_name, value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(TIMEOUT_S)
    assert _state(brook_broker, "tx-confluent") is TransactionState.COMPLETE_COMMIT
    producer.begin_transaction()
    producer.produce(topic_name, value=b"aborted", partition=0)
    producer.flush(TIMEOUT_S)  # sent, so the partition is in the transaction
    producer.abort_transaction(TIMEOUT_S)
    assert _state(brook_broker, "tx-confluent") is TransactionState.COMPLETE_ABORT
    # One COMMIT marker per partition, then an ABORT marker in partition 0 only.
    assert len(_markers(brook_broker, topic_name, 0)) == 2
    assert len(_markers(brook_broker, topic_name, 1)) == 1
    pid_epochs = set(_markers(brook_broker, topic_name, 0) + _markers(brook_broker, topic_name, 1))
    assert len(pid_epochs) == 1  # all from the one producer id and epoch


def test_offsets_in_a_transaction_count_only_when_it_commits(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    group = f"{topic_name}-group"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    producer = _transactional_producer(bootstrap, "tx-offsets")
    partition = TopicPartition(topic_name, 0)
    for offset, commit in ((5, False), (9, True)):
        producer.begin_transaction()
        producer.produce(topic_name, value=b"out")
        producer.send_offsets_to_transaction(
            [TopicPartition(topic_name, 0, offset)],
            consumer.consumer_group_metadata(),
            TIMEOUT_S,
        )
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            producer.abort_transaction(TIMEOUT_S)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        from confluent_kafka import ConsumerGroupTopicPartitions

        listed = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, [partition])]
        )[group].result(TIMEOUT_S)
        assert listed.topic_partitions[0].offset == (9 if commit else -1001)
    consumer.close()


def test_a_new_producer_fences_the_old_one(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    zombie = _transactional_producer(bootstrap, "tx-fence")
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie")
    zombie.flush(TIMEOUT_S)
    successor = _transactional_producer(bootstrap, "tx-fence")  # aborts the zombie's
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(TIMEOUT_S)
    assert fenced.value.args[0].fatal() or "fenced" in str(fenced.value).lower()
    successor.begin_transaction()
    successor.produce(topic_name, value=b"successor")
    successor.commit_transaction(TIMEOUT_S)
    markers = _markers(brook_broker, topic_name)
    assert len(markers) == 2  # the zombie's ABORT (fenced epoch), the successor's COMMIT
    assert markers[0][1] < markers[1][1]


def test_aiokafka_transactional_producer_commits(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="tx-aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send_and_wait(topic_name, b"aio-%d" % i, partition=0)
        finally:
            await producer.stop()

    asyncio.run(scenario())
    assert _state(brook_broker, "tx-aiokafka") is TransactionState.COMPLETE_COMMIT
    assert len(_markers(brook_broker, topic_name)) == 1


def test_kafka_python_transactional_producer_commits_and_aborts(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = kafka_python_producer(
        bootstrap, transactional_id="tx-kafka-python", enable_idempotence=True
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic_name, b"kept", partition=0)
        producer.commit_transaction()
        assert _state(brook_broker, "tx-kafka-python") is TransactionState.COMPLETE_COMMIT
        producer.begin_transaction()
        producer.send(topic_name, b"dropped", partition=0).get(TIMEOUT_S)
        producer.abort_transaction()
        assert _state(brook_broker, "tx-kafka-python") is TransactionState.COMPLETE_ABORT
    finally:
        producer.close()
    assert len(_markers(brook_broker, topic_name)) == 2


# --- bad requests -----------------------------------------------------------------------


def _request(api: ApiKey, version: int, **fields) -> object:
    request_type = load_request_schema(api, version)
    return make(request_type, **fields), request_type


def _init(client: RawClient, transactional_id: str, timeout_ms: int = 60_000):
    request, _ = _request(
        ApiKey.INIT_PRODUCER_ID,
        4,
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
        producer_id=-1,
        producer_epoch=-1,
    )
    return client.request(request)


def _add_partitions(client: RawClient, transactional_id, producer_id, epoch, topic, partition):
    request_type = load_request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, 3)
    topic_type = nested(request_type, "AddPartitionsToTxnTopic")
    request = request_type(
        v3_and_below_transactional_id=transactional_id,
        v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(topic_type(name=topic, partitions=(partition,)),),
    )
    response = client.request(request)
    return response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def _add_offsets(client: RawClient, transactional_id, producer_id, epoch, group):
    request, _ = _request(
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        group_id=group,
    )
    return client.request(request).error_code


def _end(client: RawClient, transactional_id, producer_id, epoch, committed: bool):
    request, _ = _request(
        ApiKey.END_TXN,
        3,
        transactional_id=transactional_id,
        producer_id=producer_id,
        producer_epoch=epoch,
        committed=committed,
    )
    return client.request(request).error_code


@pytest.mark.parametrize("version", versions(ApiKey.END_TXN))
def test_bad_transaction_requests_get_kafkas_errors(brook_broker, topic_name, version):
    create_topic(brook_broker.bootstrap, topic_name)
    tid = f"tx-bad-{version}"
    with RawClient(brook_broker.port) as client:
        too_long = _init(client, tid, timeout_ms=900_001)
        assert too_long.error_code.name == "invalid_transaction_timeout"
        assert _state(brook_broker, tid) is None  # nothing stored
        session = _init(client, tid)
        pid, epoch = session.producer_id, session.producer_epoch
        request, _ = _request(
            ApiKey.END_TXN,
            version,
            transactional_id=tid,
            producer_id=pid,
            producer_epoch=epoch,
            committed=True,
        )
        assert client.request(request).error_code.name == "invalid_txn_state"
        unknown = _add_partitions(client, tid, pid, epoch, f"{topic_name}-missing", 0)
        assert unknown.name == "unknown_topic_or_partition"
        assert _add_partitions(client, tid, pid + 1, epoch, topic_name, 0).name == (
            "invalid_producer_id_mapping"
        )
        assert _state(brook_broker, tid) is TransactionState.EMPTY
        assert _add_partitions(client, tid, pid, epoch, topic_name, 0).name == "none"
        newer = _init(client, tid)  # fences `epoch`, aborting its transaction first
        assert newer.error_code.name == "concurrent_transactions"
        assert _end(client, tid, pid, epoch, True).name == "producer_fenced"
        assert _add_partitions(client, tid, pid, epoch, topic_name, 0).name == "producer_fenced"
        assert _state(brook_broker, tid) is TransactionState.COMPLETE_ABORT


# --- the admin APIs ---------------------------------------------------------------------


def test_describe_and_list_transactions(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    open_one = _transactional_producer(bootstrap, "tx-open")
    open_one.begin_transaction()
    open_one.produce(topic_name, value=b"pending", partition=0)
    open_one.flush(TIMEOUT_S)
    _transactional_producer(bootstrap, "tx-idle")
    with RawClient(brook_broker.port) as client:
        request, _ = _request(ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx-open",))
        [described] = client.request(request).transaction_states
        assert described.transaction_state == "Ongoing"
        assert [(t.topic, t.partitions) for t in described.topics] == [(topic_name, (0,))]
        assert described.transaction_start_time.timestamp() > 0
        request, _ = _request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, transactional_ids=("tx-idle", "nope")
        )
        # Without a transaction under way Kafka answers a start time of -1, which kio
        # cannot parse: read as brook transactions reads it, as an int64.
        client.send(request)
        states = client.receive(describe_transactions_response()).transaction_states
        assert [
            (s.error_code, s.transactional_id, s.transaction_state, s.transaction_start_time)
            for s in states
        ] == [
            (0, "tx-idle", "Empty", -1),
            (105, "nope", "", -1),  # TRANSACTIONAL_ID_NOT_FOUND
        ]
        for version in versions(ApiKey.LIST_TRANSACTIONS):
            request, _ = _request(
                ApiKey.LIST_TRANSACTIONS,
                version,
                state_filters=("Ongoing", "Sleepy"),
                producer_id_filters=(),
                duration_filter=-1,
            )
            listed = client.request(request)
            assert [s.transactional_id for s in listed.transaction_states] == ["tx-open"]
            assert listed.unknown_state_filters == ("Sleepy",)
    open_one.abort_transaction(TIMEOUT_S)


def test_write_txn_markers_writes_and_refuses_per_partition(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    request_type = load_request_schema(ApiKey.WRITE_TXN_MARKERS, 1)
    marker_type = nested(request_type, "WritableTxnMarker")
    topic_type = nested(request_type, "WritableTxnMarkerTopic")
    request = request_type(
        markers=(
            marker_type(
                producer_id=4242,
                producer_epoch=3,
                transaction_result=True,
                topics=(
                    topic_type(name=topic_name, partition_indexes=(0,)),
                    topic_type(name=f"{topic_name}-missing", partition_indexes=(0,)),
                ),
                coordinator_epoch=0,
            ),
        )
    )
    with RawClient(brook_broker.port) as client:
        response = client.request(request)
    [result] = response.markers
    errors = {t.name: t.partitions[0].error_code.name for t in result.topics}
    assert errors == {topic_name: "none", f"{topic_name}-missing": "unknown_topic_or_partition"}
    assert _markers(brook_broker, topic_name) == [(4242, 3)]


def test_an_empty_transaction_commits_without_markers(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    producer = _transactional_producer(bootstrap, "tx-empty")
    producer.begin_transaction()
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.abort_transaction(TIMEOUT_S)
    assert _state(brook_broker, "tx-empty") is TransactionState.EMPTY
    assert _markers(brook_broker, topic_name) == []


def test_txn_offset_commit_with_a_stale_generation_stores_nothing(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    group = f"{topic_name}-group"
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    member.subscribe([topic_name])
    while not member.assignment():
        member.poll(0.2)
    generation = brook_broker.call(lambda: brook_broker.broker.groups.group(group).generation_id)
    with RawClient(brook_broker.port) as client:
        session = _init(client, "tx-stale")
        pid, epoch = session.producer_id, session.producer_epoch
        assert _add_offsets(client, "tx-stale", pid, epoch, group).name == "none"
        request_type = load_request_schema(ApiKey.TXN_OFFSET_COMMIT, 3)
        topic_type = nested(request_type, "TxnOffsetCommitRequestTopic")
        partition_type = nested(request_type, "TxnOffsetCommitRequestPartition")
        request = request_type(
            transactional_id="tx-stale",
            group_id=group,
            producer_id=session.producer_id,
            producer_epoch=session.producer_epoch,
            generation_id=generation + 5,
            member_id="someone-else",
            group_instance_id=None,
            topics=(
                topic_type(
                    name=topic_name,
                    partitions=(
                        partition_type(
                            partition_index=0,
                            committed_offset=7,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        ),
                    ),
                ),
            ),
        )
        response = client.request(request)
    error = response.topics[0].partitions[0].error_code
    assert error.name in ("unknown_member_id", "illegal_generation")
    pending = brook_broker.call(
        lambda: brook_broker.broker.groups.unstable_offsets(group, [(topic_name, 0)])
    )
    assert pending == set()  # nothing was written in the transaction
    member.close()


def test_a_transactional_write_outside_the_transaction_is_refused(brook_broker, topic_name):
    """KIP-890 verification: the partition must be in the producer's ongoing transaction."""
    from brook.protocol.record_batch import Record, build_batch

    from .raw_client import produce_request

    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        session = _init(client, "tx-verify")
        pid, epoch = session.producer_id, session.producer_epoch
        batch = build_batch(
            [Record(0, 1_700_000_000_000, None, b"sneaky")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            transactional=True,
        )

        def produce() -> str:
            request = produce_request(topic_name, 0, batch)
            request = dataclasses.replace(request, transactional_id="tx-verify")
            response = client.request(request)
            return response.responses[0].partition_responses[0].error_code.name

        assert produce() == "invalid_txn_state"  # no transaction is open
        assert stored_batches(brook_broker.data_dir, topic_name) == []
        assert _add_partitions(client, "tx-verify", pid, epoch, topic_name, 0).name == "none"
        assert produce() == "none"
        assert len(stored_batches(brook_broker.data_dir, topic_name)) == 1
