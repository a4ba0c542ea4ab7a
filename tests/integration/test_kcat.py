"""kcat (Debian's build, librdkafka 2.0.2) against a real Brook broker.

An older librdkafka than confluent-kafka's: it negotiates its own API versions, so these
tests check that a client from a few years back is served unchanged.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from brook.protocol.compression import Codec

from .clients import CODECS, create_topic, kafka_python_producer, stored_batches

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (./test.sh installs Debian's kcat with apt-get)"
)


def kcat(
    bootstrap: str, *args: str, stdin: bytes | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    result = subprocess.run(
        [KCAT, "-b", bootstrap, *args], input=stdin, capture_output=True, timeout=60
    )
    if check:
        assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result


def kcat_produce(bootstrap: str, topic: str, lines: list[str], *args: str) -> None:
    kcat(bootstrap, "-t", topic, "-P", *args, stdin="".join(f"{line}\n" for line in lines).encode())


def kcat_consume(bootstrap: str, topic: str, *args: str) -> list[dict[str, Any]]:
    """Consume until the end of every partition (-e); one JSON object per record.

    -Z shows null keys and values as JSON null, not as empty strings.
    """
    result = kcat(bootstrap, "-t", topic, "-C", "-e", "-q", "-J", "-Z", *args)
    return [json.loads(line) for line in result.stdout.decode().splitlines() if line]


@pytest.mark.parametrize("codec", list(CODECS))
def test_produce_keys_headers_and_codec(brook_broker, topic_name, codec):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    lines = [f"k{i}:value-{i}-" + "x" * (i % 13) for i in range(100)]
    kcat_produce(bootstrap, topic_name, lines, "-K:", "-H", "a=1", "-H", "b=2", "-z", codec)
    records = kcat_consume(bootstrap, topic_name, "-o", "beginning")
    assert [r["offset"] for r in records] == list(range(100))
    assert [f"{r['key']}:{r['payload']}" for r in records] == lines
    assert all(r["headers"] == ["a", "1", "b", "2"] for r in records)
    assert {r["tstype"] for r in records} == {"create"}
    # compression.type=producer: the batches stay in kcat's codec on disk.
    stored = {b.codec for b in stored_batches(brook_broker.data_dir, topic_name)}
    # librdkafka turns lz4 on only when the broker advertises FindCoordinator (its proxy
    # for "Kafka >= 0.8.2"): lz4 stored as lz4 shows that Brook advertises it.
    # librdkafka sends a batch uncompressed when compressing would not shrink it (a small
    # batch, as batching under load may make): every compressed batch is in kcat's codec.
    assert CODECS[codec] in stored
    assert stored - {Codec.NONE} <= {CODECS[codec]}


def test_null_keys_and_values(brook_broker, topic_name):
    """With -Z an empty key or value is sent as null (a tombstone) and read back as null."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    kcat_produce(bootstrap, topic_name, ["k1:v1", "tomb:", ":no key"], "-K:", "-Z", "-H", "h")
    records = kcat_consume(bootstrap, topic_name, "-o", "beginning")
    assert [(r["key"], r["payload"]) for r in records] == [
        ("k1", "v1"),
        ("tomb", None),
        (None, "no key"),
    ]
    assert records[0]["headers"] == ["h", None]  # a header without a value


def test_consume_from_beginning_end_offset_and_relative(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    kcat_produce(bootstrap, topic_name, [f"m{i}" for i in range(10)])

    def offsets(*args: str) -> list[int]:
        return [r["offset"] for r in kcat_consume(bootstrap, topic_name, *args)]

    assert offsets("-o", "beginning") == list(range(10))
    assert offsets("-o", "end") == []
    assert offsets("-o", "4") == list(range(4, 10))
    assert offsets("-o", "-3") == [7, 8, 9]  # relative to the end
    assert offsets("-o", "1", "-c", "2") == [1, 2]
    records = kcat_consume(bootstrap, topic_name, "-o", "9")
    assert [(r["offset"], r["payload"]) for r in records] == [(9, "m9")]


def test_consume_from_timestamp_and_query_offsets(brook_broker, topic_name):
    """-o s@T and -Q: the first offset whose timestamp is >= T, even after an older one."""
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name)
    base = int(time.time() * 1000) - 600_000
    relative = [0, 1_000, 2_000, 9_000, 3_000, 4_000, 5_000]
    producer = kafka_python_producer(bootstrap, linger_ms=0)
    try:
        for i, ts in enumerate(relative):
            # get() before the next send: one batch per record, so the time index works.
            producer.send(topic_name, value=b"t%d" % i, partition=0, timestamp_ms=base + ts).get(10)
    finally:
        producer.close(5)

    records = kcat_consume(bootstrap, topic_name, "-o", f"s@{base + 2_500}")
    # Offset 3 (9 s) is the first at or after 2.5 s; offsets 4.. follow though older.
    assert [r["offset"] for r in records] == [3, 4, 5, 6]
    assert [r["ts"] - base for r in records] == [9_000, 3_000, 4_000, 5_000]
    assert [r["offset"] for r in kcat_consume(bootstrap, topic_name, "-o", f"s@{base}")] == list(
        range(7)
    )

    def query(ts: int) -> str:
        return kcat(bootstrap, "-Q", "-t", f"{topic_name}:0:{ts}").stdout.decode().strip()

    assert query(base + 2_000) == f"{topic_name} [0] offset 2"
    assert query(base + 2_001) == f"{topic_name} [0] offset 3"
    assert query(base + 9_001) == f"{topic_name} [0] offset -1"  # nothing that late


def test_metadata_listing(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=3)
    create_topic(bootstrap, topic_name + "-one")
    listing = json.loads(kcat(bootstrap, "-L", "-J").stdout)
    assert listing["brokers"] == [{"id": 0, "name": bootstrap}]
    assert listing["controllerid"] == 0
    topics = {t["topic"]: t for t in listing["topics"]}
    assert set(topics) >= {topic_name, topic_name + "-one"}
    assert [p["partition"] for p in topics[topic_name]["partitions"]] == [0, 1, 2]
    for partition in topics[topic_name]["partitions"]:
        assert partition["leader"] == 0
        assert partition["replicas"] == [{"id": 0}]
        assert partition["isrs"] == [{"id": 0}]
    assert "error" not in topics[topic_name]

    # The human-readable form, for one topic.
    text = kcat(bootstrap, "-L", "-t", topic_name).stdout.decode()
    assert f"broker 0 at {bootstrap} (controller)" in text
    assert f'topic "{topic_name}" with 3 partitions:' in text
    assert "partition 2, leader 0, replicas: 0, isrs: 0" in text


@pytest.mark.brook_config(auto_create_topics_enable=False)
def test_missing_topic_without_auto_create(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    listing = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic_name).stdout)
    [topic] = listing["topics"]
    assert topic["error"] == "Broker: Unknown topic or partition"
    assert topic["partitions"] == []
    consume = kcat(bootstrap, "-t", topic_name, "-C", "-e", "-o", "beginning", check=False)
    assert consume.returncode != 0
    assert b"Unknown topic or partition" in consume.stderr
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert topic_name not in admin.list_topics(timeout=10).topics


@pytest.mark.brook_config(num_partitions=4)
def test_auto_create_and_keyed_partitioning(brook_broker, topic_name):
    """A produce to a new topic creates it with num.partitions; keys stick to a partition
    and every partition reads back in order."""
    bootstrap = brook_broker.bootstrap
    lines = [f"key-{i % 11}:{i}" for i in range(200)]
    kcat_produce(bootstrap, topic_name, lines, "-K:")
    listing = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic_name).stdout)
    assert len(listing["topics"][0]["partitions"]) == 4
    records = kcat_consume(bootstrap, topic_name, "-o", "beginning")
    assert sorted(int(r["payload"]) for r in records) == list(range(200))
    assert len({r["partition"] for r in records}) > 1
    for key in {r["key"] for r in records}:
        assert len({r["partition"] for r in records if r["key"] == key}) == 1
    for partition in range(4):
        mine = [r for r in records if r["partition"] == partition]
        assert [r["offset"] for r in mine] == list(range(len(mine)))
        assert [int(r["payload"]) for r in mine] == sorted(int(r["payload"]) for r in mine)


def test_oversized_message_fails_delivery(brook_broker, topic_name):
    bootstrap = brook_broker.bootstrap
    create_topic(bootstrap, topic_name, config={"max.message.bytes": "2000"})
    too_big = kcat(
        bootstrap, "-t", topic_name, "-P", "-p", "0", stdin=b"x" * 3000 + b"\n", check=False
    )
    assert too_big.returncode != 0
    assert b"Message size too large" in too_big.stderr
    kcat_produce(bootstrap, topic_name, ["y" * 1800], "-p", "0")
    records = kcat_consume(bootstrap, topic_name, "-o", "beginning")
    assert [(r["offset"], len(r["payload"])) for r in records] == [(0, 1800)]
