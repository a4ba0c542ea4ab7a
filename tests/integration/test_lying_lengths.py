"""A request whose length lies closes its connection and nothing else: the broker runs on
(a subprocess, so an abort would show), answers new connections, and keeps its data.

Before the length walk, a 20-byte Metadata v12 request whose compact array length is
`ff ff ff ff 0f` made kio's native reader ask for 32 GiB and abort the broker.
"""

from __future__ import annotations

import datetime
import hashlib
import resource
import socket
import struct
from dataclasses import fields
from pathlib import Path

import pytest

from brook.protocol.api_table import SERVED, ApiKey, request_type

from .clients import consume_all, create_topic, produce
from .lying_lengths import HUGE_VARINT, LyingFrame, every_lying_frame, header
from .processes import Brokers
from .raw_client import RawClient

# Under this address space any allocation kio could be tricked into (16 or 32 GiB)
# fails, also on machines whose overcommit would grant 16 GiB.
ADDRESS_SPACE = 2 << 30


@pytest.fixture
def broker(tmp_path):
    pool = Brokers(tmp_path)
    try:
        yield pool.start(limits={resource.RLIMIT_AS: (ADDRESS_SPACE, ADDRESS_SPACE)})
    finally:
        pool.stop_all()


def _closed_without_answer(port: int, wire: bytes) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(wire)
        try:
            return sock.recv(4) == b""
        except ConnectionResetError:
            return True


def _files(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _api_versions_answered(port: int) -> None:
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    with RawClient(port) as client:
        response = client.request(
            ApiVersionsRequest(client_software_name="t", client_software_version="1")
        )
    assert response.error_code == 0


def _issue_frame(api_key: int, version: int, fields_before: bytes) -> bytes:
    """The issue's reproduction: the first array's compact length is four billion."""
    payload = header(api_key, version, client_id=None) + fields_before + HUGE_VARINT
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    ("name", "wire"),
    [
        ("Metadata v12", _issue_frame(3, 12, b"")),
        # transactional_id null, acks, timeout, then topic_data
        ("Produce v9", _issue_frame(0, 9, b"\x00" + b"\x00\x01" + b"\x00\x00\x75\x30")),
        # key_type, then coordinator_keys
        ("FindCoordinator v4", _issue_frame(10, 4, b"\x00")),
    ],
    ids=["metadata-v12", "produce-v9", "find-coordinator-v4"],
)
def test_issue_requests_close_only_their_connection(broker, name, wire):
    assert len(wire) <= 28  # a 4-byte size, a null client id
    assert _closed_without_answer(broker.port, wire), name
    assert broker.process.poll() is None, broker.log_text()[-2000:]
    _api_versions_answered(broker.port)
    assert "an array of 4294967294 elements" in broker.log_text()


def test_every_lying_length_of_every_served_version(broker, topic_name):
    """Every array, string and bytes length of every served request version, one at a
    time, on its own connection; a topic written before keeps every byte."""
    create_topic(broker.bootstrap, topic_name)
    messages = [(f"k{i}".encode(), f"v{i}".encode() * 10) for i in range(20)]
    produce(broker.bootstrap, topic_name, messages)
    partition_dir = broker.data_dir / f"{topic_name}-0"
    before = _files(partition_dir)

    frames: list[LyingFrame] = every_lying_frame()
    covered = {(f.api, f.version) for f in frames}
    flexible = {
        (api, version)
        for api, served in SERVED.items()
        for version in range(served.min_version, served.max_version + 1)
        if request_type(api, version).__flexible__
        and fields(request_type(api, version))  # ListGroups v3 has no fields
        # DescribeCluster's are all of fixed size (booleans and an int8), as are
        # ControlledShutdown's (a broker id and epoch): nothing to lie in.
        and api not in (ApiKey.DESCRIBE_CLUSTER, ApiKey.CONTROLLED_SHUTDOWN)
    }
    assert flexible <= covered
    kept_open = [str(f) for f in frames if not _closed_without_answer(broker.port, f.wire)]
    assert kept_open == []
    assert broker.process.poll() is None, broker.log_text()[-2000:]

    _api_versions_answered(broker.port)
    assert _files(partition_dir) == before
    consumed = consume_all(broker.bootstrap, topic_name, len(messages))
    assert [(m.key(), m.value()) for m in consumed] == messages
    log = broker.log_text()
    arrays = sum(1 for f in frames if f.kind == "array")
    assert log.count(" elements needs at least ") >= arrays


def test_member_subscription_with_lying_length(tmp_path):
    """A consumer's subscription bytes are read by the coordinator (OffsetDelete asks
    which topics the group uses): a lying topics count there must not abort either."""
    from kio.schema.join_group.v3.request import JoinGroupRequest, JoinGroupRequestProtocol
    from kio.schema.offset_delete.v0.request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )

    pool = Brokers(tmp_path)
    try:
        broker = pool.start(
            {"group.initial.rebalance.delay.ms": 0},
            limits={resource.RLIMIT_AS: (ADDRESS_SPACE, ADDRESS_SPACE)},
        )
        # ConsumerProtocolSubscription v1: int16 version, then an int32 topics count.
        subscription = struct.pack(">hi", 1, 0x7FFFFFFF)
        with RawClient(broker.port) as client:
            joined = client.request(
                JoinGroupRequest(
                    group_id="lying-group",
                    session_timeout=datetime.timedelta(seconds=30),
                    rebalance_timeout=datetime.timedelta(seconds=30),
                    member_id="",
                    protocol_type="consumer",
                    protocols=(JoinGroupRequestProtocol(name="range", metadata=subscription),),
                )
            )
            assert joined.error_code == 0
            deleted = client.request(
                OffsetDeleteRequest(
                    group_id="lying-group",
                    topics=(
                        OffsetDeleteRequestTopic(
                            name="some-topic",
                            partitions=(OffsetDeleteRequestPartition(partition_index=0),),
                        ),
                    ),
                )
            )
        assert deleted.error_code == 0
        assert broker.process.poll() is None, broker.log_text()[-2000:]
        _api_versions_answered(broker.port)
    finally:
        pool.stop_all()
