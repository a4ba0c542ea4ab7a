"""`brook transactions` against a real broker: the console script as a subprocess, real
confluent-kafka transactional producers, a hanging transaction made with a raw
transactional Produce for a producer id no coordinator ever saw, and what the tool reads
and writes checked against the broker's own state and the partition's segment files."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from brook.broker.testing import BrokerThread, wait_until
from brook.coordinator_state.transaction_metadata import TransactionState
from brook.protocol.coordinator_records import ControlRecordType, decode_control_key
from brook.protocol.record_batch import Record, build_batch, decode_records, split_batches

from .cli import Ran, assert_one_line_error, brook
from .clients import create_topic
from .raw_client import RawClient, produce_request

TIMEOUT_S = 20
HOUR_MS = 3_600_000
# A producer id the broker never handed out (its ids count up from 0).
HANGING_PRODUCER_ID = 4_000_000_000
NO_TXN_START_SKIP = (
    "DescribeProducers answers current_txn_start_offset -1 for an open transaction: the"
    " partition-side transaction tracking has not landed on this branch, and find-hanging"
    " and abort --start-offset need it"
)


def transactions(broker: BrokerThread, *args: str) -> Ran:
    return brook("transactions", "--bootstrap-server", broker.bootstrap, *args)


def table(ran: Ran) -> list[dict[str, str]]:
    """The rows of the tool's table as dicts, read as Kafka's tool writes it: each cell
    padded and followed by a tab, the header first."""
    assert ran.returncode == 0, ran
    lines = ran.stdout.splitlines()
    header = [cell.strip() for cell in lines[0].split("\t")[:-1]]
    rows = []
    for line in lines[1:]:
        assert line.endswith("\t"), repr(line)
        rows.append(dict(zip(header, (c.strip() for c in line.split("\t")[:-1]), strict=True)))
    return rows


def transactional_producer(bootstrap: str, transactional_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def coordinator_state(broker: BrokerThread, transactional_id: str) -> Any:
    return broker.call(lambda: broker.broker.transactions.describe(transactional_id))


def wait_for_state(broker: BrokerThread, transactional_id: str, state: TransactionState) -> None:
    wait_until(
        lambda: coordinator_state(broker, transactional_id).state is state,
        what=f"{transactional_id} to reach {state.name}",
    )


def markers(data_dir: Path, topic: str, partition: int) -> list[tuple[int, ControlRecordType]]:
    """(producer id, COMMIT or ABORT) of each control batch the partition stores on disk."""
    found = []
    for segment in sorted((data_dir / f"{topic}-{partition}").glob("*.log")):
        buffer = segment.read_bytes()
        for header in split_batches(buffer, allow_partial_tail=True):
            if header.is_control:
                [record] = decode_records(buffer, header)
                assert record.key is not None
                found.append((header.producer_id, decode_control_key(record.key).type))
    return found


def produce_hanging(
    broker: BrokerThread, topic: str, partition: int, producer_id: int, producer_epoch: int = 0
) -> int:
    """A transactional batch of `producer_id`, written an hour ago by its timestamps, sent
    without any coordinator knowing of it: a transaction no one will finish. Returns its
    offset."""
    written = int(time.time() * 1000) - HOUR_MS
    batch = build_batch(
        [Record(0, written, b"k", b"hanging"), Record(1, written, b"k", b"hanging")],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0,
        transactional=True,
    )
    with RawClient(broker.port) as client:
        response = client.request(produce_request(topic, partition, batch))
    [answer] = response.responses[0].partition_responses
    assert answer.error_code.name == "none", answer
    return answer.base_offset


def producers(broker: BrokerThread, topic: str, partition: int) -> dict[str, dict[str, str]]:
    return {
        row["ProducerId"]: row
        for row in table(
            transactions(
                broker, "describe-producers", "--topic", topic, "--partition", str(partition)
            )
        )
    }


def test_help():
    ran = brook("transactions", "--help")
    assert ran.returncode == 0
    for action in ("--list", "--describe", "--describe-producers", "--abort", "--find-hanging"):
        assert action in ran.stdout


def test_list_and_describe_an_ongoing_and_a_completed_transaction(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    done = transactional_producer(bootstrap, "tx-done")
    done.begin_transaction()
    done.produce(topic_name, value=b"a", partition=0)
    done.produce(topic_name, value=b"b", partition=1)
    done.commit_transaction(TIMEOUT_S)
    wait_for_state(brook_broker, "tx-done", TransactionState.COMPLETE_COMMIT)
    ongoing = transactional_producer(bootstrap, "tx-ongoing")
    ongoing.begin_transaction()
    ongoing.produce(topic_name, value=b"c", partition=1)
    ongoing.flush(TIMEOUT_S)  # sent, so the partition is in the transaction
    broker_id = str(brook_broker.config.broker_id)
    done_pid = str(coordinator_state(brook_broker, "tx-done").producer_id)
    ongoing_pid = str(coordinator_state(brook_broker, "tx-ongoing").producer_id)

    listed = transactions(brook_broker, "list")
    assert listed.stdout.splitlines()[0].split("\t") == [
        "TransactionalId",
        "Coordinator",
        "ProducerId",
        "TransactionState",
        "",  # Kafka's table ends every line with a tab
    ]
    assert sorted(table(listed), key=lambda row: row["TransactionalId"]) == [
        {
            "TransactionalId": "tx-done",
            "Coordinator": broker_id,
            "ProducerId": done_pid,
            "TransactionState": "CompleteCommit",
        },
        {
            "TransactionalId": "tx-ongoing",
            "Coordinator": broker_id,
            "ProducerId": ongoing_pid,
            "TransactionState": "Ongoing",
        },
    ]
    assert transactions(brook_broker, "--list").stdout == listed.stdout  # the flag form

    [row] = table(transactions(brook_broker, "describe", "--transactional-id", "tx-ongoing"))
    timing = ("CurrentTransactionStartTimeMs", "TransactionDurationMs")
    assert {key: value for key, value in row.items() if key not in timing} == {
        "CoordinatorId": broker_id,
        "TransactionalId": "tx-ongoing",
        "ProducerId": ongoing_pid,
        "ProducerEpoch": "0",
        "TransactionState": "Ongoing",
        "TransactionTimeoutMs": "60000",  # librdkafka's transaction.timeout.ms
        "TopicPartitions": f"{topic_name}-1",
    }
    started = coordinator_state(brook_broker, "tx-ongoing").txn_start_timestamp
    assert row["CurrentTransactionStartTimeMs"] == str(started)
    assert int(row["TransactionDurationMs"]) >= 0

    [row] = table(transactions(brook_broker, "--describe", "--transactional-id", "tx-done"))
    assert row["TransactionState"] == "CompleteCommit"
    assert row["ProducerId"] == done_pid
    assert row["TopicPartitions"] == ""  # every marker is written
    ongoing.abort_transaction(TIMEOUT_S)
    wait_for_state(brook_broker, "tx-ongoing", TransactionState.COMPLETE_ABORT)
    [row] = table(transactions(brook_broker, "describe", "--transactional-id", "tx-ongoing"))
    assert row["TransactionState"] == "CompleteAbort"


def test_describe_producers_lists_a_partitions_producers(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    producer = transactional_producer(bootstrap, "tx-producers")
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic_name, value=b"%d" % i, partition=0)
    producer.commit_transaction(TIMEOUT_S)
    wait_for_state(brook_broker, "tx-producers", TransactionState.COMPLETE_COMMIT)
    pid = str(coordinator_state(brook_broker, "tx-producers").producer_id)

    ran = transactions(
        brook_broker, "describe-producers", "--topic", topic_name, "--partition", "0"
    )
    assert ran.stdout.splitlines()[0].split("\t")[:-1] == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    [row] = table(ran)
    assert row["ProducerId"] == pid
    assert row["ProducerEpoch"] == "0"
    assert row["LastSequence"] == "2"  # three records, sequences 0-2
    assert int(row["LastTimestamp"]) > 0
    assert row["CurrentTransactionStartOffset"] == "None"  # committed
    # The same from the replica named by --broker-id; partition 1 has no producer.
    by_replica = transactions(
        brook_broker,
        "--describe-producers",
        "--topic",
        topic_name,
        "--partition",
        "0",
        "--broker-id",
        str(brook_broker.config.broker_id),
    )
    assert table(by_replica) == [row]
    assert producers(brook_broker, topic_name, 1) == {}


def abort_by_producer_id(broker: BrokerThread, topic: str, epoch: int, coordinator: int) -> Ran:
    return transactions(
        broker,
        "abort",
        "--topic",
        topic,
        "--partition",
        "0",
        "--producer-id",
        str(HANGING_PRODUCER_ID),
        "--producer-epoch",
        str(epoch),
        "--coordinator-epoch",
        str(coordinator),
    )


def test_abort_by_producer_id_writes_an_abort_marker(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    produce_hanging(brook_broker, topic_name, 0, HANGING_PRODUCER_ID, producer_epoch=3)
    # A marker of an older epoch than the producer's is refused by the partition.
    assert_one_line_error(
        abort_by_producer_id(brook_broker, topic_name, epoch=1, coordinator=0),
        f"Failed to abort transaction AbortTransactionSpec(topicPartition={topic_name}-0,"
        f" producerId={HANGING_PRODUCER_ID}, producerEpoch=1, coordinatorEpoch=0)",
        "INVALID_PRODUCER_EPOCH",
        code=1,
    )
    assert markers(brook_broker.data_dir, topic_name, 0) == []
    # Never had a marker: coordinator epoch -1, which the tool sends as 0, as Kafka's does.
    ran = abort_by_producer_id(brook_broker, topic_name, epoch=3, coordinator=-1)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    assert markers(brook_broker.data_dir, topic_name, 0) == [
        (HANGING_PRODUCER_ID, ControlRecordType.ABORT)
    ]
    [row] = producers(brook_broker, topic_name, 0).values()
    assert row["CurrentTransactionStartOffset"] == "None"


def test_find_hanging_and_abort_by_start_offset(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    # An open transaction its coordinator knows (Ongoing, with partition 0), written an
    # hour ago by its timestamp: old enough, but not hanging.
    known = transactional_producer(bootstrap, "tx-known")
    known.begin_transaction()
    known.produce(
        topic_name, value=b"known", partition=0, timestamp=int(time.time() * 1000) - HOUR_MS
    )
    known.flush(TIMEOUT_S)
    known_pid = str(coordinator_state(brook_broker, "tx-known").producer_id)
    start = produce_hanging(brook_broker, topic_name, 0, HANGING_PRODUCER_ID)

    described = producers(brook_broker, topic_name, 0)
    assert set(described) == {known_pid, str(HANGING_PRODUCER_ID)}
    if described[str(HANGING_PRODUCER_ID)]["CurrentTransactionStartOffset"] == "None":
        known.abort_transaction(TIMEOUT_S)
        pytest.skip(NO_TXN_START_SKIP)
    assert described[str(HANGING_PRODUCER_ID)]["CurrentTransactionStartOffset"] == str(start)

    for scope in (
        ["--topic", topic_name],
        ["--topic", topic_name, "--partition", "0"],
        ["--broker-id", str(brook_broker.config.broker_id)],
    ):
        [row] = table(
            transactions(brook_broker, "find-hanging", *scope, "--max-transaction-timeout", "1")
        )
        assert row["Topic"] == topic_name
        assert row["Partition"] == "0"
        assert row["ProducerId"] == str(HANGING_PRODUCER_ID)
        assert row["ProducerEpoch"] == "0"
        assert row["CoordinatorEpoch"] == "-1"
        assert row["StartOffset"] == str(start)
        assert int(row["Duration(min)"]) >= 59
    # Written an hour ago: not older than a 2-hour bound.
    assert (
        table(
            transactions(
                brook_broker,
                "find-hanging",
                "--topic",
                topic_name,
                "--max-transaction-timeout",
                "120",
            )
        )
        == []
    )

    ran = transactions(
        brook_broker,
        "abort",
        "--topic",
        topic_name,
        "--partition",
        "0",
        "--start-offset",
        str(start),
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "", "")
    assert (HANGING_PRODUCER_ID, ControlRecordType.ABORT) in markers(
        brook_broker.data_dir, topic_name, 0
    )
    assert (
        table(
            transactions(
                brook_broker,
                "find-hanging",
                "--topic",
                topic_name,
                "--max-transaction-timeout",
                "1",
            )
        )
        == []
    )
    # The known transaction is untouched: its producer still commits it.
    known.commit_transaction(TIMEOUT_S)
    wait_for_state(brook_broker, "tx-known", TransactionState.COMPLETE_COMMIT)


def test_abort_without_an_open_transaction_at_the_offset(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    ran = transactions(
        brook_broker, "abort", "--topic", topic_name, "--partition", "0", "--start-offset", "7"
    )
    assert_one_line_error(
        ran,
        f"Could not find any open transactions starting at offset 7 on partition {topic_name}-0",
        code=1,
    )
    assert markers(brook_broker.data_dir, topic_name, 0) == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "give one action"),
        (["list", "--describe"], "give one action"),
        (["describe"], "Missing required argument --transactional-id"),
        (["describe-producers", "--topic", "t"], "Missing required argument --partition"),
        (["abort", "--partition", "0", "--start-offset", "1"], "Missing required argument --topic"),
        (["abort", "--topic", "t", "--partition", "0"], "must be identified either with"),
        (
            ["abort", "--topic", "t", "--partition", "0", "--producer-id", "5"],
            "Missing required argument --producer-epoch",
        ),
        (
            [
                "abort",
                "--topic",
                "t",
                "--partition",
                "0",
                "--producer-id",
                "5",
                "--producer-epoch",
                "0",
            ],
            "Missing required argument --coordinator-epoch",
        ),
        (
            [
                "abort",
                "--topic",
                "t",
                "--partition",
                "0",
                "--start-offset",
                "1",
                "--producer-id",
                "5",
            ],
            "not both",
        ),
        (
            [
                "abort",
                "--topic",
                "t",
                "--partition",
                "0",
                "--producer-id",
                "5",
                "--producer-epoch",
                "40000",
                "--coordinator-epoch",
                "0",
            ],
            "--producer-epoch must be between 0 and 32767",
        ),
        (["find-hanging"], "requires either --topic or --broker-id"),
        (["find-hanging", "--broker-id", "0", "--partition", "0"], "requires --topic"),
        (["list", "--topic", "t"], "--topic is only for describe-producers, abort and"),
        (["describe", "--transactional-id", "x", "--start-offset", "1"], "--start-offset is only"),
        (["describe-producers", "--topic", "t", "--partition", "-1"], "must not be negative"),
    ],
)
def test_usage_errors(args, fragment):
    ran = brook("transactions", "--bootstrap-server", "127.0.0.1:1", *args)
    assert_one_line_error(ran, fragment, code=2)
    assert ran.stdout == ""


def test_errors_from_the_broker(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name)
    assert_one_line_error(
        transactions(brook_broker, "describe", "--transactional-id", "nobody"),
        "Failed to describe transaction state of transactional-id `nobody`",
        "TRANSACTIONAL_ID_NOT_FOUND",
        code=1,
    )
    for partition in ("0", "3"):
        missing = f"{topic_name}-gone" if partition == "0" else topic_name
        assert_one_line_error(
            transactions(
                brook_broker, "describe-producers", "--topic", missing, "--partition", partition
            ),
            f"Failed to describe producers for partition {missing}-{partition} on leader",
            "UNKNOWN_TOPIC_OR_PARTITION",
            code=1,
        )
    assert_one_line_error(
        transactions(brook_broker, "find-hanging", "--topic", f"{topic_name}-gone"),
        "Failed to describe 1 topics",
        "UNKNOWN_TOPIC_OR_PARTITION",
        code=1,
    )
    assert_one_line_error(
        transactions(
            brook_broker,
            "abort",
            "--topic",
            f"{topic_name}-gone",
            "--partition",
            "0",
            "--start-offset",
            "0",
        ),
        "UNKNOWN_TOPIC_OR_PARTITION",
        code=1,
    )
    assert_one_line_error(
        transactions(
            brook_broker,
            "describe-producers",
            "--topic",
            topic_name,
            "--partition",
            "0",
            "--broker-id",
            "77",
        ),
        "on broker 77",
        "broker 77 is not in the cluster",
        code=1,
    )


def test_unreachable_broker():
    from brook.broker.testing import free_port

    ran = brook("transactions", "--bootstrap-server", f"127.0.0.1:{free_port()}", "list")
    assert_one_line_error(ran, "cannot connect to the broker", code=1)


def test_a_command_config_the_tool_cannot_log_in_with_is_refused(tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    ran = brook(
        "transactions",
        "--bootstrap-server",
        "127.0.0.1:1",
        "--command-config",
        str(config),
        "list",
    )
    assert_one_line_error(ran, "sasl.mechanism=GSSAPI", code=2)
