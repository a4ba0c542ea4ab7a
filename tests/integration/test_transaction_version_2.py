"""Transaction version 2 (KIP-890 part 2, what Kafka 4's Java producer speaks) and the
KIP-890 errors of each request version, over a real socket to a real broker.

No Python client speaks transaction version 2 yet, so a raw client sends what the Java
producer sends once the broker finalizes `transaction.version` 2: Produce v12 and
TxnOffsetCommit v5 with no AddPartitionsToTxn or AddOffsetsToTxn, EndTxn v5 taking the
next epoch from the response. The records it commits are read back by confluent-kafka
and kcat under read_committed.
"""

from __future__ import annotations

import dataclasses
import datetime
import subprocess

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.index import load_request_schema

from brook.broker.testing import wait_until
from brook.coordinator_state.transaction_metadata import TransactionState
from brook.protocol.api_table import ApiKey
from brook.protocol.record_batch import Record, build_batch

from .clients import create_topic, stored_batches
from .raw_client import RawClient, make, nested, produce_request

TIMEOUT_S = 20
TXN_ID = "tx-v2"


def _init(client: RawClient, transactional_id: str = TXN_ID) -> tuple[int, int]:
    request_type = load_request_schema(ApiKey.INIT_PRODUCER_ID, 5)
    response = client.request(
        make(
            request_type,
            transactional_id=transactional_id,
            transaction_timeout=datetime.timedelta(seconds=60),
            producer_id=-1,
            producer_epoch=-1,
        )
    )
    assert response.error_code.name == "none"
    return response.producer_id, response.producer_epoch


def _produce(
    client: RawClient,
    topic: str,
    producer: tuple[int, int],
    sequence: int,
    values: list[bytes],
    version: int = 12,
    transactional_id: str = TXN_ID,
) -> str:
    pid, epoch = producer
    batch = build_batch(
        [Record(i, 1_700_000_000_000 + i, None, value) for i, value in enumerate(values)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
        transactional=True,
    )
    request = produce_request(topic, 0, batch, version=version)
    request = dataclasses.replace(request, transactional_id=transactional_id)
    return client.request(request).responses[0].partition_responses[0].error_code.name


def _end(
    client: RawClient, producer: tuple[int, int], commit: bool, version: int = 5
) -> tuple[str, int, int]:
    request_type = load_request_schema(ApiKey.END_TXN, version)
    response = client.request(
        request_type(
            transactional_id=TXN_ID,
            producer_id=producer[0],
            producer_epoch=producer[1],
            committed=commit,
        )
    )
    return (
        response.error_code.name,
        getattr(response, "producer_id", -1),
        getattr(response, "producer_epoch", -1),
    )


def _txn_offset_commit(
    client: RawClient, group: str, producer: tuple[int, int], topic: str, offset: int, version: int
) -> str:
    request_type = load_request_schema(ApiKey.TXN_OFFSET_COMMIT, version)
    request = make(
        request_type,
        transactional_id=TXN_ID,
        group_id=group,
        producer_id=producer[0],
        producer_epoch=producer[1],
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            make(
                nested(request_type, "TxnOffsetCommitRequestTopic"),
                name=topic,
                partitions=(
                    make(
                        nested(request_type, "TxnOffsetCommitRequestPartition"),
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    ),
                ),
            ),
        ),
    )
    return client.request(request).topics[0].partitions[0].error_code.name


def _describe(brook_broker, transactional_id: str = TXN_ID):
    return brook_broker.call(lambda: brook_broker.broker.transactions.describe(transactional_id))


def _read_committed(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{topic}-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=TIMEOUT_S)
    position = 0
    while position < high:
        message = consumer.poll(1)
        if message is None:
            position = consumer.position([TopicPartition(topic, 0)])[0].offset
            continue
        assert message.error() is None, message.error()
        values.append(message.value())
        position = message.offset() + 1
    consumer.close()
    return values


def test_api_versions_finalize_transaction_version_2(brook_broker):
    with RawClient(brook_broker.port) as client:
        v4 = client.request(
            load_request_schema(ApiKey.API_VERSIONS, 4)(
                client_software_name="test", client_software_version="1"
            )
        )
        v3 = client.request(
            load_request_schema(ApiKey.API_VERSIONS, 3)(
                client_software_name="test", client_software_version="1"
            )
        )
    # Share groups (KIP-932) are on, as in a new Kafka 4.2+ cluster.
    assert [(f.name, f.min_version, f.max_version) for f in v4.supported_features] == [
        ("share.version", 0, 1),
        ("transaction.version", 0, 2),
    ]
    # v3 leaves out features whose minimum is 0, as Kafka does; the finalized level shows.
    assert v3.supported_features == ()
    for response in (v3, v4):
        assert response.finalized_features_epoch >= 0
        assert [
            (f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features
        ] == [("share.version", 1, 1), ("transaction.version", 2, 2)]
    produce = next(key for key in v4.api_keys if key.api_key == ApiKey.PRODUCE)
    assert produce.max_version >= 12


def test_a_transaction_version_2_producer_commits_without_adding_partitions(
    brook_broker, topic_name
):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    group = f"{topic_name}-app"
    with RawClient(brook_broker.port) as client:
        first = _init(client)
        # Produce v12 adds the partition to a transaction it opens.
        assert _produce(client, topic_name, first, 0, [b"one", b"two"]) == "none"
        state = _describe(brook_broker)
        assert state.state is TransactionState.ONGOING
        assert state.partitions == {(topic_name, 0)}
        assert state.client_transaction_version == 2
        # TxnOffsetCommit v5 adds the group's offsets partition.
        assert _txn_offset_commit(client, group, first, topic_name, 42, version=5) == "none"
        assert len(_describe(brook_broker).partitions) == 2
        error, pid, epoch = _end(client, first, commit=True)
        # EndTxn v5 answers the next epoch; the markers carry it.
        assert (error, pid, epoch) == ("none", first[0], first[1] + 1)
        wait_until(
            lambda: _describe(brook_broker).state is TransactionState.COMPLETE_COMMIT,
            what="the markers of the commit",
        )
        assert [
            (h.producer_id, h.producer_epoch)
            for h in stored_batches(brook_broker.data_dir, topic_name)
            if h.is_control
        ] == [(pid, epoch)]
        # The next transaction goes on under the new epoch, its sequence from 0.
        second = (pid, epoch)
        assert _produce(client, topic_name, second, 0, [b"three"]) == "none"
        assert _end(client, second, commit=False) == ("none", pid, epoch + 1)
        # A late write of the first session is fenced by the markers' epoch.
        assert _produce(client, topic_name, first, 2, [b"zombie"]) == "invalid_producer_epoch"
    assert _read_committed(bootstrap, topic_name) == [b"one", b"two"]
    offsets = brook_broker.call(
        lambda: brook_broker.broker.groups.fetch_offsets(group, [(topic_name, 0)])
    )
    assert offsets[1][(topic_name, 0)].offset == 42
    kcat = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic_name,
            "-p",
            "0",
            "-e",
            "-q",
            "-X",
            "isolation.level=read_committed",
            "-f",
            "%s\\n",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=True,
    )
    assert kcat.stdout.split() == ["one", "two"]
    assert (
        b"zombie"
        not in (brook_broker.data_dir / f"{topic_name}-0" / "00000000000000000000.log").read_bytes()
    )


def test_end_txn_v5_retries_empty_aborts_and_refusals(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        pid, epoch = _init(client)
        # Commit with nothing open: INVALID_TXN_STATE, nothing changes.
        assert _end(client, (pid, epoch), commit=True) == ("invalid_txn_state", -1, -1)
        # Abort with nothing open bumps the epoch (no markers to write).
        assert _end(client, (pid, epoch), commit=False) == ("none", pid, epoch + 1)
        wait_until(
            lambda: _describe(brook_broker).state is TransactionState.COMPLETE_ABORT,
            what="the empty abort to complete",
        )
        # The same EndTxn again (the client's retry, with the old epoch) answers the same.
        assert _end(client, (pid, epoch), commit=False) == ("none", pid, epoch + 1)
        # A retry of the other outcome is refused.
        assert _end(client, (pid, epoch), commit=True) == ("invalid_txn_state", -1, -1)
        # An epoch older than the previous one is fenced.
        assert _end(client, (pid, epoch - 1), commit=False)[0] == "producer_fenced"
        # A producer id that is not the id's.
        assert _end(client, (pid + 100, epoch + 1), commit=False)[0] == (
            "invalid_producer_id_mapping"
        )
        # EndTxn v1 gets the fence as INVALID_PRODUCER_EPOCH (PRODUCER_FENCED is v2+).
        assert _end(client, (pid, epoch - 1), commit=False, version=1)[0] == (
            "invalid_producer_epoch"
        )
    assert [h for h in stored_batches(brook_broker.data_dir, topic_name)] == []
    state = _describe(brook_broker)
    assert (state.producer_id, state.producer_epoch) == (pid, epoch + 1)


@pytest.mark.parametrize(
    ("version", "expected"),
    [(10, "invalid_txn_state"), (11, "transaction_abortable")],
)
def test_a_write_outside_the_transaction_gets_the_error_of_its_version(
    brook_broker, topic_name, version, expected
):
    create_topic(brook_broker.bootstrap, topic_name)
    group = f"{topic_name}-app"
    with RawClient(brook_broker.port) as client:
        producer = _init(client)
        assert _produce(client, topic_name, producer, 0, [b"x"], version=version) == expected
        offsets_version = {10: 3, 11: 4}[version]
        assert (
            _txn_offset_commit(client, group, producer, topic_name, 5, offsets_version) == expected
        )
    assert stored_batches(brook_broker.data_dir, topic_name) == []
    assert _describe(brook_broker).state is TransactionState.EMPTY
    assert brook_broker.call(
        lambda: brook_broker.broker.groups.fetch_offsets(group, [(topic_name, 0)])
    )[1] == {(topic_name, 0): None}


@pytest.mark.parametrize(
    ("version", "expected"), [(4, "invalid_txn_state"), (5, "transaction_abortable")]
)
def test_verify_only_add_partitions_answers_transaction_abortable_from_v5(
    brook_broker, topic_name, version, expected
):
    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        pid, epoch = _init(client)
        request_type = load_request_schema(ApiKey.ADD_PARTITIONS_TO_TXN, version)
        transaction = nested(request_type, "AddPartitionsToTxnTransaction")
        topic = nested(request_type, "AddPartitionsToTxnTopic")
        response = client.request(
            request_type(
                transactions=(
                    transaction(
                        transactional_id=TXN_ID,
                        producer_id=pid,
                        producer_epoch=epoch,
                        verify_only=True,
                        topics=(topic(name=topic_name, partitions=(0,)),),
                    ),
                )
            )
        )
    result = response.results_by_transaction[0].topic_results[0].results_by_partition[0]
    assert result.partition_error_code.name == expected
    assert _describe(brook_broker).state is TransactionState.EMPTY


def test_a_fenced_producer_cannot_open_a_transaction_by_producing(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    with RawClient(brook_broker.port) as client:
        old = _init(client)
        new = _init(client)
        assert new == (old[0], old[1] + 1)
        assert _produce(client, topic_name, old, 0, [b"zombie"]) == "invalid_producer_epoch"
        assert _txn_offset_commit(client, "g", old, topic_name, 1, 5) == "invalid_producer_epoch"
    assert stored_batches(brook_broker.data_dir, topic_name) == []
    assert _describe(brook_broker).state is TransactionState.EMPTY
