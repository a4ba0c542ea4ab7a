"""Followers fetch in incremental fetch sessions (KIP-227): after the first, full fetch,
each fetch names only the partitions whose position changed, and the leader reads the
rest from its session; a session the leader lost is opened again by a full fetch."""

from __future__ import annotations

from confluent_kafka import Producer

from brook.broker.replica.fetch_sessions import FetchSession
from brook.broker.testing import BrokerThread

from .harness import ScriptedController

PARTITIONS = 8


def _produce(bootstrap: str, topic: str, partitions: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    errors: list = []
    for index in partitions:
        producer.produce(
            topic,
            value=b"v%d" % index,
            partition=index,
            on_delivery=lambda err, _: errors.append(err),
        )
    assert producer.flush(30) == 0
    assert errors == [None] * len(partitions)


def _follower_session(cluster: ScriptedController) -> FetchSession | None:
    """The leader's session of the follower's fetcher (the one whose partitions are the
    topic's), as the leader holds it."""

    def find() -> FetchSession | None:
        for session in cluster.brokers[0].broker.fetch_sessions.sessions.values():
            if {topic for topic, _ in session.partitions} == {"many"}:
                return session
        return None

    result: FetchSession | None = cluster.brokers[0].call(find)
    return result


def _copied(cluster: ScriptedController, offsets: dict[int, int]) -> bool:
    return all(
        cluster.partition_state(1, "many", index)["high_watermark"] == end
        for index, end in offsets.items()
    )


def test_a_follower_fetches_what_changed_in_a_session(cluster: ScriptedController):
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("many", [0, 1], partitions=PARTITIONS)
    _produce(leader.bootstrap, "many", list(range(PARTITIONS)))
    cluster.wait_for(lambda: _copied(cluster, dict.fromkeys(range(PARTITIONS), 1)), "copies")
    session = _follower_session(cluster)
    assert session is not None
    first_epoch = session.epoch
    # The session holds every partition the follower follows, at its log end.
    assert sorted(index for _, index in session.partitions) == list(range(PARTITIONS))
    assert {entry.fetch_offset for entry in session.partitions.values()} == {1}
    # Records for two partitions: the fetches that carry them and the new positions are
    # incremental ones of the same session (its epoch moves on, its id stays).
    _produce(leader.bootstrap, "many", [2, 5, 5])
    expected = dict.fromkeys(range(PARTITIONS), 1) | {2: 2, 5: 3}
    cluster.wait_for(lambda: _copied(cluster, expected), "the new records copied")
    cluster.wait_for(
        lambda: (
            cluster.brokers[0].call(
                lambda: {i: e.fetch_offset for (_, i), e in session.partitions.items()}
            )
            == expected
        ),
        "the session's positions",
    )
    assert _follower_session(cluster) is session
    assert session.epoch > first_epoch
    # The leader's high watermark followed the follower's new positions.
    for index, end in expected.items():
        assert cluster.partition_state(0, "many", index)["high_watermark"] == end


def test_a_session_the_leader_lost_is_opened_again(cluster: ScriptedController):
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("many", [0, 1], partitions=PARTITIONS)
    _produce(leader.bootstrap, "many", [0])
    cluster.wait_for(lambda: _copied(cluster, {0: 1}), "the first copy")
    cluster.wait_for(lambda: _follower_session(cluster) is not None, "a session")
    lost = _follower_session(cluster)
    assert lost is not None
    # The leader forgets every session (as when its cache evicts them, or it restarts):
    # the follower's next fetch is refused, and it fetches in full in a new session.
    cluster.brokers[0].call(lambda: cluster.brokers[0].broker.fetch_sessions.sessions.clear())
    cluster.wait_for(lambda: _follower_session(cluster) is not None, "a new session")
    renewed = _follower_session(cluster)
    assert renewed is not None and renewed.session_id != lost.session_id
    _produce(leader.bootstrap, "many", [0, 7])
    cluster.wait_for(lambda: _copied(cluster, {0: 2, 7: 1}), "copies after the new session")


def test_an_idle_follower_stays_in_the_isr(cluster: ScriptedController):
    """A follower whose partitions have nothing new is answered without reading them
    again, and the leader still counts it caught up at each fetch: it stays in the ISR
    however long nothing is written (replica.lag.time.max.ms is 1.5 s here)."""
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("many", [0, 1], partitions=PARTITIONS)
    _produce(leader.bootstrap, "many", list(range(PARTITIONS)))
    cluster.wait_for(lambda: _copied(cluster, dict.fromkeys(range(PARTITIONS), 1)), "copies")
    epochs = [cluster.registration("many", index).partition_epoch for index in range(PARTITIONS)]
    # Fetch rounds of nothing (each waits up to 200 ms) spanning twice the lag time.
    start = cluster.fetch_rounds(1)
    cluster.wait_for(lambda: cluster.fetch_rounds(1) >= start + 20, "idle fetch rounds")
    for index in range(PARTITIONS):
        assert cluster.partition_state(0, "many", index)["isr"] == [0, 1]
    # Not even for a moment out of it (a shrink and the next fetch's expansion would
    # each have written the partition's state).
    assert [
        cluster.registration("many", index).partition_epoch for index in range(PARTITIONS)
    ] == epochs
    # And what is written next is copied and committed.
    _produce(leader.bootstrap, "many", [3])
    cluster.wait_for(lambda: _copied(cluster, {3: 2}), "the next record copied")


def _quiet(cluster: ScriptedController, session: FetchSession) -> set[int]:
    return cluster.brokers[0].call(lambda: {index for _, index in session.quiet})


def _leader_reads(cluster: ScriptedController) -> list[int]:
    """How often the leader has read each partition of "many" for a fetch."""
    leader = cluster.brokers[0]
    return leader.call(
        lambda: [
            leader.broker.replicas.partition("many", index).stats.fetch_requests
            for index in range(PARTITIONS)
        ]
    )


def _all_quiet(cluster: ScriptedController) -> tuple[BrokerThread, FetchSession]:
    """A leader (broker 0) and a follower of "many", every partition written once, copied
    and then quiet in the follower's session. Only a partition's move may bring one back
    from then on: the pass that reads every partition again after QUIET_FULL_PASS_MS is
    put off."""
    leader = cluster.start(0)
    cluster.start(1)
    cluster.create_topic("many", [0, 1], partitions=PARTITIONS)
    _produce(leader.bootstrap, "many", list(range(PARTITIONS)))
    cluster.wait_for(lambda: _copied(cluster, dict.fromkeys(range(PARTITIONS), 1)), "copies")
    cluster.wait_for(lambda: _follower_session(cluster) is not None, "a session")
    session = _follower_session(cluster)
    assert session is not None
    cluster.wait_for(lambda: _quiet(cluster, session) == set(range(PARTITIONS)), "all quiet")
    cluster.brokers[0].call(lambda: setattr(session, "full_pass_due_ms", 1 << 62))
    return leader, session


def test_an_idle_followers_fetches_skip_its_quiet_partitions(cluster: ScriptedController):
    """Partitions a follower found caught up with nothing new twice are quiet in its
    session: its next fetches do not read them (an idle fetch of thousands of partitions
    reads none), until one moves; then it is read and copied at once."""
    leader, session = _all_quiet(cluster)
    reads = _leader_reads(cluster)
    start = cluster.fetch_rounds(1)
    cluster.wait_for(lambda: cluster.fetch_rounds(1) >= start + 5, "idle fetch rounds")
    assert _leader_reads(cluster) == reads
    # A write to a quiet partition wakes the follower's parked fetch: it is copied and
    # committed (acks=all in _produce waits for the follower).
    _produce(leader.bootstrap, "many", [3])
    cluster.wait_for(lambda: _copied(cluster, {3: 2}), "the new record copied")
    after = _leader_reads(cluster)
    assert after[3] > reads[3]
    assert [n for i, n in enumerate(after) if i != 3] == [n for i, n in enumerate(reads) if i != 3]
    # The partition that moved becomes quiet again once idle; the others stayed so.
    cluster.wait_for(lambda: _quiet(cluster, session) == set(range(PARTITIONS)), "quiet again")
    for index in range(PARTITIONS):
        assert cluster.partition_state(0, "many", index)["isr"] == [0, 1]


def test_a_quiet_partition_is_read_again_when_its_leadership_moves(cluster: ScriptedController):
    """A new leader epoch takes the partition out of every quiet set: the follower's
    fetches read it again and learn of the epoch."""
    leader, _ = _all_quiet(cluster)
    reads = _leader_reads(cluster)
    cluster.elect("many", 5, leader=0)  # the same leader, a new epoch
    epoch = cluster.partition_state(0, "many", 5)["leader_epoch"]
    # Read again though nothing was written to it.
    cluster.wait_for(lambda: _leader_reads(cluster)[5] > reads[5], "partition 5 read again")
    _produce(leader.bootstrap, "many", [5])
    cluster.wait_for(lambda: _copied(cluster, {5: 2}), "the record of the new epoch copied")
    assert cluster.partition_state(1, "many", 5)["leader_epoch"] == epoch
