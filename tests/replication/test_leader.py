"""The leader's side of replication: how acks=all answers when followers are away, the
producer state and transactions a follower copies, and a follower whose fetch offset the
leader has deleted."""

from __future__ import annotations

import dataclasses
import datetime

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from brook.protocol.record_batch import Record, build_batch
from tests.integration.raw_client import RawClient, produce_request

from .harness import ScriptedController

REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20


def _raw_produce(port: int, topic: str, timeout_s: float, value: bytes = b"v") -> int:
    """An acks=all Produce with the given timeout; the partition's error code."""
    request = produce_request(topic, 0, build_batch([Record(0, 1_700_000_000_000, None, value)]))
    request = dataclasses.replace(request, timeout=datetime.timedelta(seconds=timeout_s))
    with RawClient(port) as client:
        response = client.request(request)
    return int(response.responses[0].partition_responses[0].error_code)


def test_acks_all_times_out_while_an_in_sync_follower_is_away(cluster: ScriptedController):
    cluster.overrides["replica.lag.time.max.ms"] = 60_000  # the follower stays in the ISR
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("slow", [0, 1])
    cluster.stop(1)
    assert _raw_produce(leader.port, "slow", timeout_s=0.5) == REQUEST_TIMED_OUT
    # Written, but not committed: the high watermark waits for the follower.
    state = cluster.partition_state(0, "slow")
    assert (state["log_end_offset"], state["high_watermark"], state["isr"]) == (1, 0, [0, 1])
    cluster.start(1)
    cluster.wait_for(lambda: cluster.partition_state(0, "slow")["high_watermark"] == 1, "commit")


def test_the_isr_shrinking_under_a_waiting_write_answers_after_append(
    cluster: ScriptedController,
):
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("strict", [0, 1], configs={"min.insync.replicas": "2"})
    cluster.stop(1)
    # The write waits for broker 1; the ISR drops it (replica.lag.time.max.ms 1.5 s)
    # before the request's 20 s pass: written, committed by the ISR of one, but below
    # min.insync.replicas, as Kafka answers.
    assert _raw_produce(leader.port, "strict", timeout_s=20) == NOT_ENOUGH_REPLICAS_AFTER_APPEND
    state = cluster.partition_state(0, "strict")
    assert (state["log_end_offset"], state["high_watermark"], state["isr"]) == (1, 1, [0])


def test_a_follower_copies_producer_state_and_open_transactions(cluster: ScriptedController):
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("ledger", [0, 1])
    # The transaction coordinator on broker 0 (the brokers would each make their own
    # __transaction_state without a controller to create it).
    cluster.create_topic("__transaction_state", [0, 1])
    idempotent = Producer(
        {"bootstrap.servers": leader.bootstrap, "enable.idempotence": True, "linger.ms": 0}
    )
    for value in (b"a", b"b", b"c"):
        idempotent.produce("ledger", value=value, partition=0)
        idempotent.flush(10)
    transactional = Producer(
        {"bootstrap.servers": leader.bootstrap, "transactional.id": "ledger-tx", "linger.ms": 0}
    )
    transactional.init_transactions(15)
    transactional.begin_transaction()
    transactional.produce("ledger", value=b"pending", partition=0)
    transactional.flush(10)

    def same_everywhere(key: str, value: int) -> bool:
        return all(cluster.partition_state(b, "ledger")[key] == value for b in (0, 1))

    # The open transaction holds the last stable offset at its first record, on both.
    cluster.wait_for(lambda: same_everywhere("high_watermark", 4), "the transaction's record")
    assert same_everywhere("last_stable_offset", 3)
    producers = [
        cluster.brokers[b].call(
            lambda b=b: sorted(
                (p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_first_offset)
                for p in cluster.brokers[b]
                .broker.replicas.partition("ledger", 0)
                .active_producers()
            )
        )
        for b in (0, 1)
    ]
    assert producers[0] == producers[1] and len(producers[0]) == 2
    transactional.commit_transaction(15)
    # The commit marker reaches the follower too: stable up to the marker.
    cluster.wait_for(lambda: same_everywhere("last_stable_offset", 5), "the commit marker")


def test_a_follower_starts_over_at_the_leaders_log_start(cluster: ScriptedController):
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("trimmed", [0, 1])
    producer = Producer({"bootstrap.servers": leader.bootstrap, "linger.ms": 0, "acks": "1"})
    for value in range(5):
        producer.produce("trimmed", value=b"%d" % value, partition=0)
    producer.flush(10)
    cluster.wait_for(lambda: cluster.partition_state(1, "trimmed")["log_end_offset"] == 5, "copy")
    cluster.stop(1)
    cluster.wait_for(lambda: cluster.partition_state(0, "trimmed")["isr"] == [0], "ISR shrink")
    for value in range(5, 10):
        producer.produce("trimmed", value=b"%d" % value, partition=0)
    producer.flush(10)
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    deleted = admin.delete_records([TopicPartition("trimmed", 0, 8)])
    assert deleted[TopicPartition("trimmed", 0, 8)].result(10).low_watermark == 8
    # Broker 1 asks for offset 5, which the leader no longer has: it starts over at 8.
    cluster.start(1)
    cluster.wait_for(
        lambda: cluster.partition_state(1, "trimmed")["log_end_offset"] == 10,
        "the follower's catch-up",
    )
    assert cluster.partition_state(1, "trimmed")["log_start_offset"] == 8
    cluster.wait_for(lambda: cluster.partition_state(0, "trimmed")["isr"] == [0, 1], "ISR expand")


def test_delete_records_answers_once_every_replica_starts_there(cluster: ScriptedController):
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("pruned", [0, 1])
    producer = Producer({"bootstrap.servers": leader.bootstrap, "linger.ms": 0})
    for value in range(6):
        producer.produce("pruned", value=b"%d" % value, partition=0)
        producer.flush(10)
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    deleted = admin.delete_records([TopicPartition("pruned", 0, 4)])
    assert deleted[TopicPartition("pruned", 0, 4)].result(20).low_watermark == 4
    # Answered only once the follower had moved its log start too (Kafka's
    # DelayedDeleteRecords), so it has by now.
    assert cluster.partition_state(1, "pruned")["log_start_offset"] == 4


def _checkpointed_epochs(path) -> list[tuple[int, int]]:
    """The entries of a leader-epoch-checkpoint file (version, count, then epoch offset)."""
    lines = path.read_text().splitlines()
    return [(int(epoch), int(offset)) for epoch, offset in (line.split() for line in lines[2:])]


def test_a_change_of_many_leaders_writes_every_epoch_checkpoint(cluster: ScriptedController):
    """A change that moves the leadership of many partitions at once writes each new
    leader's epoch entry to its file with the epoch's first record (their fsyncs then run
    together off the loop), and not before: a partition led and never written to costs
    no write (LeaderEpochFileCache.assign with flush=False)."""
    cluster.start(0)
    new_leader = cluster.start(1)
    partitions = 100
    cluster.create_topic("handed", [0, 1], partitions=partitions)
    cluster.elect_all("handed", leader=1)

    def checkpoint(index: int):
        return new_leader.data_dir / f"handed-{index}" / "leader-epoch-checkpoint"

    for index in range(partitions):
        assert cluster.partition_state(1, "handed", index)["epochs"][-1] == (1, 0)
        path = checkpoint(index)
        assert not path.exists() or (1, 0) not in _checkpointed_epochs(path)
    producer = Producer({"bootstrap.servers": new_leader.bootstrap, "acks": "1"})
    for index in range(partitions):
        producer.produce("handed", b"first of epoch 1", partition=index)
    assert producer.flush(30) == 0
    for index in range(partitions):
        epochs = cluster.partition_state(1, "handed", index)["epochs"]
        assert epochs[-1] == (1, 0)
        assert _checkpointed_epochs(checkpoint(index)) == epochs


def test_a_follower_in_controlled_shutdown_is_taken_into_no_isr(cluster: ScriptedController):
    """KIP-841: a follower whose registration says it is in controlled shutdown goes on
    fetching, caught up, once the controller has taken it out of the ISR, and the leader
    does not take it back in (it did, at its next fetch); registered again without the
    flag (restarted), it joins at once."""
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("leaving", [0, 1])
    producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "all"})
    producer.produce("leaving", b"in sync")
    assert producer.flush(20) == 0

    cluster.register(1, in_controlled_shutdown=True)
    cluster.remove_from_isr("leaving", 0, 1)
    producer = Producer({"bootstrap.servers": leader.bootstrap, "acks": "1"})
    producer.produce("leaving", b"after")
    assert producer.flush(20) == 0
    cluster.wait_for(
        lambda: cluster.partition_state(1, "leaving")["log_end_offset"] == 2, "the follower copies"
    )
    rounds = cluster.fetch_rounds(1)
    cluster.wait_for(lambda: cluster.fetch_rounds(1) >= rounds + 5, "five more fetches")
    assert cluster.partition_state(0, "leaving")["isr"] == [0]
    assert cluster.registration("leaving").isr == (0,)

    cluster.register(1)
    cluster.wait_for(lambda: cluster.registration("leaving").isr == (0, 1), "the ISR expands")
