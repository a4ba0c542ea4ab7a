"""`brook groups` against a real broker: the console script as a subprocess, consumer
groups formed by real confluent-kafka consumers that commit, the tool's tables read as
an operator reads them, and every change checked through confluent-kafka's AdminClient."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from brook.broker.testing import BrokerThread

from .cli import Ran, assert_one_line_error, brook
from .clients import create_topic, produce

MINUTE_MS = 60_000


def groups(broker: BrokerThread, *args: str) -> Ran:
    return brook("groups", "--bootstrap-server", broker.bootstrap, *args)


def table(text: str) -> list[dict[str, str]]:
    """The rows of the tool's table (whitespace-separated, header first) as dicts."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, read by confluent-kafka, independent of the tool."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {
        (tp.topic, tp.partition): tp.offset
        for tp in result.result(15).topic_partitions
        if tp.offset >= 0
    }


# A consumer of Kafka 4's protocol (KIP-848): its session and heartbeat are the broker's.
KIP_848 = {"group.protocol": "consumer", "session.timeout.ms": None, "heartbeat.interval.ms": None}


def joined_consumer(bootstrap: str, group: str, topics: list[str], **extra) -> Consumer:
    """A consumer that has joined `group` and holds its assignment (the group is Stable)."""
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": f"{group}-client",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        **extra,
    }
    # A None in `extra` leaves a setting out.
    consumer = Consumer({key: value for key, value in config.items() if value is not None})
    consumer.subscribe(topics)
    deadline = time.monotonic() + 30
    while not consumer.assignment():
        assert time.monotonic() < deadline, "the consumer was not assigned partitions"
        consumer.poll(0.2)
    return consumer


def commit_and_leave(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Form `group` with a real consumer, commit `offsets` as its member, and leave: the
    group stays, Empty, with those offsets (what --reset-offsets works on)."""
    topics = sorted({topic for topic, _ in offsets})
    consumer = joined_consumer(bootstrap, group, topics)
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, offset) for (t, p), offset in offsets.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


def test_help():
    ran = brook("groups", "--help")
    assert ran.returncode == 0, ran
    assert ran.stdout.startswith("usage: brook groups")
    for option in (
        "--list",
        "--describe",
        "--members",
        "--reset-offsets",
        "--to-datetime",
        "--shift-by",
        "--execute",
        "--delete-offsets",
        "examples",
    ):
        assert option in ran.stdout
    assert "groups" in brook("--help").stdout


# --- list and describe ---------------------------------------------------------------------


def test_list_with_and_without_states(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    commit_and_leave(bootstrap, "idle-group", {(topic_name, 0): 0})
    consumer = joined_consumer(bootstrap, "busy-group", [topic_name])
    try:
        ran = groups(brook_broker, "--list")
        assert (ran.returncode, ran.stderr) == (0, ""), ran
        assert ran.lines == ["busy-group", "idle-group"]

        ran = groups(brook_broker, "list", "--state")  # the action as a word
        assert ran.returncode == 0, ran
        assert table(ran.stdout) == [
            {"GROUP": "busy-group", "STATE": "Stable"},
            {"GROUP": "idle-group", "STATE": "Empty"},
        ]
        ran = groups(brook_broker, "--list", "--state", "empty")
        assert table(ran.stdout) == [{"GROUP": "idle-group", "STATE": "Empty"}]
        ran = groups(brook_broker, "--list", "--state", "Stable,PreparingRebalance")
        assert table(ran.stdout) == [{"GROUP": "busy-group", "STATE": "Stable"}]
    finally:
        consumer.close()


def test_describe_offsets_lag_and_owner(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=3)
    for partition, count in enumerate((10, 7, 4)):
        produce(bootstrap, topic_name, [(None, b"x")] * count, partition=partition)
    consumer = joined_consumer(bootstrap, "app", [topic_name])
    try:
        consumer.commit(
            offsets=[TopicPartition(topic_name, 0, 6), TopicPartition(topic_name, 1, 7)],
            asynchronous=False,
        )
        member_id = consumer.memberid()
        ran = groups(brook_broker, "--describe", "--group", "app")
        assert (ran.returncode, ran.stderr) == (0, ""), ran
        assert ran.lines[0] == ""  # kafka-consumer-groups.sh starts each table so
        assert ran.lines[1].split() == [
            "GROUP",
            "TOPIC",
            "PARTITION",
            "CURRENT-OFFSET",
            "LOG-END-OFFSET",
            "LAG",
            "CONSUMER-ID",
            "HOST",
            "CLIENT-ID",
        ]
        owner = {"CONSUMER-ID": member_id, "HOST": "/127.0.0.1", "CLIENT-ID": "app-client"}
        common = {"GROUP": "app", "TOPIC": topic_name}
        assert table(ran.stdout) == [
            {**common, "PARTITION": "0", "CURRENT-OFFSET": "6", "LOG-END-OFFSET": "10"}
            | {"LAG": "4", **owner},
            {**common, "PARTITION": "1", "CURRENT-OFFSET": "7", "LOG-END-OFFSET": "7"}
            | {"LAG": "0", **owner},
            # Assigned but never committed: no offset and no lag, as Kafka shows it.
            {**common, "PARTITION": "2", "CURRENT-OFFSET": "-", "LOG-END-OFFSET": "4"}
            | {"LAG": "-", **owner},
        ]

        # More records raise the lag; the committed offset stays.
        produce(bootstrap, topic_name, [(None, b"y")] * 5, partition=1)
        rows = table(groups(brook_broker, "--describe", "--group", "app").stdout)
        assert (rows[1]["CURRENT-OFFSET"], rows[1]["LOG-END-OFFSET"], rows[1]["LAG"]) == (
            "7",
            "12",
            "5",
        )

        ran = groups(brook_broker, "--describe", "--group", "app", "--members", "--verbose")
        assert ran.returncode == 0, ran
        assert table(ran.stdout) == [
            {
                "GROUP": "app",
                "CONSUMER-ID": member_id,
                "HOST": "/127.0.0.1",
                "CLIENT-ID": "app-client",
                "#PARTITIONS": "3",
                # Kafka 4's columns; a classic group's member has no epochs nor target.
                "CURRENT-EPOCH": "-",
                "CURRENT-ASSIGNMENT": f"{topic_name}:0,1,2",
                "TARGET-EPOCH": "-",
                "TARGET-ASSIGNMENT": "-",
            }
        ]
        ran = groups(brook_broker, "--describe", "--group", "app", "--state")
        assert ran.returncode == 0, ran
        assert ran.lines[1].split() == [
            "GROUP",
            "COORDINATOR",
            "(ID)",
            "ASSIGNMENT-STRATEGY",
            "STATE",
            "#MEMBERS",
        ]
        assert ran.lines[2].split() == [
            "app",
            f"127.0.0.1:{brook_broker.port}",
            "(0)",
            "range",
            "Stable",
            "1",
        ]
    finally:
        consumer.close()

    # Once the consumer has left, the offsets remain and no one owns the partitions.
    ran = groups(brook_broker, "--describe", "--group", "app")
    assert ran.returncode == 0, ran
    assert "Consumer group 'app' has no active members." in ran.stderr
    rows = table(ran.stdout)
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in rows] == [
        ("0", "6", "4"),
        ("1", "7", "5"),
    ]
    assert {(r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"]) for r in rows} == {("-", "-", "-")}
    ran = groups(brook_broker, "--describe", "--group", "app", "--members")
    assert (ran.returncode, ran.stdout) == (0, "")
    assert "has no active members" in ran.stderr


def test_describe_every_group_and_unknown_groups(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x")] * 3)
    commit_and_leave(bootstrap, "first", {(topic_name, 0): 1})
    commit_and_leave(bootstrap, "second", {(topic_name, 0): 2})
    ran = groups(brook_broker, "--describe", "--all-groups")
    assert ran.returncode == 0, ran
    rows = [line.split() for line in ran.lines if line.strip() and not line.startswith("GROUP")]
    assert [(row[0], row[3], row[5]) for row in rows] == [("first", "1", "2"), ("second", "2", "1")]

    ran = groups(brook_broker, "--describe", "--group", "nobody")
    assert_one_line_error(ran, "consumer group 'nobody' does not exist", code=1)
    ran = groups(brook_broker, "--describe", "--group", "first", "--group", "x", "--group", "y")
    assert ran.returncode == 1, ran
    assert (
        ran.stderr.splitlines()[-1] == "brook groups: error: consumer groups 'x', 'y' do not exist"
    )
    assert table(ran.stdout)[0]["GROUP"] == "first"  # the groups that exist are still shown


# --- reset-offsets -----------------------------------------------------------------------


@pytest.fixture
def inactive_group(brook_broker, topic_name):
    """Group "app", Empty, committed at 7 on partition 0 (log 3..10, records 0-2 deleted)
    and 4 on partition 1 (log 0..6). Timestamps: partition 0's record i at BASE + i
    minutes, partition 1's at BASE + 2i minutes, BASE 20 minutes ago."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    base = (int(time.time() * 1000) - 20 * MINUTE_MS) // 1000 * 1000
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count, step in ((0, 10, 1), (1, 6, 2)):
        for i in range(count):
            producer.produce(
                topic_name, b"%d" % i, partition=partition, timestamp=base + i * step * MINUTE_MS
            )
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([TopicPartition(topic_name, 0, 3)])
    assert next(iter(deleted.values())).result(15).low_watermark == 3
    commit_and_leave(bootstrap, "app", {(topic_name, 0): 7, (topic_name, 1): 4})
    return base


def iso(ms: int, zone: str = "") -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + zone


@pytest.mark.parametrize(
    ("spec", "expected", "warned"),
    [
        (["--to-earliest"], (3, 0), ""),
        (["--to-latest"], (10, 6), ""),
        (["--to-current"], (7, 4), ""),
        (["--to-offset", "5"], (5, 5), ""),
        (["--to-offset", "1"], (3, 1), "lower than earliest offset"),  # kept in the log
        (["--to-offset", "8"], (8, 6), "higher than latest offset"),
        (["--shift-by", "-2"], (5, 2), ""),
        (["--shift-by", "5"], (10, 6), "higher than latest offset"),
        (["--shift-by", "-6"], (3, 0), "lower than earliest offset"),
        # The first record at or after the time (partition 1: the one at BASE + 4 min).
        (["--to-datetime", lambda base: iso(base + 4 * MINUTE_MS)], (4, 2), ""),
        (["--to-datetime", lambda base: iso(base + 3 * MINUTE_MS + 1, "Z")], (4, 2), ""),
        # 13:00+01:00 is 12:00 UTC: a zone is honoured.
        (["--to-datetime", lambda base: iso(base + 65 * MINUTE_MS, "+01:00")], (5, 3), ""),
        # Before the log start: the log start; after the last record: the log end.
        (["--to-datetime", lambda base: iso(base)], (3, 0), ""),
        (["--to-datetime", "2999-01-01T00:00:00.000"], (10, 6), ""),
        # Now minus 15.5 minutes is BASE + 4.5 minutes (give or take the test's runtime).
        (["--by-duration", "PT15M30S"], (5, 3), ""),
    ],
)
def test_reset_offsets(brook_broker, topic_name, inactive_group, spec, expected, warned):
    spec = [item(inactive_group) if callable(item) else item for item in spec]
    bootstrap = brook_broker.bootstrap
    before = committed(bootstrap, "app")
    assert before == {(topic_name, 0): 7, (topic_name, 1): 4}
    plan = [
        {"GROUP": "app", "TOPIC": topic_name, "PARTITION": str(p), "NEW-OFFSET": str(offset)}
        for p, offset in enumerate(expected)
    ]

    # Without --execute the plan is printed and nothing changes.
    ran = groups(brook_broker, "--reset-offsets", "--group", "app", "--topic", topic_name, *spec)
    assert ran.returncode == 0, ran
    assert table(ran.stdout) == plan
    assert "Dry run" in ran.stderr and "--execute" in ran.stderr
    assert warned in ran.stderr
    assert committed(bootstrap, "app") == before

    ran = groups(
        brook_broker, "--reset-offsets", "--group", "app", "--topic", topic_name, *spec, "--execute"
    )
    assert ran.returncode == 0, ran
    assert table(ran.stdout) == plan
    assert "Dry run" not in ran.stderr
    assert committed(bootstrap, "app") == {(topic_name, p): o for p, o in enumerate(expected)}


def test_reset_offsets_of_some_partitions_and_all_topics(brook_broker, topic_name, inactive_group):
    bootstrap = brook_broker.bootstrap
    ran = groups(
        brook_broker,
        "--reset-offsets",
        "--group",
        "app",
        "--topic",
        f"{topic_name}:1",
        "--to-offset",
        "2",
        "--dry-run",
    )
    assert (ran.returncode, ran.stderr) == (0, ""), ran  # --dry-run: no reminder
    assert [row["PARTITION"] for row in table(ran.stdout)] == ["1"]

    ran = groups(
        brook_broker,
        "reset-offsets",
        "--group",
        "app",
        "--topic",
        f"{topic_name}:1",
        "--to-offset",
        "2",
        "--execute",
    )
    assert ran.returncode == 0, ran
    assert committed(bootstrap, "app") == {(topic_name, 0): 7, (topic_name, 1): 2}

    # --all-topics: the partitions the group has committed offsets for, of every topic.
    other = f"{topic_name}-other"
    create_topic(bootstrap, other, partitions=3)
    produce(bootstrap, other, [(None, b"x")] * 4, partition=2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("app", [TopicPartition(other, 2, 1)])]
    )["app"].result(15)
    ran = groups(
        brook_broker,
        "--reset-offsets",
        "--group",
        "app",
        "--all-topics",
        "--to-latest",
        "--execute",
    )
    assert ran.returncode == 0, ran
    assert committed(bootstrap, "app") == {(topic_name, 0): 10, (topic_name, 1): 6, (other, 2): 4}


def test_reset_offsets_of_a_new_group_creates_it(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    produce(bootstrap, topic_name, [(None, b"x")] * 3, partition=1)
    ran = groups(
        brook_broker,
        "--reset-offsets",
        "--group",
        "new",
        "--topic",
        topic_name,
        "--to-latest",
        "--execute",
    )
    assert ran.returncode == 0, ran
    assert committed(bootstrap, "new") == {(topic_name, 0): 0, (topic_name, 1): 3}
    assert groups(brook_broker, "--list").lines == ["new"]


def test_reset_offsets_of_an_active_group_is_refused(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x")] * 5)
    reset = ("--reset-offsets", "--group", "live", "--topic", topic_name, "--to-earliest")
    consumer = joined_consumer(bootstrap, "live", [topic_name])
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)
        for run in ([], ["--execute"]):
            ran = groups(brook_broker, *reset, *run)
            assert_one_line_error(
                ran,
                "Assignments can only be reset if the group 'live' is inactive,"
                " but the current state is Stable",
                code=1,
            )
            assert ran.stdout == ""
        assert committed(bootstrap, "live") == {(topic_name, 0): 3}
    finally:
        consumer.close()
    # Once its consumer has left, the same reset goes through.
    ran = groups(brook_broker, *reset, "--execute")
    assert ran.returncode == 0, ran
    assert committed(bootstrap, "live") == {(topic_name, 0): 0}


@pytest.mark.brook_config(
    group_consumer_min_heartbeat_interval_ms=100, group_consumer_heartbeat_interval_ms=100
)
def test_reset_offsets_of_a_consumer_group_of_kip_848(brook_broker, topic_name):
    """Kafka 4's consumer groups: refused while a member is in it (state Stable), done once
    it is Empty, as kafka-consumer-groups.sh does."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x")] * 5)
    reset = ("--reset-offsets", "--group", "kip848", "--topic", topic_name, "--to-offset", "2")
    consumer = joined_consumer(bootstrap, "kip848", [topic_name], **KIP_848)
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 4)], asynchronous=False)
        ran = groups(brook_broker, *reset, "--execute")
        assert_one_line_error(
            ran,
            "Assignments can only be reset if the group 'kip848' is inactive,"
            " but the current state is Stable",
            code=1,
        )
        assert committed(bootstrap, "kip848") == {(topic_name, 0): 4}
    finally:
        consumer.close()
    ran = groups(brook_broker, *reset, "--execute")
    assert ran.returncode == 0, ran
    assert committed(bootstrap, "kip848") == {(topic_name, 0): 2}
    listed = table(groups(brook_broker, "--list", "--type", "--state").stdout)
    assert listed == [{"GROUP": "kip848", "TYPE": "Consumer", "STATE": "Empty"}]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--topic", "no-such-topic", "--to-earliest"], ["topic 'no-such-topic' does not exist"]),
        (["--topic", "{topic}:5", "--to-earliest"], ["has no partition 5 (it has 2)"]),
        (["--all-topics", "--to-earliest", "--group", "ghost"], ["'ghost' does not exist"]),
    ],
)
def test_reset_offsets_errors(brook_broker, topic_name, inactive_group, args, fragments):
    args = [arg.replace("{topic}", topic_name) for arg in args]
    group = [] if "--group" in args else ["--group", "app"]
    ran = groups(brook_broker, "--reset-offsets", *group, *args, "--execute")
    assert_one_line_error(ran, *fragments, code=1)
    assert committed(brook_broker.bootstrap, "app") == {(topic_name, 0): 7, (topic_name, 1): 4}


def test_shift_without_a_committed_offset(brook_broker, topic_name):
    create_topic(brook_broker.bootstrap, topic_name, partitions=2)
    commit_and_leave(brook_broker.bootstrap, "half", {(topic_name, 0): 0})
    ran = groups(
        brook_broker, "--reset-offsets", "--group", "half", "--topic", topic_name, "--shift-by", "1"
    )
    assert_one_line_error(ran, f"{topic_name}-1", "no committed offset", code=1)


# --- delete -------------------------------------------------------------------------------


def test_delete_groups(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    produce(bootstrap, topic_name, [(None, b"x")] * 2)
    commit_and_leave(bootstrap, "old", {(topic_name, 0): 2})
    consumer = joined_consumer(bootstrap, "live", [topic_name])
    try:
        ran = groups(brook_broker, "--delete", "--group", "live")
        assert_one_line_error(ran, "'live' has members and cannot be deleted", code=1)

        ran = groups(brook_broker, "--delete", "--group", "old")
        assert (ran.returncode, ran.stderr) == (0, ""), ran
        assert ran.stdout == "Deletion of requested consumer groups ('old') was successful.\n"
        assert committed(bootstrap, "old") == {}
        assert groups(brook_broker, "--list").lines == ["live"]

        ran = groups(brook_broker, "--delete", "--group", "old")
        assert_one_line_error(ran, "consumer group 'old' does not exist", code=1)
    finally:
        consumer.close()
    ran = groups(brook_broker, "--delete", "--all-groups")
    assert ran.returncode == 0, ran
    assert ran.stdout == "Deletion of requested consumer groups ('live') was successful.\n"
    assert groups(brook_broker, "--list").lines == []


def test_delete_offsets(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    other = f"{topic_name}-other"
    create_topic(bootstrap, topic_name, partitions=2)
    create_topic(bootstrap, other)
    commit_and_leave(bootstrap, "app", {(topic_name, 0): 0, (topic_name, 1): 0, (other, 0): 0})

    ran = groups(brook_broker, "--delete-offsets", "--group", "app", "--topic", f"{topic_name}:1")
    assert (ran.returncode, ran.stderr) == (0, ""), ran
    assert (
        ran.lines[0] == f"Request succeeded for deleting offsets of topic {topic_name} in group app"
    )
    assert table("\n".join(ran.lines[1:])) == [
        {"TOPIC": topic_name, "PARTITION": "1", "STATUS": "Successful"}
    ]
    assert committed(bootstrap, "app") == {(topic_name, 0): 0, (other, 0): 0}

    ran = groups(brook_broker, "delete-offsets", "--group", "app", "--topic", topic_name)
    assert ran.returncode == 0, ran
    assert committed(bootstrap, "app") == {(other, 0): 0}

    # A live member subscribed to the topic keeps its offsets (GROUP_SUBSCRIBED_TO_TOPIC).
    consumer = joined_consumer(bootstrap, "app", [other])
    try:
        ran = groups(brook_broker, "--delete-offsets", "--group", "app", "--topic", other)
        assert_one_line_error(ran, f"{other}-0", "GROUP_SUBSCRIBED_TO_TOPIC", code=1)
        assert "Error: " in ran.stdout
        assert committed(bootstrap, "app") == {(other, 0): 0}
    finally:
        consumer.close()

    ran = groups(brook_broker, "--delete-offsets", "--group", "nobody", "--topic", other)
    assert_one_line_error(ran, "consumer group 'nobody' does not exist", code=1)


@pytest.mark.brook_config(group_initial_rebalance_delay_ms=20000)
def test_delete_offsets_while_the_first_generation_forms(brook_broker, topic_name):
    """A member is joining (the initial rebalance delay holds the group in
    PreparingRebalance), so its subscription is not known yet: Kafka takes every topic
    as subscribed and keeps the offsets."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("app", [TopicPartition(topic_name, 0, 0)])]
    )["app"].result(15)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "app"})
    consumer.subscribe([topic_name])
    try:
        deadline = time.monotonic() + 15
        while table(groups(brook_broker, "--list", "--state").stdout)[0]["STATE"] == "Empty":
            assert time.monotonic() < deadline, "the consumer did not join"
            consumer.poll(0.2)
        ran = groups(brook_broker, "--delete-offsets", "--group", "app", "--topic", topic_name)
        assert_one_line_error(ran, "GROUP_SUBSCRIBED_TO_TOPIC", code=1)
        assert committed(bootstrap, "app") == {(topic_name, 0): 0}
    finally:
        consumer.close()


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "give one action"),
        (["list", "--describe"], "give one action"),
        (["--describe"], "--describe needs --group"),
        (["--list", "--group", "g"], "--list takes no --group"),
        (["--describe", "--group", "g", "--all-groups"], "not both"),
        (["--reset-offsets", "--group", "g", "--topic", "t"], "needs one of --to-earliest"),
        (["--reset-offsets", "--group", "g", "--to-latest"], "--topic or --all-topics"),
        (
            ["--reset-offsets", "--group", "g", "--topic", "t", "--all-topics", "--to-latest"],
            "--topic or --all-topics",
        ),
        (["--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"], "TOPIC:PARTITION"),
        (
            ["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"],
            "is not YYYY-MM-DDTHH:mm:SS.sss",
        ),
        (
            ["--reset-offsets", "--group", "g", "--topic", "t", "--by-duration", "1 day"],
            "not an ISO-8601 duration",
        ),
        (["--describe", "--group", "g", "--to-latest"], "only for --reset-offsets"),
        (["--describe", "--group", "g", "--execute"], "only for --reset-offsets"),
        (["--delete", "--group", "g", "--topic", "t"], "--topic is only for"),
        (["--delete-offsets", "--group", "g"], "--delete-offsets needs --topic"),
        (["--delete-offsets", "--group", "a", "--group", "b", "--topic", "t"], "exactly one"),
        (["--list", "--state", "Bored"], "is not a group state"),
        (["--list", "--members"], "only for --describe"),
    ],
)
def test_usage_errors(args, fragment):
    ran = brook("groups", "--bootstrap-server", "127.0.0.1:1", *args)
    assert_one_line_error(ran, fragment, code=2)
    assert ran.stdout == ""


def test_unreachable_broker():
    from brook.broker.testing import free_port

    ran = brook("groups", "--bootstrap-server", f"127.0.0.1:{free_port()}", "--list")
    assert_one_line_error(ran, "cannot connect to the broker", code=1)
