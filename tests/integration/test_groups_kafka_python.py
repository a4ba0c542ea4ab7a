"""Consumer groups with kafka-python: consumers sharing partitions, rebalancing and
committing (JoinGroup with MEMBER_ID_REQUIRED, as the Java client does), and
KafkaAdminClient's view of the groups.

Session timeouts are short (the broker's group.min.session.timeout.ms is lowered for
these tests) so that a vanished member is noticed in about a second.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from .clients import create_topic, produce
from .groups import (
    MemberProcess,
    broker_view,
    produce_spread,
    python_client_settings,
    split_evenly,
    wait_for,
)

pytestmark = pytest.mark.brook_config(group_min_session_timeout_ms=500)

SESSION_MS = 1500
POLL_MS = 1000


def settings(bootstrap: str, group: str, client_id: str, **extra: Any) -> dict[str, Any]:
    return python_client_settings(bootstrap, group, client_id, SESSION_MS, **extra)


def owned(consumer: KafkaConsumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


class Member(threading.Thread):
    """A KafkaConsumer polled in a thread of its own, as an application runs it.

    kafka-python (3.0.12) joins inside poll(), and mishandles a join that completes
    after the poll that started it timed out: it joins again, or, for a leader that
    rejoined because the topics changed, never applies the assignment nor heartbeats
    again. Polling several consumers in turn from one thread makes that constant; one
    thread per consumer, with polls far longer than a join takes, makes it rare.
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        client_id: str,
        topics: list[str] | None = None,
        pattern: str | None = None,
        listener: ConsumerRebalanceListener | None = None,
        commit: bool = False,
        **extra: Any,
    ) -> None:
        super().__init__(name=f"member-{client_id}", daemon=True)
        self.consumer = KafkaConsumer(**settings(bootstrap, group, client_id, **extra))
        if pattern is not None:
            self.consumer.subscribe(pattern=pattern, listener=listener)
        else:
            self.consumer.subscribe(topics=topics, listener=listener)
        self.commit = commit
        self.received: list[Any] = []
        self.assignment: set[tuple[str, int]] = set()
        self.error: BaseException | None = None
        self._calls: queue.Queue[tuple[Callable[[KafkaConsumer], Any], Future[Any]]] = queue.Queue()
        self._stop_requested = threading.Event()
        self.start()

    def call(self, function: Callable[[KafkaConsumer], Any]) -> Any:
        """Run `function(consumer)` on the member's own thread (KafkaConsumer is not
        thread-safe) and return its result."""
        done: Future[Any] = Future()
        self._calls.put((function, done))
        return done.result(30)

    def run(self) -> None:
        try:
            while not self._stop_requested.is_set():
                while not self._calls.empty():
                    function, done = self._calls.get()
                    try:
                        done.set_result(function(self.consumer))
                    except Exception as exc:
                        done.set_exception(exc)
                for tp, records in self.consumer.poll(timeout_ms=POLL_MS).items():
                    for record in records:
                        self.received.append(record)
                        if self.commit:  # commit after processing, record by record
                            offset = OffsetAndMetadata(record.offset + 1, "", -1)
                            self.consumer.commit({tp: offset})
                self.assignment = owned(self.consumer)
        except BaseException as exc:  # surfaced by the test through `check`
            self.error = exc
        finally:
            self.consumer.close(autocommit=False)

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.name} failed") from self.error

    def stop(self) -> None:
        """Ask the thread to close the consumer after its current poll."""
        self._stop_requested.set()

    def close(self) -> None:
        self.stop()
        self.join(30)
        self.check()


class Members:
    """The consumer threads of one test, closed at the end."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.open: list[Member] = []

    def join(
        self, group: str, client_id: str, topics: list[str] | None = None, **extra: Any
    ) -> Member:
        member = Member(self.bootstrap, group, client_id, topics, **extra)
        self.open.append(member)
        return member

    def check(self) -> None:
        for member in self.open:
            member.check()

    def close(self, member: Member) -> None:
        self.open.remove(member)
        member.close()

    def close_all(self) -> None:
        for member in self.open:
            member.stop()  # all at once: each waits out its current poll
        for member in list(self.open):
            self.close(member)


@pytest.fixture
def members(brook_broker: Any) -> Iterator[Members]:
    group = Members(brook_broker.bootstrap)
    try:
        yield group
    finally:
        group.close_all()


def test_three_consumers_split_six_partitions_and_take_over_from_one_that_leaves(
    brook_broker, members, topic_name
):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    consumers = [members.join("split", f"member-{i}", [topic_name]) for i in range(3)]
    wait_for(
        lambda: split_evenly([c.assignment for c in consumers], 6),
        tick=members.check,
        what="three consumers to share six partitions",
    )
    assert [len(c.assignment) for c in consumers] == [2, 2, 2]
    view = broker_view(brook_broker.port, "split")
    assert view.state == "Stable"
    assert view.members == {f"member-{i}": c.assignment for i, c in enumerate(consumers)}

    members.close(consumers[0])  # sends LeaveGroup
    started = time.monotonic()
    wait_for(
        lambda: split_evenly([c.assignment for c in consumers[1:]], 6),
        tick=members.check,
        what="the two remaining consumers to take over",
    )
    assert time.monotonic() - started < SESSION_MS / 1000
    view = wait_for(lambda: (v := broker_view(brook_broker.port, "split")).state == "Stable" and v)
    assert set(view.members) == {"member-1", "member-2"}


def test_killed_consumer_partitions_move_after_session_timeout(brook_broker, members, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    config = settings(brook_broker.bootstrap, "killed", "doomed")
    with MemberProcess("kafka-python", config, [topic_name]) as doomed:
        consumers = [members.join("killed", f"survivor-{i}", [topic_name]) for i in range(2)]
        wait_for(
            lambda: split_evenly([c.assignment for c in consumers] + [doomed.assignment], 6),
            timeout=30,
            tick=members.check,
            what="two consumers and a process to share six partitions",
        )
        doomed.kill()
        killed_at = time.monotonic()
        wait_for(
            lambda: split_evenly([c.assignment for c in consumers], 6),
            tick=members.check,
            what="the survivors to take the killed member's partitions",
        )
        waited = time.monotonic() - killed_at
    assert waited > SESSION_MS / 1000 * 0.6, f"partitions moved after only {waited:.2f} s"
    assert set(broker_view(brook_broker.port, "killed").members) == {"survivor-0", "survivor-1"}


def test_every_record_consumed_once_while_members_come_and_go(brook_broker, members, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = produce_spread(bootstrap, topic_name, 6, 50)
    options: dict[str, Any] = {"commit": True, "max_poll_records": 10}
    everyone = [members.join("once", name, [topic_name], **options) for name in ("1st", "2nd")]

    def seen() -> list[bytes]:
        return [r.value for member in everyone for r in member.received]

    def come_and_go() -> None:
        members.check()
        if len(everyone) == 2 and len(seen()) >= 100:
            everyone.append(members.join("once", "3rd", [topic_name], **options))
        if everyone[0] in members.open and len(seen()) >= 200:
            members.close(everyone[0])  # commits done, then LeaveGroup

    wait_for(lambda: len(seen()) >= len(expected), timeout=40, tick=come_and_go)
    time.sleep(1)  # a record delivered twice after a rebalance would show up by now
    assert sorted(seen()) == sorted(expected)
    assert not [value for value, n in Counter(seen()).items() if n > 1]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({"once": None})["once"]
    finally:
        admin.close()
    assert {tp.partition: o.offset for tp, o in offsets.items()} == dict.fromkeys(range(6), 50)


def consume_as_group(bootstrap: str, group: str, topic: str, count: int) -> list[Any]:
    """Join `group`, read `count` records committing each, check nothing more comes, leave."""
    consumer = KafkaConsumer(**settings(bootstrap, group, f"{group}-reader"))
    consumer.subscribe([topic])
    got: list[Any] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < count:
            assert time.monotonic() < deadline, f"read {len(got)} of {count} records"
            # A long poll: kafka-python 3 drops a join that completes after its poll has
            # timed out, which a loaded machine makes likely with short polls.
            for tp, records in consumer.poll(timeout_ms=2000).items():
                for record in records:
                    got.append(record)
                    consumer.commit({tp: OffsetAndMetadata(record.offset + 1, "", -1)})
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            assert consumer.poll(timeout_ms=100) == {}
    finally:
        consumer.close(autocommit=False)
    return got


def test_committed_offsets_survive_restart_and_sigkill(brokers, topic_name):
    overrides = {"group.min.session.timeout.ms": 500}
    broker = brokers.start(overrides)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    for partition in range(2):
        records = [(None, b"%d-%d" % (partition, i)) for i in range(10)]
        produce(broker.bootstrap, topic_name, records, partition=partition)
    consumer = KafkaConsumer(**settings(broker.bootstrap, "durable", "durable-first"))
    consumer.subscribe([topic_name])
    wait_for(lambda: len(owned(consumer)) == 2, tick=lambda: consumer.poll(timeout_ms=100))
    consumer.commit(
        {
            TopicPartition(topic_name, 0): OffsetAndMetadata(4, "after four", -1),
            TopicPartition(topic_name, 1): OffsetAndMetadata(7, "after seven", -1),
        }
    )
    consumer.close(autocommit=False)

    def committed() -> dict[tuple[str, int], tuple[int, str]]:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            offsets = admin.list_group_offsets({"durable": None})["durable"]
        finally:
            admin.close()
        return {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()}

    before = {(topic_name, 0): (4, "after four"), (topic_name, 1): (7, "after seven")}
    assert committed() == before
    broker.stop()
    broker = brokers.restart(broker, overrides)
    assert committed() == before
    resumed = consume_as_group(broker.bootstrap, "durable", topic_name, 9)
    assert sorted(r.value for r in resumed) == sorted(
        [b"0-%d" % i for i in range(4, 10)] + [b"1-%d" % i for i in range(7, 10)]
    )
    broker.kill()
    broker = brokers.restart(broker, overrides)
    assert {key: offset for key, (offset, _) in committed().items()} == {
        (topic_name, 0): 10,
        (topic_name, 1): 10,
    }
    produce(broker.bootstrap, topic_name, [(None, b"after-kill")], partition=0)
    assert [r.value for r in consume_as_group(broker.bootstrap, "durable", topic_name, 1)] == [
        b"after-kill"
    ]


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[int]]] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(("revoke", {tp.partition for tp in revoked}))

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(("assign", {tp.partition for tp in assigned}))


def test_static_member_restarts_without_rebalance(brook_broker, members, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    recorders = {"a": Recorder(), "b": Recorder()}

    def join(name: str) -> Member:
        return members.join(
            "static",
            name,
            [topic_name],
            listener=recorders[name],
            group_instance_id=f"instance-{name}",
            session_timeout_ms=10_000,  # outlives the restart
        )

    a, b = join("a"), join("b")
    wait_for(lambda: split_evenly([a.assignment, b.assignment], 6), tick=members.check)
    a_partitions, b_partitions = a.assignment, b.assignment
    before = broker_view(brook_broker.port, "static")
    generation = brook_broker.call(
        lambda: brook_broker.broker.groups.groups["static"].generation_id
    )
    recorders["b"].events.clear()

    members.close(a)  # a static member sends no LeaveGroup
    assert set(broker_view(brook_broker.port, "static").members) == {"a", "b"}
    restarted = join("a")
    wait_for(lambda: restarted.assignment == a_partitions, tick=members.check, what="a back")
    time.sleep(1)  # time for a rebalance, had one started, to reach b
    assert recorders["b"].events == []
    assert b.assignment == b_partitions
    after = broker_view(brook_broker.port, "static")
    assert after.member_ids["a"] != before.member_ids["a"]
    assert after.member_ids["b"] == before.member_ids["b"]
    assert after.members == before.members
    assert (
        brook_broker.call(lambda: brook_broker.broker.groups.groups["static"].generation_id)
        == generation
    )


def test_two_groups_read_the_same_topic_independently(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = produce_spread(bootstrap, topic_name, 6, 10)
    first = consume_as_group(bootstrap, "reader-one", topic_name, 60)
    assert sorted(r.value for r in first) == sorted(expected)
    second = consume_as_group(bootstrap, "reader-two", topic_name, 60)
    assert sorted(r.value for r in second) == sorted(expected)
    produce(bootstrap, topic_name, [(None, b"late")], partition=3)
    assert [r.value for r in consume_as_group(bootstrap, "reader-one", topic_name, 1)] == [b"late"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets(["reader-one", "reader-two"])
    finally:
        admin.close()
    assert {tp.partition: o.offset for tp, o in offsets["reader-one"].items()} == {
        p: 11 if p == 3 else 10 for p in range(6)
    }
    assert {o.offset for o in offsets["reader-two"].values()} == {10}


def test_regex_subscription_picks_up_a_new_topic(brook_broker, members, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-a", partitions=2)
    create_topic(bootstrap, f"other-{topic_name}")
    produce(bootstrap, f"{topic_name}-a", [(None, b"a0")], partition=0)
    member = members.join(
        "regex",
        "pattern",
        pattern=f"^{topic_name}-.*",
        metadata_max_age_ms=200,
        commit=True,  # so a record is not read again when the new topic rebalances
    )
    wait_for(lambda: member.received, tick=members.check, what="the first topic's record")
    create_topic(bootstrap, f"{topic_name}-b", partitions=2)
    produce(bootstrap, f"{topic_name}-b", [(None, b"b1")], partition=1)
    produce(bootstrap, f"other-{topic_name}", [(None, b"not matched")])
    both = {(f"{topic_name}-{t}", p) for t in "ab" for p in range(2)}
    wait_for(
        lambda: len(member.received) >= 2 and member.assignment == both,
        tick=members.check,
        what="the new topic's partitions and record",
    )
    assert [(r.topic, r.value) for r in member.received] == [
        (f"{topic_name}-a", b"a0"),
        (f"{topic_name}-b", b"b1"),
    ]
    assert broker_view(brook_broker.port, "regex").members["pattern"] == member.assignment


def test_admin_list_describe_offsets_lag_and_delete(brook_broker, members, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    produce_spread(bootstrap, topic_name, 6, 10)
    consumers = [members.join("admin", f"admin-{i}", [topic_name]) for i in range(2)]
    wait_for(lambda: split_evenly([c.assignment for c in consumers], 6), tick=members.check)
    offsets = {
        TopicPartition(topic_name, p): OffsetAndMetadata(p + 1, f"m{p}", -1) for p in range(6)
    }
    consumers[0].call(lambda consumer: consumer.commit(offsets))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = admin.list_groups()
        assert [(g["group_id"], g["protocol_type"]) for g in listed] == [("admin", "consumer")]
        assert [g["group_id"] for g in admin.list_groups(states_filter=["Stable"])] == ["admin"]
        assert admin.list_groups(states_filter=["Empty"]) == []

        described = admin.describe_groups(["admin"])["admin"]
        assert (described["group_state"], described["protocol_type"]) == ("Stable", "consumer")
        assert (
            described["protocol_data"]
            == consumers[0].consumer.config["partition_assignment_strategy"][0].name
        )
        shown = {
            m["client_id"]: {
                (t["topic"], p)
                for t in m["member_assignment"]["assigned_partitions"]
                for p in t["partitions"]
            }
            for m in described["members"]
        }
        assert shown == {f"admin-{i}": c.assignment for i, c in enumerate(consumers)}

        offsets = admin.list_group_offsets({"admin": None})["admin"]
        assert {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()} == {
            p: (p + 1, f"m{p}") for p in range(6)
        }
        partitions = [TopicPartition(topic_name, p) for p in range(6)]
        ends = consumers[0].call(lambda consumer: consumer.end_offsets(partitions))
        lag = {tp.partition: ends[tp] - offsets[tp].offset for tp in ends}
        assert lag == {p: 10 - (p + 1) for p in range(6)}

        assert admin.delete_groups(["admin"]) == {"admin": "NonEmptyGroupError"}
        members.close_all()
        wait_for(lambda: admin.list_groups(states_filter=["Empty"]))
        assert admin.delete_groups(["admin"]) == {"admin": "OK"}
        assert admin.list_groups() == []
        assert admin.list_group_offsets({"admin": None})["admin"] == {}
        assert admin.delete_groups(["admin"]) == {"admin": "GroupIdNotFoundError"}
        assert admin.describe_groups(["admin"])["admin"]["group_state"] == "Dead"
    finally:
        admin.close()
