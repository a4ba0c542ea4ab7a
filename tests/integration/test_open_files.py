"""Running out of file descriptors: the open-file limit is raised at start, and when it
runs out anyway the request that needed one more gets an error, nothing half-made is
left behind (on disk or open), and the broker keeps serving what it already has.

The broker runs as a subprocess with a low RLIMIT_NOFILE (soft and hard), so the limit
is its own and the test process keeps its descriptors.
"""

from __future__ import annotations

import datetime
import os
import resource
import time
from pathlib import Path

import pytest
from kio.schema.delete_topics.v4.request import DeleteTopicsRequest
from kio.schema.metadata.v4.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData

from brook.protocol.record_batch import Record, build_batch, split_batches

from .clients import consume_all, create_topic, produce
from .processes import Brokers
from .raw_client import RawClient, fetch_request

KAFKA_STORAGE_ERROR = 56
LOW_LIMIT = 160
SEGMENT_BYTES = 4096
BIG = b"x" * 3900  # with what the segment already holds, more than SEGMENT_BYTES: rolls


@pytest.fixture
def pool(tmp_path):
    brokers = Brokers(tmp_path)
    try:
        yield brokers
    finally:
        brokers.stop_all()


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _settled_fds(pid: int) -> int:
    """The broker's descriptor count once it holds still (the last connection it refused
    may still be going, a descriptor for a moment)."""
    previous = _open_fds(pid)
    deadline = time.monotonic() + 10
    while True:
        time.sleep(0.2)
        now = _open_fds(pid)
        if now == previous or time.monotonic() > deadline:
            return now
        previous = now


def _soft_limit(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc/<pid>/limits")


def _auto_create(client: RawClient, name: str) -> int:
    response = client.request(
        MetadataRequest(topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=True)
    )
    return response.topics[0].error_code.value


def _raw_produce(client: RawClient, topic: str, value: bytes) -> tuple[int, int]:
    batch = build_batch([Record(0, int(time.time() * 1000), b"raw", value)])
    response = client.request(
        ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout=datetime.timedelta(seconds=10),
            topic_data=(
                TopicProduceData(
                    name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)
                ),
            ),
        )
    )
    partition = response.responses[0].partition_responses[0]
    return partition.error_code.value, partition.base_offset


def _raw_fetch_batches(client: RawClient, topic: str) -> int:
    response = client.request(fetch_request(topic, max_wait_ms=10, min_bytes=0, max_bytes=1 << 20))
    partition = response.responses[0].partitions[0]
    assert partition.error_code.value == 0
    return len(split_batches(bytearray(partition.records or b"")))


def _wait_for_log(broker, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while text not in broker.log_text():
        assert time.monotonic() < deadline, f"no {text!r} in the broker's log"
        time.sleep(0.05)


def _connections_until_refused(port: int) -> list[RawClient]:
    """Open connections (each answered once) until the broker closes a new one."""
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    opened = []
    for _ in range(LOW_LIMIT):
        client = RawClient(port)
        try:
            client.request(ApiVersionsRequest())
        except ConnectionError:
            client.close()
            return opened
        opened.append(client)
    raise AssertionError(f"{len(opened)} connections and the broker still accepts more")


def test_soft_limit_raised_to_hard_limit_at_start(pool):
    broker = pool.start(limits={resource.RLIMIT_NOFILE: (256, 2048)})
    assert _soft_limit(broker.process.pid) == 2048
    assert "Raised the open-file limit (RLIMIT_NOFILE) from 256 to its hard limit 2048" in (
        broker.log_text()
    )


def test_running_out_of_descriptors_fails_one_request_and_keeps_the_rest(pool, topic_name):
    broker = pool.start(limits={resource.RLIMIT_NOFILE: (LOW_LIMIT, LOW_LIMIT)})
    pid = broker.process.pid
    assert f"Open-file limit (RLIMIT_NOFILE): {LOW_LIMIT}" in broker.log_text()
    kept = topic_name
    # Small segments, so that one produce at the limit needs a new segment (a roll).
    create_topic(broker.bootstrap, kept, config={"segment.bytes": str(SEGMENT_BYTES)})
    stored = [(b"k%d" % i, b"before the limit %d" % i) for i in range(10)]
    produce(broker.bootstrap, kept, stored)

    client = RawClient(broker.port)
    # The message types of an API version load on its first use, which needs a
    # descriptor: this client uses each of its versions once before the limit, as a
    # client that has been running has.
    assert _raw_fetch_batches(client, kept) >= 1
    assert _raw_produce(client, kept, b"before the limit") == (0, len(stored))
    client.request(
        DeleteTopicsRequest(topic_names=("never-there",), timeout=datetime.timedelta(seconds=1))
    )
    # Topics take no descriptor until they are used (storage/idle_files.py): many are made
    # while the descriptors last.
    created = []
    for number in range(3 * LOW_LIMIT):
        name = f"{topic_name}-auto-{number}"
        assert _auto_create(client, name) == 0
        created.append(name)
    # Take the last descriptors with connections, until the broker can accept no more
    # (it closes them at once rather than leaving them hanging).
    extra = _connections_until_refused(broker.port)
    assert broker.process.poll() is None

    # A topic needs a descriptor or two while it is made: at the limit, its creation fails
    # alone, leaving no partition directory and no open descriptor, again and again.
    failed = f"{topic_name}-at-the-limit"
    data_dir = broker.data_dir
    fds_before = _settled_fds(pid)
    for _ in range(5):
        assert _auto_create(client, failed) == KAFKA_STORAGE_ERROR
        assert _settled_fds(pid) == fds_before
        assert not (data_dir / f"{failed}-0").exists()
    assert "Too many open files" in broker.log_text()

    # A version no client used before cannot be loaded at the limit: that connection is
    # closed with a line saying why, and the broker goes on.
    from kio.schema.list_groups.v0.request import ListGroupsRequest

    first_use = extra.pop()
    with pytest.raises(ConnectionError):
        first_use.request(ListGroupsRequest())
    first_use.close()
    _wait_for_log(broker, "cannot load the schema of LIST_GROUPS v0")
    # Until another descriptor goes, the broker stays at its limit.
    extra.append(RawClient(broker.port))

    # The connection in hand is still served: the kept topic takes and returns records,
    # and a batch that needs a new segment (three more files) fails alone, leaving the
    # log as it was.
    assert _raw_produce(client, kept, b"at the limit") == (0, len(stored) + 1)
    segments_before = sorted((data_dir / f"{kept}-0").iterdir())
    fds_full = _open_fds(pid)
    assert _raw_produce(client, kept, BIG)[0] == KAFKA_STORAGE_ERROR
    assert sorted((data_dir / f"{kept}-0").iterdir()) == segments_before
    assert _open_fds(pid) == fds_full
    assert _raw_fetch_batches(client, kept) >= 2  # the producer's batch(es) and more

    # Closing connections frees descriptors: the roll and the creation that failed
    # now succeed.
    client.close()
    for connection in extra:
        connection.close()
    produce(broker.bootstrap, kept, [(b"k", BIG)])
    values = [m.value() for m in consume_all(broker.bootstrap, kept, len(stored) + 3)]
    assert values == [v for _, v in stored] + [b"before the limit", b"at the limit", BIG]
    assert len(list((data_dir / f"{kept}-0").glob("*.log"))) == 2
    assert broker.process.poll() is None
    with RawClient(broker.port) as again:
        assert _auto_create(again, failed) == 0
    assert all((data_dir / f"{name}-0").is_dir() for name in created)
    # What could not be removed at the limit (renamed `-delete`) is removed once it can.
    deadline = time.monotonic() + 30
    while any(p.name.endswith("-delete") for p in data_dir.iterdir()):
        assert time.monotonic() < deadline, sorted(p.name for p in data_dir.iterdir())
        time.sleep(0.1)


def _produce_to_each(bootstrap: str, topic: str, partitions: int, prefix: bytes) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition in range(partitions):
        producer.produce(topic, b"%s %d" % (prefix, partition), key=b"k", partition=partition)
    assert producer.flush(30) == 0


def test_idle_partitions_let_their_descriptors_go(pool, topic_name):
    """A partition's files are opened when it is used and closed once it has been idle for
    brook.log.file.idle.close.ms; used again, they open again and lose nothing."""
    broker = pool.start({"brook.log.file.idle.close.ms": 3000})
    pid = broker.process.pid
    partitions = 60
    baseline = _open_fds(pid)
    create_topic(broker.bootstrap, topic_name, partitions=partitions)
    # Made, not used: no descriptor each (a few for the broker's own work at most).
    made = _open_fds(pid)
    assert made < baseline + 10
    _produce_to_each(broker.bootstrap, topic_name, partitions, b"first")
    # Each one's log at least (on a slow machine the first may be idle again already).
    assert _open_fds(pid) >= made + partitions // 2
    deadline = time.monotonic() + 30
    while _open_fds(pid) >= made + 10:
        assert time.monotonic() < deadline, f"{_open_fds(pid)} descriptors, {made} before"
        time.sleep(0.1)
    _produce_to_each(broker.bootstrap, topic_name, partitions, b"second")
    for partition in (0, partitions // 2, partitions - 1):
        values = [m.value() for m in consume_all(broker.bootstrap, topic_name, 2, partition)]
        assert values == [b"first %d" % partition, b"second %d" % partition]
