"""A full disk loses no acknowledged record.

On a small real ext4 filesystem (a loop-mounted image the test makes), producers fill
the disk. The broker must answer KAFKA_STORAGE_ERROR rather than acknowledge what it
could not write, take the log dir offline and, with no dir left, shut down. After space
is freed it starts again (recovering the dir, which got no clean-shutdown marker),
takes more writes, and after a clean stop or a SIGKILL every acknowledged record is
read back at its acknowledged offset. Skipped where loop mounts are not allowed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from kio.index import load_request_schema

from brook.protocol.api_table import ApiKey
from brook.protocol.coordinator_records import group_partition
from brook.protocol.errors import ErrorCode
from brook.protocol.record_batch import Record, build_batch

from .acked import AckRecorder, assert_all_acked_kept, read_all
from .clients import create_topic, produce
from .processes import Brokers
from .raw_client import RawClient, make, produce_request
from .test_groups_protocol import commit_errors, commit_request

PARTITIONS = 3
IMAGE_MB = 64
FILLER_MB = 8


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB ext4 filesystem mounted for this test only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a loop filesystem needs root")
    if shutil.which("mkfs.ext4") is None:
        pytest.skip("mkfs.ext4 (e2fsprogs) is not installed")
    image = tmp_path / "disk.img"
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    with open(image, "wb") as file:
        file.truncate(IMAGE_MB * 1024 * 1024)
    made = _run("mkfs.ext4", "-q", "-F", str(image))
    assert made.returncode == 0, made.stderr
    mounted = _run("mount", "-o", "loop", str(image), str(mount_point))
    if mounted.returncode != 0:
        pytest.skip(f"loop mounts are not allowed here: {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if _run("umount", str(mount_point)).returncode != 0:
            _run("umount", "-l", str(mount_point))


@pytest.fixture
def disk_brokers(small_disk: Path, brokers: Brokers) -> tuple[Brokers, Path]:
    # Asked for after small_disk, so the brokers stop before the disk is unmounted.
    return brokers, small_disk


def _fill(path: Path, megabytes: int) -> None:
    chunk = os.urandom(1024 * 1024)
    with open(path, "wb") as file:
        for _ in range(megabytes):
            file.write(chunk)
        file.flush()
        os.fsync(file.fileno())


@pytest.mark.timeout(240)
@pytest.mark.parametrize("acks", ["all", "1"])
@pytest.mark.parametrize("stop", ["clean", "sigkill"])
def test_full_disk_loses_no_acknowledged_record(disk_brokers, topic_name, acks, stop):
    brokers, disk = disk_brokers
    filler = disk / "filler"
    _fill(filler, FILLER_MB)
    # Small segments, so the disk also fills during rolls and index writes.
    broker = brokers.start({"log.segment.bytes": str(2 * 1024 * 1024)}, data_dir=disk / "data")
    create_topic(broker.bootstrap, topic_name, PARTITIONS)

    # 1. Fill the disk. The broker stops by itself once its only log dir is offline.
    with AckRecorder(
        broker.bootstrap,
        topic_name,
        f"fill-{uuid.uuid4().hex[:6]}",
        partitions=PARTITIONS,
        acks=acks,
        value_size=1000,
        message_timeout_ms=5000,
    ) as filling:
        assert broker.process is not None
        exit_code = broker.process.wait(180)
    acked = list(filling.acked)
    log_text = broker.log_text()
    assert exit_code == 1, log_text[-3000:]
    assert "No space left on device" in log_text
    assert "because all log dirs in" in log_text
    assert "Traceback" not in log_text, log_text[-3000:]
    assert len(acked) > 10_000, "the disk filled before much was written"
    assert filling.failed > 0, "no write was refused, so the disk never filled"

    # 2. Free space and start again: the offline dir is recovered, nothing acked is lost.
    filler.unlink()
    broker = brokers.restart(broker)
    assert "after an unclean shutdown" in broker.log_text()
    assert_all_acked_kept(read_all(broker.bootstrap, topic_name, PARTITIONS), acked)

    # 3. Writes go on right after the recovered tails.
    with AckRecorder(
        broker.bootstrap, topic_name, "after", partitions=PARTITIONS, acks=acks, value_size=100
    ) as after:
        after.wait_for_acks(1000)
    acked += after.acked

    # 4. Stop cleanly or kill, start once more: everything acknowledged is there.
    if stop == "clean":
        assert broker.stop() == 0
    else:
        broker.kill()
    broker = brokers.restart(broker)
    stored = read_all(broker.bootstrap, topic_name, PARTITIONS)
    assert_all_acked_kept(stored, acked)
    assert broker.stop() == 0


def _raw_produce(port: int, topic: str, value: bytes) -> str:
    batch = build_batch([Record(0, int(time.time() * 1000), None, value)])
    with RawClient(port) as client:
        response = client.request(produce_request(topic, 0, batch))
    return response.responses[0].partition_responses[0].error_code.name


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.timeout(240)
def test_a_full_log_dir_goes_offline_and_the_others_keep_serving(disk_brokers, tmp_path):
    brokers, disk = disk_brokers
    full_dir, other_dir = disk / "data", tmp_path / "other"
    both_dirs = {"log.dirs": f"{full_dir},{other_dir}", "offsets.topic.num.partitions": "2"}
    # Space to free before the restart: the records fill the rest. (Without it the dir
    # stays full, and its recovery at the restart may find no byte to write.)
    filler = disk / "filler"
    _fill(filler, 2)
    broker = brokers.start(both_dirs, data_dir=full_dir)
    # New partitions go to the least loaded dir, the first listed on a tie.
    create_topic(broker.bootstrap, "filling", 1)
    create_topic(broker.bootstrap, "safe", 1)
    assert (full_dir / "filling-0").is_dir() and (other_dir / "safe-0").is_dir()
    # A group whose offsets partition lands in the dir that will fill.
    group = next(f"g{i}" for i in range(100) if group_partition(f"g{i}", 2) == 0)
    with RawClient(broker.port) as client:
        committed = commit_errors(client.request(commit_request(group, {("safe", 0): 1})))
    assert committed == {("safe", 0): ErrorCode.none}
    assert (full_dir / "__consumer_offsets-0").is_dir()

    with AckRecorder(
        broker.bootstrap,
        "filling",
        "fill",
        partitions=1,
        acks="all",
        value_size=1000,
        message_timeout_ms=3000,
    ) as filling:
        _wait_for(lambda: "taking log dir" in broker.log_text(), "the dir never went offline")
    acked = list(filling.acked)
    assert broker.process is not None and broker.process.poll() is None, "the broker stopped"

    # The failed dir's partition: no leader, KAFKA_STORAGE_ERROR for writes and moves.
    assert _raw_produce(broker.port, "filling", b"more") == "kafka_storage_error"
    metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    offline = metadata.topics["filling"].partitions[0]
    assert offline.leader == -1 and offline.error.code() == KafkaError.LEADER_NOT_AVAILABLE
    request_type = load_request_schema(ApiKey.DESCRIBE_LOG_DIRS, 4)
    with RawClient(broker.port) as client:
        described = client.request(make(request_type, topics=None))
    errors = {result.log_dir: result.error_code.name for result in described.results}
    assert errors == {str(full_dir): "kafka_storage_error", str(other_dir): "none"}

    # A commit into the failed dir's offsets partition: Kafka's mapping, NOT_COORDINATOR.
    with RawClient(broker.port) as client:
        committed = commit_errors(client.request(commit_request(group, {("safe", 0): 2})))
    assert committed == {("safe", 0): ErrorCode.not_coordinator}

    # The other dir serves as before.
    delivered = produce(broker.bootstrap, "safe", [(None, b"still-%d" % i) for i in range(10)])
    assert [m.offset() for m in delivered] == list(range(10))
    assert _raw_produce(broker.port, "safe", b"raw") == "none"
    assert "Traceback" not in broker.log_text()

    # A clean stop leaves the failed dir unmarked; after space is freed it is recovered.
    assert broker.stop() == 0
    filler.unlink()
    broker = brokers.restart(broker, both_dirs)
    assert_all_acked_kept(read_all(broker.bootstrap, "filling", 1), acked)
    assert [v for _, v in read_all(broker.bootstrap, "safe", 1)[0]][:10] == [
        b"still-%d" % i for i in range(10)
    ]
    assert produce(broker.bootstrap, "filling", [(None, b"after")])[0].offset() == (
        max(offset for _, offset, _ in acked) + 1 if acked else 0
    )
