"""What the Java client does against Brook, the same on one broker and on three, over
PLAINTEXT and SASL_SSL: each scenario takes the client config of a listener (bootstrap
and security settings) and asserts what came back."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from tests.cluster.harness import eventually

from .harness import JavaClients

WAIT_S = 60.0
COOPERATIVE_STICKY = "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
ASSIGNOR_NAMES = {COOPERATIVE_STICKY: "cooperative-sticky"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def wait_for(
    read: Callable[[], Any], predicate: Callable[[Any], bool], timeout: float = WAIT_S
) -> Any:
    """Ask again until the answer satisfies `predicate` (the client's own view of a
    group or a move changes as the broker's does)."""
    return eventually(read, predicate, timeout)


def create_topic(
    java: JavaClients,
    config: dict[str, Any],
    name: str,
    partitions: int = 1,
    replication_factor: int = 1,
    configs: dict[str, str] | None = None,
) -> None:
    spec: dict[str, Any] = {
        "name": name,
        "partitions": partitions,
        "replication_factor": replication_factor,
    }
    if configs:
        spec["configs"] = configs
    assert java.admin(config, "create_topics", topics=[spec]) == {name: {"ok": None}}


def read_all(
    java: JavaClients, config: dict[str, Any], topic: str, count: int, **consumer: str
) -> list[dict[str, Any]]:
    """Every record of the topic from its start, by a consumer without a group."""
    records: list[dict[str, Any]] = java.call(
        "consume",
        config={**config, "auto.offset.reset": "earliest", **consumer},
        topic=topic,
        count=count,
        timeout_ms=30000,
    )
    return records


def idempotent_producer(
    java: JavaClients, config: dict[str, Any], replication_factor: int = 1, **producer: str
) -> None:
    """An idempotent producer (acks=all) writes 300 keyed records with headers over 3
    partitions; each partition holds its records once, at offsets from 0 without a gap,
    and a consumer reads back every key, value and header."""
    topic = unique("java-idempotent")
    create_topic(java, config, topic, partitions=3, replication_factor=replication_factor)
    records: list[dict[str, Any]] = [
        {"key": f"key-{i % 17}", "value": f"value-{i}", "headers": {"seq": str(i)}}
        for i in range(300)
    ]
    written = java.call(
        "produce",
        config={**config, "enable.idempotence": "true", "acks": "all", **producer},
        topic=topic,
        records=records,
    )
    by_partition: dict[int, list[int]] = {}
    for partition, offset in written:
        by_partition.setdefault(partition, []).append(offset)
    for offsets in by_partition.values():
        assert sorted(offsets) == list(range(len(offsets)))
    read = read_all(java, config, topic, 300)
    assert len(read) == 300
    assert sorted((r["key"], r["value"], r["headers"]["seq"]) for r in read) == sorted(
        (r["key"], r["value"], r["headers"]["seq"]) for r in records
    )
    # The default partitioner puts a key on one partition.
    partitions_of_key: dict[str, set[int]] = {}
    for record in read:
        partitions_of_key.setdefault(record["key"], set()).add(record["partition"])
    assert all(len(partitions) == 1 for partitions in partitions_of_key.values())


def transactions(java: JavaClients, config: dict[str, Any], replication_factor: int = 1) -> None:
    """A transactional producer commits, aborts and commits again; read_committed reads
    only the committed records, read_uncommitted all of them, each once."""
    topic = unique("java-transactions")
    create_topic(java, config, topic, replication_factor=replication_factor)

    def values(batch: str) -> list[dict[str, str]]:
        return [{"value": f"{batch}-{i}"} for i in range(5)]

    offsets = java.call(
        "produce_transactions",
        config={**config, "transactional.id": unique("java-txn")},
        topic=topic,
        transactions=[
            {"records": values("first"), "commit": True},
            {"records": values("aborted"), "commit": False},
            {"records": values("second"), "commit": True},
        ],
    )
    # Each transaction's control marker takes an offset after its records.
    assert [[o for _, o in batch] for batch in offsets] == [
        list(range(0, 5)),
        list(range(6, 11)),
        list(range(12, 17)),
    ]
    committed = read_all(java, config, topic, 10, **{"isolation.level": "read_committed"})
    assert [r["value"] for r in committed] == [f"first-{i}" for i in range(5)] + [
        f"second-{i}" for i in range(5)
    ]
    everything = read_all(java, config, topic, 15, **{"isolation.level": "read_uncommitted"})
    assert [r["offset"] for r in everything] == [*range(0, 5), *range(6, 11), *range(12, 17)]


def produce_batch(
    java: JavaClients,
    config: dict[str, Any],
    topic: str,
    batch: str,
    count: int,
    produced: list[str],
) -> None:
    """`count` records `<batch>-<i>` (key and value) into `topic`, noted in `produced`."""
    records = [{"key": f"{batch}-{i}", "value": f"{batch}-{i}"} for i in range(count)]
    java.call("produce", config=config, topic=topic, records=records)
    produced.extend(r["value"] for r in records)


def member_state(java: JavaClients, name: str) -> dict[str, Any]:
    """A group member's report (assignment, records read), failing if its thread did."""
    answer: dict[str, Any] = java.call("member_state", name=name)
    assert answer["failure"] is None, answer["failure"]
    return answer


def group_rebalances(
    java: JavaClients,
    config: dict[str, Any],
    replication_factor: int = 1,
    assignor: str | None = None,
    group_protocol: str = "classic",
) -> None:
    """Two members of a group share four partitions, one leaves, the other takes all
    four; each record produced along the way is read exactly once (the members commit
    after each poll and when their partitions are revoked), and the group's committed
    offsets end at the log end. `assignor`: a partition.assignment.strategy class (the
    client's default list, range first, otherwise). `group_protocol` "consumer": Kafka
    4's protocol (KIP-848), where the broker assigns (its session and heartbeat apply)."""
    topic = unique("java-group")
    group = unique("java-group")
    create_topic(java, config, topic, partitions=4, replication_factor=replication_factor)
    member_config = {
        **config,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
    }
    if group_protocol == "consumer":
        member_config["group.protocol"] = "consumer"
    else:
        member_config.update({"session.timeout.ms": "10000", "heartbeat.interval.ms": "500"})
    if assignor is not None:
        member_config["partition.assignment.strategy"] = assignor
    produced: list[str] = []

    def produce(batch: str, count: int) -> None:
        produce_batch(java, config, topic, batch, count, produced)

    def state(name: str) -> dict[str, Any]:
        return member_state(java, name)

    every_partition = [f"{topic}:{p}" for p in range(4)]
    produce("one", 200)
    java.call("member_start", name="a", config=member_config, topic=topic)
    wait_for(lambda: state("a"), lambda s: s["assigned"] == every_partition and s["count"] == 200)
    java.call("member_start", name="b", config=member_config, topic=topic)
    # Both in the next generation, the partitions split between them.
    a, b = wait_for(
        lambda: (state("a"), state("b")),
        lambda pair: (
            len(pair[0]["assigned"]) == 2
            and len(pair[1]["assigned"]) == 2
            and pair[0]["generation"] == pair[1]["generation"]
        ),
    )
    assert sorted(a["assigned"] + b["assigned"]) == every_partition
    described = java.admin(config, "describe_groups", groups=[group])[group]
    assert described["state"] == "STABLE"
    assert described["type"] == group_protocol.upper()
    if group_protocol == "consumer":
        assert described["assignor"] == "uniform"  # the broker's default assignor
    elif assignor is not None:
        # The protocol the group chose is the assignor's name, as the coordinator says.
        assert described["assignor"] == ASSIGNOR_NAMES[assignor]
    assigned = [p for member in described["members"] for p in member["assignment"]]
    assert sorted(assigned) == every_partition
    produce("two", 200)
    wait_for(lambda: state("a")["count"] + state("b")["count"], lambda n: n == 400)
    first = java.call("member_stop", name="a")
    wait_for(lambda: state("b"), lambda s: s["assigned"] == every_partition)
    produce("three", 200)
    wait_for(lambda: state("b")["count"], lambda n: n == 400 - first["count"] + 200)
    second = java.call("member_stop", name="b")
    read = [r["value"] for r in first["records"] + second["records"]]
    assert Counter(read) == Counter(produced)
    committed = java.admin(config, "list_group_offsets", group=group)
    ends = Counter(int(r["partition"]) for r in first["records"] + second["records"])
    assert committed == {f"{topic}:{p}": ends[p] for p in range(4)}


def mixed_group(java: JavaClients, config: dict[str, Any]) -> None:
    """A classic Java consumer's group upgraded when a consumer-protocol (KIP-848) Java
    consumer joins it, the two sharing the partitions, then downgraded when that one
    leaves; each record read exactly once, the committed offsets at the log end."""
    topic = unique("java-mixed")
    group = unique("java-mixed")
    create_topic(java, config, topic, partitions=4)
    base = {
        **config,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
    }
    classic = {
        **base,
        "session.timeout.ms": "10000",
        "heartbeat.interval.ms": "500",
        "partition.assignment.strategy": COOPERATIVE_STICKY,
    }
    produced: list[str] = []

    def produce(batch: str, count: int) -> None:
        produce_batch(java, config, topic, batch, count, produced)

    def state(name: str) -> dict[str, Any]:
        return member_state(java, name)

    every_partition = [f"{topic}:{p}" for p in range(4)]
    produce("one", 100)
    java.call("member_start", name="a", config=classic, topic=topic)
    wait_for(lambda: state("a"), lambda s: s["assigned"] == every_partition and s["count"] == 100)
    assert java.admin(config, "describe_groups", groups=[group])[group]["type"] == "CLASSIC"
    java.call("member_start", name="b", config={**base, "group.protocol": "consumer"}, topic=topic)
    wait_for(
        lambda: (state("a"), state("b")),
        lambda pair: len(pair[0]["assigned"]) == 2 and len(pair[1]["assigned"]) == 2,
    )
    described = java.admin(config, "describe_groups", groups=[group])[group]
    assert (described["type"], described["state"]) == ("CONSUMER", "STABLE")
    produce("two", 100)
    wait_for(lambda: state("a")["count"] + state("b")["count"], lambda n: n == 200)
    second = java.call("member_stop", name="b")
    wait_for(lambda: state("a"), lambda s: s["assigned"] == every_partition)
    wait_for(
        lambda: java.admin(config, "describe_groups", groups=[group])[group],
        lambda d: d["type"] == "CLASSIC" and d["state"] == "STABLE",
    )
    produce("three", 100)
    wait_for(lambda: state("a")["count"], lambda n: n == 300 - second["count"])
    first = java.call("member_stop", name="a")
    read = [r["value"] for r in first["records"] + second["records"]]
    assert Counter(read) == Counter(produced)
    committed = java.admin(config, "list_group_offsets", group=group)
    ends = Counter(int(r["partition"]) for r in first["records"] + second["records"])
    assert committed == {f"{topic}:{p}": ends[p] for p in range(4)}


def consumer_group_regex_and_static(java: JavaClients, config: dict[str, Any]) -> None:
    """KIP-848 with the Java client: a broker-side regex subscription (SubscriptionPattern,
    RE2) takes a topic created later; a static member (group.instance.id) that restarts
    within its session gets its partitions back without a new group epoch."""
    prefix = unique("java-re")
    group = unique("java-re")
    create_topic(java, config, f"{prefix}-a", partitions=2)
    member = {
        **config,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
        "group.instance.id": "instance-1",
    }

    def state(name: str) -> dict[str, Any]:
        return member_state(java, name)

    java.call("member_start", name="re", config=member, topic=f"pattern:{prefix}-.*")
    first = [f"{prefix}-a:0", f"{prefix}-a:1"]
    wait_for(lambda: state("re"), lambda s: s["assigned"] == first)
    create_topic(java, config, f"{prefix}-b", partitions=1)
    both = sorted([*first, f"{prefix}-b:0"])
    wait_for(lambda: state("re"), lambda s: sorted(s["assigned"]) == both)
    epoch = java.admin(config, "describe_groups", groups=[group])[group]["epoch"]
    # A static member leaves for a restart (-2) and comes back with its partitions.
    java.call("member_stop", name="re")
    java.call("member_start", name="re", config=member, topic=f"pattern:{prefix}-.*")
    wait_for(lambda: state("re"), lambda s: sorted(s["assigned"]) == both)
    assert java.admin(config, "describe_groups", groups=[group])[group]["epoch"] == epoch
    java.call("member_stop", name="re")


def consumer_group_across_coordinator_kill(
    java: JavaClients, config: dict[str, Any], kill: Callable[[int], None]
) -> None:
    """Two members of a KIP-848 group (Java, committing after each poll) read on while
    the broker coordinating their group is killed (`kill`): the group's records are
    replicated, so the new coordinator has them at their epochs; every record is read
    exactly once and the committed offsets end at the log end."""
    topic = unique("java-failover")
    group = unique("java-failover")
    create_topic(java, config, topic, partitions=4, replication_factor=3)
    member_config = {
        **config,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
    }
    produced: list[str] = []

    def produce(batch: str, count: int) -> None:
        produce_batch(java, config, topic, batch, count, produced)

    def state(name: str) -> dict[str, Any]:
        return member_state(java, name)

    produce("before", 100)
    for name in ("a", "b"):
        java.call("member_start", name=name, config=member_config, topic=topic)
    wait_for(
        lambda: (state("a"), state("b")),
        lambda pair: (
            len(pair[0]["assigned"]) == len(pair[1]["assigned"]) == 2
            and pair[0]["count"] + pair[1]["count"] == 100
        ),
    )
    coordinator = java.admin(config, "describe_groups", groups=[group])[group]["coordinator"]
    kill(coordinator)
    produce("after", 100)
    wait_for(lambda: state("a")["count"] + state("b")["count"], lambda n: n == 200)
    described = java.admin(config, "describe_groups", groups=[group])[group]
    assert described["coordinator"] != coordinator and described["state"] == "STABLE"
    first, second = java.call("member_stop", name="a"), java.call("member_stop", name="b")
    read = [r["value"] for r in first["records"] + second["records"]]
    assert Counter(read) == Counter(produced)
    committed = java.admin(config, "list_group_offsets", group=group)
    ends = Counter(int(r["partition"]) for r in first["records"] + second["records"])
    assert committed == {f"{topic}:{p}": ends[p] for p in range(4)}
