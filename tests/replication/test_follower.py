"""The replication protocol between real brokers: a follower fetches what its leader
has, the high watermark follows the ISR, acks=all waits for it, and the ISR shrinks
and grows as followers fall behind and catch up."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer

from .harness import ScriptedController


def _produce(bootstrap: str, topic: str, values: list[bytes], acks: str = "all", **extra) -> list:
    """Produce and return each message's delivery error (None when acknowledged)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, **extra})
    outcomes: list = []
    for value in values:
        producer.produce(
            topic, value=value, partition=0, on_delivery=lambda err, _: outcomes.append(err)
        )
    producer.flush(30)
    return outcomes


def test_a_follower_copies_its_leader_and_the_high_watermark_follows(cluster: ScriptedController):
    leader, follower = cluster.start(0), cluster.start(1)
    cluster.create_topic("orders", [0, 1])
    assert _produce(leader.bootstrap, "orders", [b"a", b"b", b"c"]) == [None, None, None]
    # acks=all answered: both logs have the records, and the high watermark says so.
    state = cluster.partition_state(0, "orders")
    assert state["high_watermark"] == state["log_end_offset"] == 3
    cluster.wait_for(
        lambda: cluster.partition_state(1, "orders")["high_watermark"] == 3,
        "the follower's high watermark",
    )
    copied = cluster.partition_state(1, "orders")
    assert copied["log_end_offset"] == 3
    assert copied["epochs"] == state["epochs"] == [(0, 0)]
    # The follower's segment holds the same bytes as the leader's.
    leader_bytes = (leader.data_dir / "orders-0" / "00000000000000000000.log").read_bytes()
    follower_bytes = (follower.data_dir / "orders-0" / "00000000000000000000.log").read_bytes()
    assert follower_bytes == leader_bytes


def test_acks_all_waits_for_the_isr_and_the_isr_shrinks_without_the_follower(
    cluster: ScriptedController,
):
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("payments", [0, 1], configs={"min.insync.replicas": "2"})
    assert _produce(leader.bootstrap, "payments", [b"one"]) == [None]
    cluster.stop(1)
    # The follower is gone: its lag grows past replica.lag.time.max.ms and the leader
    # writes the ISR without it.
    cluster.wait_for(lambda: cluster.partition_state(0, "payments")["isr"] == [0], "ISR shrink")
    assert cluster.registration("payments").isr == (0,)
    # Now acks=all is refused before the write, as Kafka does.
    errors = _produce(leader.bootstrap, "payments", [b"two"], **{"retries": 0})
    assert len(errors) == 1 and isinstance(errors[0], object) and errors[0] is not None
    assert errors[0].name() == "NOT_ENOUGH_REPLICAS"
    assert cluster.partition_state(0, "payments")["log_end_offset"] == 1
    # acks=1 still writes.
    assert _produce(leader.bootstrap, "payments", [b"three"], acks="1") == [None]
    # The follower comes back, catches up and joins the ISR again.
    cluster.start(1)
    cluster.wait_for(lambda: cluster.partition_state(0, "payments")["isr"] == [0, 1], "ISR expand")
    assert cluster.partition_state(1, "payments")["log_end_offset"] == 2
    assert _produce(leader.bootstrap, "payments", [b"four"]) == [None]
    assert cluster.partition_state(0, "payments")["high_watermark"] == 3


def test_a_new_leader_truncates_the_old_leaders_divergent_tail(cluster: ScriptedController):
    first = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("events", [0, 1])
    assert _produce(first.bootstrap, "events", [b"a", b"b"]) == [None, None]
    cluster.wait_for(lambda: cluster.partition_state(1, "events")["high_watermark"] == 2, "copy")
    # Broker 1 is cut off; broker 0 takes two acks=1 writes only it has.
    cluster.stop(1)
    assert _produce(first.bootstrap, "events", [b"x", b"y"], acks="1") == [None, None]
    assert cluster.partition_state(0, "events")["log_end_offset"] == 4
    # Broker 0 goes too; broker 1 comes back and is elected (unclean, as the test
    # controller decides), and takes new writes in epoch 1.
    cluster.stop(0)
    second = cluster.start(1)
    cluster.elect("events", 0, leader=1, isr=[1])
    assert _produce(second.bootstrap, "events", [b"c"], acks="1") == [None]
    assert cluster.partition_state(1, "events")["epochs"] == [(0, 0), (1, 2)]
    # Broker 0 returns as a follower: its x and y diverge from epoch 1 and go.
    cluster.start(0)
    cluster.wait_for(
        lambda: (
            cluster.partition_state(0, "events")["log_end_offset"] == 3
            and cluster.partition_state(0, "events")["epochs"] == [(0, 0), (1, 2)]
        ),
        "truncation and catch-up",
    )
    leader_bytes = (second.data_dir / "events-0" / "00000000000000000000.log").read_bytes()
    follower_bytes = (
        cluster.brokers[0].data_dir / "events-0" / "00000000000000000000.log"
    ).read_bytes()
    assert follower_bytes == leader_bytes


def test_partitions_still_to_truncate_do_not_hold_back_the_others(cluster: ScriptedController):
    """Leaders change for some partitions while a follower truncates others (a broker's
    thousands handed over a slice at a time): each round still fetches the partitions it
    follows already, as Kafka's fetcher threads truncate and then fetch every round. Here
    each OffsetForLeaderEpoch takes 300 ms at the leader, and a new leader epoch arrives
    during each."""
    cluster.overrides["admin.fault.injection.enable"] = True
    leader = cluster.start(0)
    cluster.start(1)
    arrivals = 6
    names = ["steady"] + [f"moving-{index}" for index in range(arrivals)]
    for name in names:
        cluster.create_topic(name, [0, 1])
        assert _produce(leader.bootstrap, name, [b"a"]) == [None]
    fault = leader.call(
        lambda: leader.broker.faults.add({"api": "OffsetForLeaderEpoch", "delay_ms": 300})
    )
    start = cluster.fetch_rounds(1)
    for index in range(arrivals):
        # A new leader epoch: the follower truncates the partition again, by asking.
        cluster.elect(f"moving-{index}", 0, leader=0)
        cluster.wait_for(lambda i=index: leader.call(lambda: fault.fired) > i, "its truncation")
    assert cluster.fetch_rounds(1) - start >= arrivals - 2


def test_partitions_a_leader_refuses_together_make_one_log_line(
    cluster: ScriptedController, caplog: pytest.LogCaptureFixture
):
    """A leader that no longer leads thousands of partitions refuses them all in one
    response: the follower holds each back and says so in one line, naming a few and
    counting the rest, not a line a partition."""
    cluster.start(0)
    cluster.start(1)
    partitions = 30
    cluster.create_topic("moved", [0, 1], partitions=partitions)
    cluster.wait_for(
        lambda: (
            cluster.fetch_rounds(1) > 0 and cluster.partition_state(0, "moved")["isr"] == [0, 1]
        ),
        "the follower fetching",
    )
    caplog.set_level(logging.INFO, logger="brook.replication.fetcher")
    # Broker 0 alone learns that broker 1 leads them now: broker 1 still fetches them
    # from broker 0, which refuses every one.
    cluster.elect_all("moved", leader=1, only_on=[0])
    cluster.wait_for(
        lambda: any("answered" in r.getMessage() for r in caplog.records), "the refusal"
    )
    refusals = [r.getMessage() for r in caplog.records if "answered" in r.getMessage()]
    assert all("and 20 more" in line for line in refusals), refusals
    assert len(refusals) < partitions
