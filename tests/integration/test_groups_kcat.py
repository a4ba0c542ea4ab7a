"""kcat's balanced consumer (`kcat -G group topic`, librdkafka 2.0.2) in consumer groups.

Each kcat is a process: it prints records on stdout and its rebalances on stderr
("% Group g rebalanced (memberid ...): assigned: t [0], t [1]"), which is how these
tests follow the assignment. SIGTERM closes it cleanly (final commit, LeaveGroup);
SIGKILL leaves only the session timeout to notice.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from .clients import create_topic, produce
from .groups import broker_view, produce_spread, split_evenly, wait_for

KCAT = shutil.which("kcat")
pytestmark = [
    pytest.mark.skipif(
        KCAT is None, reason="kcat is not installed (./test.sh installs Debian's kcat with apt-get)"
    ),
    pytest.mark.brook_config(group_min_session_timeout_ms=500),
]

# librdkafka 2.0.2 waits about two seconds before rejoining after a failed SyncGroup
# (a member joined meanwhile); sending no heartbeat in between, it needs a session
# timeout longer than that, or the coordinator rightly expires it.
SESSION_MS = 4000
PARTITION = re.compile(r"(\S+) \[(\d+)\]")


class Kcat:
    """One `kcat -G` process, its records and its current assignment."""

    def __init__(
        self, bootstrap: str, group: str, topics: list[str], *settings: str, client_id: str = ""
    ) -> None:
        assert KCAT is not None
        config = [
            f"session.timeout.ms={SESSION_MS}",
            "heartbeat.interval.ms=100",
            "auto.offset.reset=earliest",
            "auto.commit.interval.ms=100",
            "fetch.wait.max.ms=50",
            f"client.id={client_id or group}",
            *settings,
        ]
        # -u: unbuffered, so each record reaches the pipe as kcat prints it.
        command = [KCAT, "-b", bootstrap, "-G", group, "-u", "-f", "%t %p %o %s\\n"]
        for setting in config:
            command += ["-X", setting]
        self.process = subprocess.Popen(
            [*command, *topics], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.records: list[tuple[str, int, int, str]] = []
        self.rebalances: list[tuple[str, set[tuple[str, int]]]] = []
        self.assignment: set[tuple[str, int]] = set()
        self.errors: list[str] = []
        self._threads = [
            threading.Thread(target=self._read_records, daemon=True),
            threading.Thread(target=self._read_events, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read_records(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            topic, partition, offset, value = line.rstrip("\n").split(" ", 3)
            self.records.append((topic, int(partition), int(offset), value))

    def _read_events(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "rebalanced" in line and "): " in line:
                listed = line.split("): ", 1)[1]  # after "(memberid ...)"
                partitions = {(t, int(p)) for t, p in PARTITION.findall(listed)}
                if "assigned:" in line or "incremental assignment" in line:
                    kind = "assign"
                    if "incremental" in line:
                        self.assignment = self.assignment | partitions
                    else:
                        self.assignment = partitions
                else:
                    kind = "revoke"
                    self.assignment = self.assignment - partitions
                self.rebalances.append((kind, partitions))
            elif "ERROR" in line:
                self.errors.append(line.strip())

    @property
    def values(self) -> list[str]:
        return [value for _, _, _, value in self.records]

    def stop(self) -> None:
        """SIGTERM: kcat commits what it printed and leaves the group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(15)
        for thread in self._threads:
            thread.join(5)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)


class Kcats:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.running: list[Kcat] = []

    def start(self, group: str, topics: list[str], *settings: str, client_id: str = "") -> Kcat:
        kcat = Kcat(self.bootstrap, group, topics, *settings, client_id=client_id)
        self.running.append(kcat)
        return kcat

    def check(self) -> None:
        for kcat in self.running:
            assert not kcat.errors, kcat.errors

    def stop_all(self) -> None:
        for kcat in self.running:
            if kcat.process.poll() is None:
                kcat.process.send_signal(signal.SIGTERM)
        for kcat in self.running:
            try:
                kcat.process.wait(15)
            except subprocess.TimeoutExpired:
                kcat.kill()


@pytest.fixture
def kcats(brook_broker: Any) -> Iterator[Kcats]:
    running = Kcats(brook_broker.bootstrap)
    try:
        yield running
    finally:
        running.stop_all()


def test_three_balanced_consumers_split_and_take_over_from_one_that_leaves(
    brook_broker, kcats, topic_name
):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    consumers = [kcats.start("split", [topic_name], client_id=f"kcat-{i}") for i in range(3)]
    wait_for(
        lambda: split_evenly([k.assignment for k in consumers], 6),
        tick=kcats.check,
        what="three kcats to share six partitions",
    )
    view = broker_view(brook_broker.port, "split")
    assert view.state == "Stable"
    assert view.members == {f"kcat-{i}": k.assignment for i, k in enumerate(consumers)}

    consumers[0].stop()  # LeaveGroup
    started = time.monotonic()
    wait_for(
        lambda: split_evenly([k.assignment for k in consumers[1:]], 6),
        tick=kcats.check,
        what="the two remaining kcats to take over",
    )
    assert time.monotonic() - started < SESSION_MS / 1000
    view = wait_for(lambda: (v := broker_view(brook_broker.port, "split")).state == "Stable" and v)
    assert set(view.members) == {"kcat-1", "kcat-2"}


def test_killed_kcat_partitions_move_after_session_timeout(brook_broker, kcats, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    consumers = [kcats.start("killed", [topic_name], client_id=f"kcat-{i}") for i in range(3)]
    wait_for(lambda: split_evenly([k.assignment for k in consumers], 6), tick=kcats.check)
    consumers[0].kill()
    killed_at = time.monotonic()
    wait_for(
        lambda: split_evenly([k.assignment for k in consumers[1:]], 6),
        tick=kcats.check,
        what="the survivors to take the killed kcat's partitions",
    )
    waited = time.monotonic() - killed_at
    assert waited > SESSION_MS / 1000 * 0.6, f"partitions moved after only {waited:.2f} s"
    assert set(broker_view(brook_broker.port, "killed").members) == {"kcat-1", "kcat-2"}


def test_every_record_consumed_once_while_kcats_come_and_go(brook_broker, kcats, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    everyone = [kcats.start("once", [topic_name], client_id=f"kcat-{i}") for i in range(2)]

    def seen() -> list[str]:
        return [value for kcat in everyone for value in kcat.values]

    expected = [v.decode() for v in produce_spread(bootstrap, topic_name, 6, 25, tag="a")]
    wait_for(lambda: len(seen()) >= len(expected), tick=kcats.check, what="the first half")
    # kcat stores the offset of each record it printed and commits it; one that leaves
    # (SIGTERM) commits before it goes, so its successors start after its last record.
    everyone[0].stop()
    everyone.append(kcats.start("once", [topic_name], client_id="kcat-late"))
    wait_for(lambda: split_evenly([k.assignment for k in everyone[1:]], 6), tick=kcats.check)
    expected += [v.decode() for v in produce_spread(bootstrap, topic_name, 6, 25, tag="b")]
    wait_for(lambda: len(seen()) >= len(expected), tick=kcats.check, what="the second half")
    time.sleep(1)  # a record delivered twice would show up by now
    assert sorted(seen()) == sorted(expected)
    assert not [value for value, n in Counter(seen()).items() if n > 1]
    assert everyone[2].values  # the newcomer took part


def read_as_group(bootstrap: str, group: str, topic: str, count: int) -> list[str]:
    """A kcat in `group` until it printed `count` records (and nothing more), then stopped."""
    kcat = Kcat(bootstrap, group, [topic])
    try:
        wait_for(lambda: len(kcat.records) >= count, what=f"{count} records")
        time.sleep(0.5)
    finally:
        kcat.stop()
    assert not kcat.errors, kcat.errors
    return kcat.values


def test_committed_offsets_survive_restart_and_sigkill(brokers, topic_name):
    overrides = {"group.min.session.timeout.ms": 500}
    broker = brokers.start(overrides)
    create_topic(broker.bootstrap, topic_name, partitions=2)
    first = produce_spread(broker.bootstrap, topic_name, 2, 5, tag="a")
    assert sorted(read_as_group(broker.bootstrap, "durable", topic_name, 10)) == sorted(
        v.decode() for v in first
    )
    broker.stop()
    broker = brokers.restart(broker, overrides)
    second = produce_spread(broker.bootstrap, topic_name, 2, 3, tag="b")
    # Only what came after the commits: the group's offsets survived the restart.
    assert sorted(read_as_group(broker.bootstrap, "durable", topic_name, 6)) == sorted(
        v.decode() for v in second
    )
    broker.kill()
    broker = brokers.restart(broker, overrides)
    produce(broker.bootstrap, topic_name, [(None, b"after-kill")], partition=1)
    assert read_as_group(broker.bootstrap, "durable", topic_name, 1) == ["after-kill"]


def test_cooperative_sticky_rebalances_incrementally(brook_broker, kcats, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)
    strategy = "partition.assignment.strategy=cooperative-sticky"
    a = kcats.start("cooperative", [topic_name], strategy, client_id="a")
    wait_for(lambda: len(a.assignment) == 6, tick=kcats.check, what="a to own all six")
    before = set(a.assignment)
    mark = len(a.rebalances)
    b = kcats.start("cooperative", [topic_name], strategy, client_id="b")
    wait_for(lambda: split_evenly([a.assignment, b.assignment], 6), tick=kcats.check)
    revoked = set().union(*[ps for kind, ps in a.rebalances[mark:] if kind == "revoke"])
    # a gave up exactly what b took and kept the rest all along.
    assert revoked == b.assignment
    assert a.assignment == before - revoked
    assert broker_view(brook_broker.port, "cooperative").protocol == "cooperative-sticky"


def test_static_member_restarts_without_rebalance(brook_broker, kcats, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=6)

    def start(name: str) -> Kcat:
        return kcats.start(
            "static",
            [topic_name],
            f"group.instance.id=instance-{name}",
            "session.timeout.ms=10000",  # outlives the restart
            client_id=name,
        )

    a, b = start("a"), start("b")
    wait_for(lambda: split_evenly([a.assignment, b.assignment], 6), tick=kcats.check)
    a_partitions, b_rebalances = set(a.assignment), len(b.rebalances)
    before = broker_view(brook_broker.port, "static")
    generation = brook_broker.call(
        lambda: brook_broker.broker.groups.groups["static"].generation_id
    )
    a.stop()  # a static member does not leave the group on close
    assert set(broker_view(brook_broker.port, "static").members) == {"a", "b"}
    restarted = start("a")
    wait_for(lambda: restarted.assignment == a_partitions, tick=kcats.check, what="a back")
    time.sleep(1)  # time for a rebalance, had one started, to reach b
    assert len(b.rebalances) == b_rebalances
    after = broker_view(brook_broker.port, "static")
    assert after.member_ids["a"] != before.member_ids["a"]
    assert after.members == before.members
    assert (
        brook_broker.call(lambda: brook_broker.broker.groups.groups["static"].generation_id)
        == generation
    )


def test_two_groups_read_the_same_topic_independently(brook_broker, kcats, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=6)
    expected = sorted(v.decode() for v in produce_spread(bootstrap, topic_name, 6, 10))
    one = kcats.start("reader-one", [topic_name])
    two = kcats.start("reader-two", [topic_name])
    wait_for(lambda: len(one.records) >= 60 and len(two.records) >= 60, tick=kcats.check)
    time.sleep(0.5)
    assert sorted(one.values) == expected
    assert sorted(two.values) == expected


def test_regex_subscription_picks_up_a_new_topic(brook_broker, kcats, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, f"{topic_name}-a", partitions=2)
    create_topic(bootstrap, f"other-{topic_name}")
    produce(bootstrap, f"{topic_name}-a", [(None, b"a0")], partition=0)
    kcat = kcats.start("regex", [f"^{topic_name}-.*"], "topic.metadata.refresh.interval.ms=200")
    wait_for(lambda: kcat.records, tick=kcats.check, what="the first topic's record")
    create_topic(bootstrap, f"{topic_name}-b", partitions=2)
    produce(bootstrap, f"{topic_name}-b", [(None, b"b1")], partition=1)
    produce(bootstrap, f"other-{topic_name}", [(None, b"not matched")])
    both = {(f"{topic_name}-{t}", p) for t in "ab" for p in range(2)}
    wait_for(
        lambda: len(kcat.records) >= 2 and kcat.assignment == both,
        tick=kcats.check,
        what="the new topic's partitions and record",
    )
    assert [(t, v) for t, _, _, v in kcat.records] == [
        (f"{topic_name}-a", "a0"),
        (f"{topic_name}-b", "b1"),
    ]
    assert broker_view(brook_broker.port, "regex").members["regex"] == both
