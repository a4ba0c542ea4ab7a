"""Kafka's transaction state machine on the fake clock: sessions and epochs, the two-phase
end with markers, fencing, timeouts, restarts, transactional offsets, expiry."""

from __future__ import annotations

import pytest

from brook.broker.coordinator.partition_writer import TopicPartition
from brook.broker.coordinator.records import TransactionalProducer
from brook.broker.transactions.records import record_of
from brook.broker.transactions.shard import ProducerIdAndEpoch
from brook.coordinator_state.offsets import CommittedOffset
from brook.coordinator_state.transaction_metadata import TV_2, TransactionMetadata, TransactionState
from brook.protocol import coordinator_records as cr
from brook.protocol.errors import ErrorCode, InvalidTransactionTimeoutError, KafkaStorageError

from .harness import TIMEOUT_MS, Transactions, error_of, settle

ORDERS = ("orders", 0)
AUDIT = ("audit", 1)


@pytest.mark.asyncio
async def test_a_session_keeps_its_producer_id_and_bumps_the_epoch() -> None:
    txns = await Transactions().start()
    error, first = await txns.init("tx")
    assert error is ErrorCode.none and first.producer_epoch == 0
    error, second = await txns.init("tx")
    assert (error, second) == (ErrorCode.none, ProducerIdAndEpoch(first.producer_id, 1))
    error, other = await txns.init("other")
    assert other.producer_id != first.producer_id
    assert txns.stored_states("tx") == ["EMPTY", "EMPTY"]
    with pytest.raises(InvalidTransactionTimeoutError):
        txns.coordinator.init_producer_id("tx", 900_001, None)


@pytest.mark.asyncio
async def test_commit_writes_prepare_markers_then_complete() -> None:
    txns = await Transactions().start()
    _, producer = await txns.init("tx")
    assert await txns.add("tx", producer, ORDERS, AUDIT) is ErrorCode.none
    ongoing = txns.state("tx")
    assert ongoing.state is TransactionState.ONGOING
    assert ongoing.partitions == {ORDERS, AUDIT}
    assert ongoing.txn_start_timestamp == txns.time()
    assert await txns.end("tx", producer, commit=True) is ErrorCode.none
    marker = ("COMMIT", producer.producer_id, producer.producer_epoch)
    assert txns.markers(*ORDERS) == [marker] and txns.markers(*AUDIT) == [marker]
    assert txns.stored_states("tx") == ["EMPTY", "ONGOING", "PREPARE_COMMIT", "COMPLETE_COMMIT"]
    assert txns.state("tx").partitions == frozenset()
    # A retried EndTxn of the same outcome succeeds; the other outcome is refused.
    assert await txns.end("tx", producer, commit=True) is ErrorCode.none
    assert await txns.end("tx", producer, commit=False) is ErrorCode.invalid_txn_state
    # The next transaction starts from CompleteCommit.
    assert await txns.add("tx", producer, ORDERS) is ErrorCode.none
    assert await txns.end("tx", producer, commit=False) is ErrorCode.none
    assert txns.markers(*ORDERS)[-1] == ("ABORT", producer.producer_id, producer.producer_epoch)
    assert txns.state("tx").state is TransactionState.COMPLETE_ABORT


@pytest.mark.asyncio
async def test_bad_requests_get_kafkas_errors_and_change_nothing() -> None:
    txns = await Transactions().start()
    _, producer = await txns.init("tx")
    stranger = ProducerIdAndEpoch(producer.producer_id + 1, producer.producer_epoch)
    assert await txns.end("tx", producer, commit=True) is ErrorCode.invalid_txn_state
    assert await txns.add("tx", stranger, ORDERS) is ErrorCode.invalid_producer_id_mapping
    assert await txns.add("unknown", producer, ORDERS) is ErrorCode.invalid_producer_id_mapping
    await txns.init("tx")  # epoch 1: `producer` (epoch 0) is fenced now
    assert await txns.add("tx", producer, ORDERS) is ErrorCode.producer_fenced
    assert txns.stored_states("tx") == ["EMPTY", "EMPTY"]
    assert txns.state("tx").state is TransactionState.EMPTY


@pytest.mark.asyncio
async def test_a_new_producer_fences_and_aborts_the_open_transaction() -> None:
    txns = await Transactions().start()
    _, zombie = await txns.init("tx")
    await txns.add("tx", zombie, ORDERS)
    error, _ = await txns.init("tx")
    assert error is ErrorCode.concurrent_transactions  # the client retries
    fenced_epoch = zombie.producer_epoch + 1
    assert txns.markers(*ORDERS) == [("ABORT", zombie.producer_id, fenced_epoch)]
    assert txns.state("tx").state is TransactionState.COMPLETE_ABORT
    error, fresh = await txns.init("tx")
    assert error is ErrorCode.none and fresh.producer_epoch == fenced_epoch + 1
    assert await txns.add("tx", zombie, ORDERS) is ErrorCode.producer_fenced
    assert await txns.end("tx", zombie, commit=True) is ErrorCode.producer_fenced


@pytest.mark.asyncio
async def test_requests_while_a_transaction_completes_are_concurrent() -> None:
    txns = await Transactions().start()
    _, producer = await txns.init("tx")
    await txns.add("tx", producer, ORDERS)
    txns.writer.hold_commits = True  # the PrepareCommit is written but not committed
    ending = txns.coordinator.end_transaction("tx", producer, True)
    await settle()
    assert not ending.done()
    assert txns.state("tx").state is TransactionState.PREPARE_COMMIT
    assert await error_of(txns.coordinator.add_partitions("tx", producer, [AUDIT])) is (
        ErrorCode.concurrent_transactions
    )
    txns.writer.hold_commits = False
    txns.writer.commit_held()
    await ending
    await settle()
    assert txns.markers(*ORDERS) == [("COMMIT", producer.producer_id, producer.producer_epoch)]
    assert txns.state("tx").state is TransactionState.COMPLETE_COMMIT


@pytest.mark.asyncio
async def test_a_transaction_past_its_timeout_is_aborted_with_a_fence() -> None:
    txns = await Transactions().start()
    _, producer = await txns.init("tx")
    await txns.add("tx", producer, ORDERS)
    txns.time.sleep(TIMEOUT_MS - 1)
    await settle()
    assert txns.state("tx").state is TransactionState.ONGOING
    txns.time.sleep(10_001)  # the next abort check after the timeout
    await settle()
    assert txns.markers(*ORDERS) == [("ABORT", producer.producer_id, producer.producer_epoch + 1)]
    assert txns.state("tx").state is TransactionState.COMPLETE_ABORT
    assert await txns.end("tx", producer, commit=True) is ErrorCode.producer_fenced


@pytest.mark.asyncio
async def test_a_restart_completes_a_prepared_transaction() -> None:
    txns = await Transactions().start()
    _, producer = await txns.init("tx")
    await txns.add("tx", producer, ORDERS, AUDIT)
    ending = txns.coordinator.end_transaction("tx", producer, True)  # PrepareCommit written
    full = KafkaStorageError("No space left on device")
    txns.writer.fail_next_append(full)  # the first marker, and its partition's
    txns.writer.fail_next_append(full)  # ... second one: both wait for a retry
    await ending
    await settle()
    txns.coordinator.stop()  # the broker stops before any marker is written
    assert txns.markers(*ORDERS) == [] and txns.markers(*AUDIT) == []
    assert txns.stored_states("tx")[-1] == "PREPARE_COMMIT"

    restarted = await Transactions(txns.writer).start()
    await settle()
    marker = ("COMMIT", producer.producer_id, producer.producer_epoch)
    assert restarted.markers(*ORDERS) == [marker] and restarted.markers(*AUDIT) == [marker]
    assert restarted.state("tx").state is TransactionState.COMPLETE_COMMIT


@pytest.mark.asyncio
async def test_transactional_offsets_count_only_once_committed() -> None:
    txns = await Transactions().start()
    offsets_partition = txns.groups.runtime.partition_for("g")
    consumer_offsets = (cr.CONSUMER_OFFSETS_TOPIC, offsets_partition)
    for commit in (False, True):
        _, producer = await txns.init("tx")
        await txns.add("tx", producer, ORDERS, consumer_offsets)
        written = await txns.groups.commit_transactional_offsets(
            "g",
            TransactionalProducer(producer.producer_id, producer.producer_epoch),
            -1,
            "",
            None,
            {ORDERS: CommittedOffset(42 if commit else 7, -1, "", txns.time())},
        )
        assert written is ErrorCode.none
        assert txns.groups.fetch_offsets("g", [ORDERS])[1] == {ORDERS: None} or commit
        assert txns.groups.unstable_offsets("g", [ORDERS]) == {ORDERS}
        await txns.end("tx", producer, commit=commit)
        assert txns.groups.unstable_offsets("g", [ORDERS]) == set()
    _, found = txns.groups.fetch_offsets("g", [ORDERS])
    assert found[ORDERS].offset == 42  # the aborted 7 never counted
    markers = txns.markers(*consumer_offsets)
    assert [name for name, _, _ in markers] == ["ABORT", "COMMIT"]


@pytest.mark.asyncio
async def test_idle_transactional_ids_expire() -> None:
    txns = await Transactions(transactional_id_expiration_ms=3_600_000).start()
    await txns.init("idle")
    txns.time.sleep(3_600_000 * 2)
    await settle()
    assert txns.state("idle") is None
    assert txns.stored_states("idle")[-1] == "tombstone"


@pytest.mark.asyncio
async def test_transaction_version_2_hands_over_to_a_new_producer_id_when_the_epoch_runs_out():
    writer_side = await Transactions().start()
    exhausted = ProducerIdAndEpoch(7, 32766)
    # An id whose epoch is the last usable one, with a transaction open.
    partition = cr.transactional_id_partition("tx", 4)
    writer_side.writer.append(
        TopicPartition(cr.TRANSACTION_STATE_TOPIC, partition),
        [
            record_of(
                TransactionMetadata(
                    "tx",
                    exhausted.producer_id,
                    exhausted.producer_epoch,
                    TIMEOUT_MS,
                    TransactionState.ONGOING,
                    frozenset({ORDERS}),
                    txn_start_timestamp=0,
                    txn_last_update_timestamp=0,
                    client_transaction_version=TV_2,
                )
            )
        ],
        0,
    )
    txns = await Transactions(writer_side.writer).start()
    ending = txns.coordinator.end_transaction("tx", exhausted, True, TV_2)
    next_session = await ending
    await settle()
    # The markers carry the bumped epoch (32767); the next transaction a new id at 0.
    assert next_session == ProducerIdAndEpoch(1000, 0)
    assert txns.markers(*ORDERS) == [("COMMIT", 7, 32767)]
    state = txns.state("tx")
    assert (state.state, state.producer_id, state.producer_epoch) == (
        TransactionState.COMPLETE_COMMIT,
        1000,
        0,
    )
    assert state.previous_producer_id == 7
    # The client's retry with the old id and epoch gets the same answer.
    assert await txns.coordinator.end_transaction("tx", exhausted, True, TV_2) == next_session
    # A restart keeps the new id (the Complete record carries it).
    restarted = await Transactions(txns.writer).start()
    assert restarted.state("tx").producer_id == 1000
    assert restarted.state("tx").client_transaction_version == TV_2


@pytest.mark.asyncio
async def test_transaction_version_2_ends_each_transaction_with_an_epoch_bump() -> None:
    txns = await Transactions().start()
    _, producer = await txns.init("tx")
    await error_of(txns.coordinator.add_partitions("tx", producer, [ORDERS], TV_2))
    assert txns.state("tx").client_transaction_version == TV_2
    bumped = await txns.coordinator.end_transaction("tx", producer, False, TV_2)
    await settle()
    assert bumped == ProducerIdAndEpoch(producer.producer_id, producer.producer_epoch + 1)
    assert txns.markers(*ORDERS) == [("ABORT", producer.producer_id, bumped.producer_epoch)]
    assert txns.stored_states("tx")[-2:] == ["PREPARE_ABORT", "COMPLETE_ABORT"]
    # The old epoch can no longer open a transaction.
    assert (
        await error_of(txns.coordinator.add_partitions("tx", producer, [ORDERS], TV_2))
        is ErrorCode.producer_fenced
    )
