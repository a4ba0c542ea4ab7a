"""Consumer groups with confluent-kafka (librdkafka): real consumers sharing partitions,
rebalancing, committing, and the AdminClient's view of the groups.

Session timeouts are short (the broker's group.min.session.timeout.ms is lowered for
these tests) so that a vanished member is noticed in about a second.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from .clients import create_topic, produce
from .groups import (
    MemberProcess,
    broker_view,
    produce_spread,
    split_evenly,
    stored_generation,
    wait_for,
)

pytestmark = pytest.mark.brook_config(group_min_session_timeout_ms=500)

SESSION_MS = 1500


def settings(bootstrap: str, group: str, client_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 100,
        "fetch.wait.max.ms": 50,
        **extra,
    }


class Members:
    """The consumers of one test: made subscribed, polled together, closed at the end."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.open: list[Consumer] = []
        self.received: dict[int, list[Any]] = {}

    def join(self, group: str, client_id: str, topics: list[str], **extra: Any) -> Consumer:
        consumer = Consumer(settings(self.bootstrap, group, client_id, **extra))
        consumer.subscribe(topics)
        self.open.append(consumer)
        self.received[id(consumer)] = []
        return consumer

    def subscribe_with(
        self,
        group: str,
        client_id: str,
        topics: list[str],
        on_assign: Callable[..., None],
        on_revoke: Callable[..., None],
        **extra: Any,
    ) -> Consumer:
        consumer = Consumer(settings(self.bootstrap, group, client_id, **extra))
        consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
        self.open.append(consumer)
        self.received[id(consumer)] = []
        return consumer

    def poll(self, commit: bool = False) -> None:
        """Poll each consumer once: rebalance callbacks and messages arrive here. With
        `commit`, each message is committed once received (processed)."""
        for consumer in self.open:
            message = consumer.poll(0.05)
            if message is None:
                continue
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(message.error())
                continue
            self.received[id(consumer)].append(message)
            if commit:
                consumer.commit(message=message, asynchronous=False)

    def close(self, consumer: Consumer) -> None:
        consumer.close()
        self.open.remove(consumer)

    def close_all(self) -> None:
        for consumer in list(self.open):
            self.close(consumer)


@pytest.fixture
def members(brook_broker: Any) -> Iterator[Members]:
    group = Members(brook_broker.bootstrap)
    try:
        yield group
    finally:
        group.close_all()


def owned(consumer: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def test_three_consumers_split_six_partitions_and_take_over_from_one_that_leaves(
    brook_broker, members, topic_name
):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    consumers = [members.join("split", f"member-{i}", [topic_name]) for i in range(3)]
    wait_for(
        lambda: split_evenly([owned(c) for c in consumers], 6),
        tick=members.poll,
        what="three consumers to share six partitions",
    )
    assert [len(owned(c)) for c in consumers] == [2, 2, 2]
    # The broker holds the same assignment as the consumers apply.
    view = broker_view(brook_broker.port, "split")
    assert view.state == "Stable"
    assert view.members == {f"member-{i}": owned(c) for i, c in enumerate(consumers)}

    members.close(consumers[0])  # LeaveGroup: the others rebalance at once
    started = time.monotonic()
    wait_for(
        lambda: split_evenly([owned(c) for c in consumers[1:]], 6),
        tick=members.poll,
        what="the two remaining consumers to take over",
    )
    # Far sooner than the session timeout: the leave was heard, not timed out.
    assert time.monotonic() - started < SESSION_MS / 1000
    view = wait_for(lambda: (v := broker_view(brook_broker.port, "split")).state == "Stable" and v)
    assert set(view.members) == {"member-1", "member-2"}


def test_killed_consumer_partitions_move_after_session_timeout(brook_broker, members, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    config = settings(brook_broker.bootstrap, "killed", "doomed")
    with MemberProcess("confluent", config, [topic_name]) as doomed:
        consumers = [members.join("killed", f"survivor-{i}", [topic_name]) for i in range(2)]
        wait_for(
            lambda: split_evenly([owned(c) for c in consumers] + [doomed.assignment], 6),
            timeout=30,
            tick=members.poll,
            what="two consumers and a process to share six partitions",
        )
        assert "doomed" in broker_view(brook_broker.port, "killed").members
        doomed.kill()
        killed_at = time.monotonic()
        wait_for(
            lambda: split_evenly([owned(c) for c in consumers], 6),
            tick=members.poll,
            what="the survivors to take the killed member's partitions",
        )
        waited = time.monotonic() - killed_at
    # No LeaveGroup came: only the session timeout could hand the partitions on.
    assert waited > SESSION_MS / 1000 * 0.6, f"partitions moved after only {waited:.2f} s"
    assert set(broker_view(brook_broker.port, "killed").members) == {"survivor-0", "survivor-1"}


def test_every_record_consumed_once_while_members_come_and_go(brook_broker, members, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = produce_spread(bootstrap, topic_name, 6, 50)
    first = members.join("once", "first", [topic_name])
    second = members.join("once", "second", [topic_name])
    seen: list[bytes] = []
    third: Consumer | None = None

    def process_and_commit() -> None:
        nonlocal third
        for consumer in list(members.open):
            message = consumer.poll(0.02)
            if message is None or message.error():
                continue
            seen.append(message.value())
            # Commit after processing: what was committed was processed, and nothing
            # processed is left uncommitted when the partition moves.
            consumer.commit(message=message, asynchronous=False)
        if third is None and len(seen) >= 100:
            third = members.join("once", "third", [topic_name])
        if first in members.open and len(seen) >= 200:
            members.close(first)

    wait_for(lambda: len(seen) >= len(expected), timeout=40, tick=process_and_commit)
    # A little longer: a duplicate delivered after a rebalance would show up now.
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        process_and_commit()
    assert sorted(seen) == sorted(expected)
    assert not [value for value, n in Counter(seen).items() if n > 1]
    committed = second.committed([TopicPartition(topic_name, p) for p in range(6)], timeout=10)
    assert [tp.offset for tp in committed] == [50] * 6


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group)
    result = admin.list_consumer_group_offsets([request])[group].result(15)
    return {
        (tp.topic, tp.partition): (tp.offset, tp.metadata)
        for tp in result.topic_partitions
        if tp.offset >= 0
    }


def consume_as_group(
    bootstrap: str, group: str, topic: str, count: int, commit: bool = True
) -> list[Any]:
    """Join `group`, read `count` records (committing each), leave."""
    consumer = Consumer(settings(bootstrap, group, f"{group}-reader"))
    consumer.subscribe([topic])
    got: list[Any] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < count:
            assert time.monotonic() < deadline, f"read {len(got)} of {count} records"
            message = consumer.poll(0.1)
            if message is None or message.error():
                continue
            got.append(message)
            if commit:
                consumer.commit(message=message, asynchronous=False)
        # Anything beyond `count` would be a record read again.
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            message = consumer.poll(0.1)
            assert message is None or message.error(), f"unexpected {message.value()!r}"
    finally:
        consumer.close()
    return got


def test_committed_offsets_survive_restart_and_sigkill(brokers, topic_name):
    overrides = {"group.min.session.timeout.ms": 500}
    broker = brokers.start(overrides)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    for partition in range(2):
        records = [(None, b"%d-%d" % (partition, i)) for i in range(10)]
        produce(broker.bootstrap, topic_name, records, partition=partition)
    consumer = Consumer(settings(broker.bootstrap, "durable", "durable-first"))
    consumer.subscribe([topic_name])
    wait_for(lambda: len(owned(consumer)) == 2, tick=lambda: consumer.poll(0.1))
    consumer.commit(
        offsets=[
            TopicPartition(topic_name, 0, 4, metadata="after four"),
            TopicPartition(topic_name, 1, 7, metadata="after seven"),
        ],
        asynchronous=False,
    )
    consumer.close()
    before = {(topic_name, 0): (4, "after four"), (topic_name, 1): (7, "after seven")}
    assert committed_offsets(broker.bootstrap, "durable") == before

    broker.stop()
    broker = brokers.restart(broker, overrides)
    assert committed_offsets(broker.bootstrap, "durable") == before
    # A member of the group resumes where the commits say: 6 + 3 records, no more.
    resumed = consume_as_group(broker.bootstrap, "durable", topic_name, 9)
    assert sorted(m.value() for m in resumed) == sorted(
        [b"0-%d" % i for i in range(4, 10)] + [b"1-%d" % i for i in range(7, 10)]
    )

    broker.kill()  # no clean shutdown: the commits are only in __consumer_offsets' log
    broker = brokers.restart(broker, overrides)
    assert {k: v[0] for k, v in committed_offsets(broker.bootstrap, "durable").items()} == {
        (topic_name, 0): 10,
        (topic_name, 1): 10,
    }
    produce(broker.bootstrap, topic_name, [(None, b"after-kill")], partition=1)
    assert [m.value() for m in consume_as_group(broker.bootstrap, "durable", topic_name, 1)] == [
        b"after-kill"
    ]


def test_cooperative_sticky_rebalances_incrementally(brook_broker, members, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    events: dict[str, list[tuple[str, set[int]]]] = {"a": [], "b": [], "c": []}

    def listen(name: str) -> dict[str, Callable[..., None]]:
        def on_assign(_: Consumer, partitions: list[TopicPartition]) -> None:
            events[name].append(("assign", {p.partition for p in partitions}))

        def on_revoke(_: Consumer, partitions: list[TopicPartition]) -> None:
            events[name].append(("revoke", {p.partition for p in partitions}))

        return {"on_assign": on_assign, "on_revoke": on_revoke}

    def join(name: str) -> Consumer:
        return members.subscribe_with(
            "cooperative",
            name,
            [topic_name],
            **listen(name),
            **{"partition.assignment.strategy": "cooperative-sticky"},
        )

    def partitions(consumer: Consumer) -> set[int]:
        return {p for _, p in owned(consumer)}

    def revoked(name: str, since: int) -> set[int]:
        return set().union(*[ps for kind, ps in events[name][since:] if kind == "revoke"])

    a = join("a")
    wait_for(lambda: len(partitions(a)) == 6, tick=members.poll, what="a to own all six")
    assert events["a"] == [("assign", set(range(6)))]
    before = partitions(a)

    mark = len(events["a"])
    b = join("b")
    wait_for(
        lambda: split_evenly([partitions(a), partitions(b)], 6),
        tick=members.poll,
        what="b to take half",
    )
    # Incremental: a gave up only what b took, and kept the rest throughout.
    assert revoked("a", mark) == partitions(b)
    assert partitions(a) <= before
    assert all(ps != before for kind, ps in events["a"][mark:] if kind == "revoke")

    marks = {name: len(events[name]) for name in events}
    kept = {"a": partitions(a), "b": partitions(b)}
    c = join("c")
    wait_for(
        lambda: split_evenly([partitions(x) for x in (a, b, c)], 6),
        tick=members.poll,
        what="c to join",
    )
    for name, consumer in (("a", a), ("b", b)):
        assert revoked(name, marks[name]) == kept[name] - partitions(consumer)
        assert len(revoked(name, marks[name])) == 1
    assert partitions(c) == revoked("a", marks["a"]) | revoked("b", marks["b"])

    # b leaves: a and c are only given b's partitions; they revoke nothing.
    marks = {name: len(events[name]) for name in events}
    gone = partitions(b)
    kept = {"a": partitions(a), "c": partitions(c)}
    members.close(b)
    wait_for(lambda: split_evenly([partitions(a), partitions(c)], 6), tick=members.poll)
    for name, consumer in (("a", a), ("c", c)):
        assert revoked(name, marks[name]) == set()
        assert kept[name] <= partitions(consumer)
    assert (partitions(a) | partitions(c)) - kept["a"] - kept["c"] == gone


def test_static_member_restarts_without_rebalance(brook_broker, members, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    events: dict[str, list[str]] = {"a": [], "b": []}

    def join(name: str) -> Consumer:
        return members.subscribe_with(
            "static",
            name,
            [topic_name],
            on_assign=lambda _, ps: events[name].append("assign"),
            on_revoke=lambda _, ps: events[name].append("revoke"),
            # Long enough for a restart: the member must not be timed out meanwhile.
            **{"group.instance.id": f"instance-{name}", "session.timeout.ms": 10_000},
        )

    a, b = join("a"), join("b")
    wait_for(lambda: split_evenly([owned(a), owned(b)], 6), tick=members.poll)
    a_partitions, b_partitions = owned(a), owned(b)
    generation = brook_broker.call(
        lambda: brook_broker.broker.groups.groups["static"].generation_id
    )
    before = broker_view(brook_broker.port, "static")
    events["b"].clear()

    members.close(a)  # a static member sends no LeaveGroup (KIP-345)
    view = broker_view(brook_broker.port, "static")
    assert view.state == "Stable"
    assert set(view.members) == {"a", "b"}
    restarted = join("a")
    wait_for(lambda: owned(restarted) == a_partitions, tick=members.poll, what="a back")
    # Give a rebalance, had one started, time to reach b.
    end = time.monotonic() + 1
    while time.monotonic() < end:
        members.poll()
    assert events["b"] == []
    assert owned(b) == b_partitions
    after = broker_view(brook_broker.port, "static")
    assert after.member_ids["a"] != before.member_ids["a"]  # a new incarnation...
    assert after.member_ids["b"] == before.member_ids["b"]
    assert after.members == before.members  # ...with the same assignment
    assert after.instance_ids == {"a": "instance-a", "b": "instance-b"}
    assert (
        brook_broker.call(lambda: brook_broker.broker.groups.groups["static"].generation_id)
        == generation
    )


def test_two_groups_read_the_same_topic_independently(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = produce_spread(bootstrap, topic_name, 6, 10)
    first = consume_as_group(bootstrap, "reader-one", topic_name, 60)
    assert sorted(m.value() for m in first) == sorted(expected)
    # The other group has committed nothing, and reads everything too.
    assert committed_offsets(bootstrap, "reader-two") == {}
    second = consume_as_group(bootstrap, "reader-two", topic_name, 60)
    assert sorted(m.value() for m in second) == sorted(expected)
    produce(bootstrap, topic_name, [(None, b"late")], partition=3)
    assert [m.value() for m in consume_as_group(bootstrap, "reader-one", topic_name, 1)] == [
        b"late"
    ]
    assert {v[0] for v in committed_offsets(bootstrap, "reader-one").values()} == {10, 11}
    assert {v[0] for v in committed_offsets(bootstrap, "reader-two").values()} == {10}


def test_regex_subscription_picks_up_a_new_topic(brook_broker, members, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-a", partitions=2)
    create_topic(bootstrap, f"other-{topic_name}")
    produce(bootstrap, f"{topic_name}-a", [(None, b"a0")], partition=0)
    consumer = members.join(
        "regex",
        "pattern",
        [f"^{topic_name}-.*"],
        **{"topic.metadata.refresh.interval.ms": 200},
    )
    received = members.received[id(consumer)]

    def poll() -> None:
        # Commits keep a record from coming again when the new topic rebalances the group.
        members.poll(commit=True)

    wait_for(lambda: received, tick=poll, what="the first topic's record")
    create_topic(bootstrap, f"{topic_name}-b", partitions=2)
    produce(bootstrap, f"{topic_name}-b", [(None, b"b1")], partition=1)
    produce(bootstrap, f"other-{topic_name}", [(None, b"not matched")])
    wait_for(lambda: len(received) >= 2, tick=poll, what="the new topic's record")
    assert [(m.topic(), m.value()) for m in received] == [
        (f"{topic_name}-a", b"a0"),
        (f"{topic_name}-b", b"b1"),
    ]
    assert owned(consumer) == {(f"{topic_name}-{t}", p) for t in "ab" for p in range(2)}
    assert broker_view(brook_broker.port, "regex").members["pattern"] == owned(consumer)


def test_admin_list_describe_offsets_lag_and_delete(brook_broker, members, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    produce_spread(bootstrap, topic_name, 6, 10)
    consumers = [members.join("admin", f"admin-{i}", [topic_name]) for i in range(2)]
    wait_for(lambda: split_evenly([owned(c) for c in consumers], 6), tick=members.poll)
    consumers[0].commit(
        offsets=[TopicPartition(topic_name, p, p + 1) for p in range(6)], asynchronous=False
    )
    admin = AdminClient({"bootstrap.servers": bootstrap})

    listed = admin.list_consumer_groups().result(15)
    assert {(g.group_id, g.state) for g in listed.valid} == {("admin", ConsumerGroupState.STABLE)}
    assert not listed.errors
    stable = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(15)
    assert [g.group_id for g in stable.valid] == ["admin"]
    assert admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(15).valid == []

    described = admin.describe_consumer_groups(["admin"])["admin"].result(15)
    assert described.state == ConsumerGroupState.STABLE
    assert described.partition_assignor == "range"
    assert not described.is_simple_consumer_group
    assignments = {
        m.client_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
        for m in described.members
    }
    assert assignments == {f"admin-{i}": owned(c) for i, c in enumerate(consumers)}
    assert {m.member_id for m in described.members} == {c.memberid() for c in consumers}

    offsets = committed_offsets(bootstrap, "admin")
    assert {key: offset for key, (offset, _) in offsets.items()} == {
        (topic_name, p): p + 1 for p in range(6)
    }
    latest = admin.list_offsets(
        {TopicPartition(topic_name, p): OffsetSpec.latest() for p in range(6)}
    )
    ends = {(tp.topic, tp.partition): f.result(15).offset for tp, f in latest.items()}
    lag = {key: ends[key] - offsets[key][0] for key in ends}
    assert lag == {(topic_name, p): 10 - (p + 1) for p in range(6)}

    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups(["admin"])["admin"].result(15)
    assert refused.value.args[0].code() == KafkaError.NON_EMPTY_GROUP

    members.close_all()
    empty = wait_for(
        lambda: admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result(15).valid
    )
    assert [g.group_id for g in empty] == ["admin"]
    admin.delete_consumer_groups(["admin"])["admin"].result(15)
    assert admin.list_consumer_groups().result(15).valid == []
    assert committed_offsets(bootstrap, "admin") == {}
    with pytest.raises(KafkaException) as gone:
        admin.delete_consumer_groups(["admin"])["admin"].result(15)
    assert gone.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


def test_live_group_carries_on_across_a_broker_sigkill(brokers, topic_name):
    """Group metadata is in __consumer_offsets too: after a SIGKILL and restart the
    coordinator knows the members and their generation, so they carry on (commit,
    consume) without rejoining."""
    overrides = {"group.min.session.timeout.ms": 500}
    broker = brokers.start(overrides)
    create_topic(broker.bootstrap, topic_name, partitions=4)
    consumers = [
        Consumer(settings(broker.bootstrap, "live", f"live-{i}", **{"session.timeout.ms": 6000}))
        for i in range(2)
    ]
    try:
        for consumer in consumers:
            consumer.subscribe([topic_name])

        def poll_all() -> None:
            for consumer in consumers:
                consumer.poll(0.05)

        wait_for(lambda: split_evenly([owned(c) for c in consumers], 4), tick=poll_all)
        before = broker_view(broker.port, "live")
        assignments = [owned(c) for c in consumers]
        generation = stored_generation(broker.data_dir, "live")

        broker.kill()
        broker = brokers.restart(broker, overrides)
        assert broker_view(broker.port, "live") == before  # loaded: same members, Stable
        for p in range(4):
            produce(broker.bootstrap, topic_name, [(None, b"p%d" % p)], partition=p)
        got: list[Any] = []

        def consume_and_commit() -> None:
            for consumer in consumers:
                message = consumer.poll(0.05)
                if message is not None and not message.error():
                    got.append(message.value())
                    consumer.commit(message=message, asynchronous=False)

        wait_for(lambda: len(got) >= 4, tick=consume_and_commit, what="records after the restart")
        assert sorted(got) == [b"p0", b"p1", b"p2", b"p3"]
        # The same members, the same generation's assignment: nobody had to rejoin.
        assert [owned(c) for c in consumers] == assignments
        assert broker_view(broker.port, "live").member_ids == before.member_ids
        assert stored_generation(broker.data_dir, "live") == generation > 0
        assert {k: v[0] for k, v in committed_offsets(broker.bootstrap, "live").items()} == {
            (topic_name, p): 1 for p in range(4)
        }
    finally:
        for consumer in consumers:
            consumer.close()
