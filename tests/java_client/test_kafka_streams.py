"""Kafka Streams (4.4) with exactly-once v2 on a three-broker Brook cluster: a word count
(a repartition topic by word, a changelogged count store, transactions over the input
offsets, the repartition topic, the changelog and the output) runs while the broker
leading its output is SIGKILLed and later restarted. Read with read_committed, each
word's counts in the output only ever grow, and the last is exactly how often the word
was in the input: nothing lost, nothing counted twice."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from .cluster import JavaTestCluster
from .harness import JavaClients
from .scenarios import create_topic, unique, wait_for

WORDS = [f"word{i:02d}" for i in range(24)]
LONG_DESERIALIZER = "org.apache.kafka.common.serialization.LongDeserializer"


def _lines(rng: random.Random, count: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(count)]


def test_word_count_exactly_once_across_a_broker_kill(
    java: JavaClients, cluster: JavaTestCluster, tmp_path: Path
) -> None:
    config = cluster.plaintext()
    source, sink = unique("java-lines"), unique("java-counts")
    create_topic(java, config, source, partitions=3, replication_factor=3)
    create_topic(java, config, sink, partitions=3, replication_factor=3)
    app = unique("java-wordcount")
    streams_config = {
        **config,
        "application.id": app,
        "state.dir": str(tmp_path / "state"),
        "replication.factor": "3",
        "commit.interval.ms": "200",
        "num.stream.threads": "2",
    }
    java.call("streams_start", name=app, config=streams_config, input=source, output=sink)
    wait_for(lambda: java.call("streams_state", name=app)["state"], lambda s: s == "RUNNING")

    rng = random.Random(848)
    sent: list[str] = []

    def send(count: int) -> None:
        lines = _lines(rng, count)
        records = [{"value": line} for line in lines]
        java.call(
            "produce",
            config={**config, "acks": "all", "enable.idempotence": "true"},
            topic=source,
            records=records,
        )
        sent.extend(lines)

    def counts() -> dict[str, list[int]]:
        """Each word's counts as the output holds them, in offset order."""
        read = java.call(
            "read_to_end",
            config={
                **config,
                "isolation.level": "read_committed",
                "value.deserializer": LONG_DESERIALIZER,
            },
            topic=sink,
        )
        seen: dict[str, list[int]] = {}
        for record in sorted(read, key=lambda r: (r["partition"], r["offset"])):
            seen.setdefault(record["key"], []).append(int(record["value"]))
        return seen

    def expected() -> Counter[str]:
        return Counter(word for line in sent for word in line.split())

    send(1500)
    # The broker leading the output's first partition goes down while the app works
    # through the first lines, and stays down while more arrive.
    leader = java.admin(config, "describe_topics", names=[sink])[sink]["partitions"][0]["leader"]
    cluster.brokers[leader].kill()
    send(500)
    # Every line so far counted with one broker down, then again once it is back.
    wait_for(counts, lambda seen: _last(seen) == dict(expected()), timeout=120)
    cluster.restart(leader)
    send(500)
    final = wait_for(counts, lambda seen: _last(seen) == dict(expected()), timeout=120)
    for word, values in final.items():
        assert values == sorted(set(values)), f"{word}'s counts went back or repeated: {values}"
    assert java.call("streams_state", name=app)["state"] == "RUNNING"
    stopped = java.call("streams_stop", name=app)
    assert stopped["closed"] is True


def _last(counts: dict[str, list[int]]) -> dict[str, int]:
    return {word: values[-1] for word, values in counts.items()}
