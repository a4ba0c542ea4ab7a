"""Well-framed requests with values their schema forbids: a null in a non-nullable field of
every served API version, negative Fetch sizes, a response too big for its version.

The offender gets Kafka's answer (an error code, or the connection closed where Kafka's
parser refuses the request), the broker says why in one WARN line without a traceback, and
a fresh connection is served afterwards.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import socket
import uuid
from collections.abc import Iterator

import pytest
from kio.index import load_response_from_request
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.describe_groups.v0.request import DescribeGroupsRequest as DescribeGroupsV0
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest as DescribeGroupsV5
from kio.schema.join_group.v6 import request as join6

from brook.broker.testing import BrokerThread
from brook.protocol.api_table import ApiKey, request_type
from brook.protocol.client_wire import encode_raw_request

from .clients import create_topic, produce
from .null_fields import encode, example, non_nullable_paths, served_versions
from .raw_client import RawClient, make, nested, topic_id, versions

CLIENT_ID = "bad-fields-test"
UNKNOWN_SERVER_ERROR = -1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    """One broker for the module: every case checks that it still serves afterwards."""
    broker = BrokerThread(tmp_path_factory.mktemp("bad-fields") / "data").start()
    try:
        yield broker
    finally:
        broker.stop()


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    flexible = request_type(api_key, version).__flexible__
    return encode_raw_request(api_key, version, body, 11, CLIENT_ID, flexible=flexible)


def _closed_by_broker(sock: socket.socket) -> bool:
    """True when the broker closes the connection; False when it answers."""
    try:
        return sock.recv(4) == b""
    except ConnectionResetError:
        return True


def _assert_served(broker: BrokerThread) -> None:
    with RawClient(broker.port) as client:
        response = client.request(
            ApiVersionsRequest(client_software_name="after", client_software_version="1")
        )
    assert isinstance(response, ApiVersionsResponse)
    assert response.error_code.value == 0


def _assert_no_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]


_NULL_CASES = [
    pytest.param(api_key, version, id=f"{ApiKey(api_key).name}-v{version}")
    for api_key, version in served_versions()
    if non_nullable_paths(request_type(api_key, version))
]


@pytest.mark.parametrize(("api_key", "version"), _NULL_CASES)
def test_null_in_a_non_nullable_field_closes_the_connection(
    broker: BrokerThread, caplog: pytest.LogCaptureFixture, api_key: int, version: int
) -> None:
    """Kafka's parser refuses a null array or string where the schema has none ("non-nullable
    field X was serialized as null") and the connection is closed: so here, for every such
    field of every served version, with one WARN line and no traceback."""
    caplog.set_level(logging.WARNING)
    body_type = request_type(api_key, version)
    valid = example(body_type)
    name = ApiKey(api_key).name
    for path in non_nullable_paths(body_type):
        caplog.clear()
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
            sock.sendall(_frame(api_key, version, encode(valid, path)))
            assert _closed_by_broker(sock), f"{name} v{version} with {path} null was answered"
            client_port = sock.getsockname()[1]
        [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        # Arrays are named as Kafka names them; kio's reader refuses a null string itself.
        # (the field is named after the entity that holds it)
        reason = f".{path[-1]} was serialized as null"
        named = "non-nullable field " in warning and reason in warning
        assert named or "Unexpectedly read null" in warning, (path, warning)
        assert f"{name} v{version}" in warning
        assert f"127.0.0.1:{client_port}" in warning
        assert repr(CLIENT_ID) in warning
        _assert_no_error_logged(caplog)
    _assert_served(broker)


# --- Fetch with negative sizes ------------------------------------------------------------


def _fetch(
    version: int, topic: str, topic_id: uuid.UUID, max_bytes: int, partition_max_bytes: int
) -> object:
    fetch_type = request_type(ApiKey.FETCH, version)
    partition = make(
        nested(fetch_type, "FetchPartition"),
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=partition_max_bytes,
    )
    return make(
        fetch_type,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            make(
                nested(fetch_type, "FetchTopic"),
                topic=topic,
                topic_id=topic_id,
                partitions=(partition,),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )


@pytest.fixture(scope="module")
def loaded_topic(broker: BrokerThread) -> tuple[str, uuid.UUID]:
    topic = "negative-sizes"
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [(b"k", b"stored")])
    with RawClient(broker.port) as client:
        return topic, topic_id(client, topic)


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
@pytest.mark.parametrize(
    ("max_bytes", "partition_max_bytes"),
    [(1_000_000, -1), (-1, 1_000_000), (-(2**31), -(2**31))],
    ids=["partition-max-bytes", "max-bytes", "both-int-min"],
)
def test_negative_fetch_sizes_get_unknown_server_error(
    broker: BrokerThread,
    loaded_topic: tuple[str, uuid.UUID],
    caplog: pytest.LogCaptureFixture,
    version: int,
    max_bytes: int,
    partition_max_bytes: int,
) -> None:
    """Kafka's log read refuses a negative size, and the partition is answered
    UNKNOWN_SERVER_ERROR with unknown offsets; the connection stays open and serves the
    next Fetch."""
    caplog.set_level(logging.WARNING)
    topic, topic_id = loaded_topic
    with RawClient(broker.port, client_id=CLIENT_ID) as client:
        bad = client.request(_fetch(version, topic, topic_id, max_bytes, partition_max_bytes))
        [partition] = bad.responses[0].partitions
        assert partition.error_code.value == UNKNOWN_SERVER_ERROR
        assert partition.high_watermark == -1
        assert getattr(partition, "log_start_offset", -1) == -1  # from v5
        assert not partition.records
        good = client.request(_fetch(version, topic, topic_id, 1_000_000, 1_000_000))
        [partition] = good.responses[0].partitions
        assert partition.error_code.value == 0
        assert b"stored" in partition.records
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(f"{topic}-0" in m and "invalid max size" in m for m in warnings), warnings
    _assert_no_error_logged(caplog)


# --- a response its version cannot carry ---------------------------------------------------


@pytest.mark.brook_config(group_initial_rebalance_delay_ms=0)
def test_response_too_big_for_its_version_closes_only_that_connection(
    brook_broker: BrokerThread, caplog: pytest.LogCaptureFixture
) -> None:
    """A member joining with JoinGroup v6 (compact strings) may name a protocol type longer
    than DescribeGroups v0 (int16-length strings) can carry. That response cannot be
    encoded: the connection asking for it is closed with a WARN line, and is not left
    hanging; the group stays describable with a version that can carry it."""
    caplog.set_level(logging.WARNING)
    protocol_type = "t" * 40_000
    join = join6.JoinGroupRequest(
        group_id="long-protocol-type",
        session_timeout=datetime.timedelta(seconds=30),
        rebalance_timeout=datetime.timedelta(seconds=30),
        member_id="",
        group_instance_id=None,
        protocol_type=protocol_type,
        protocols=(join6.JoinGroupRequestProtocol(name="range", metadata=b""),),
    )
    with RawClient(brook_broker.port, client_id=CLIENT_ID) as member:
        first = member.request(join)
        assert first.error_code.value == 79  # MEMBER_ID_REQUIRED
        joined = member.request(dataclasses.replace(join, member_id=first.member_id))
        assert joined.error_code.value == 0
    with RawClient(brook_broker.port, client_id=CLIENT_ID) as describer:
        describer.send(DescribeGroupsV0(groups=("long-protocol-type",)))
        assert _closed_by_broker(describer.sock)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("DESCRIBE_GROUPS v0" in m and "String is too long" in m for m in warnings), warnings
    _assert_no_error_logged(caplog)
    with RawClient(brook_broker.port) as client:
        request = DescribeGroupsV5(
            groups=("long-protocol-type",), include_authorized_operations=False
        )
        described = client.request(request)
        assert type(described) is load_response_from_request(request)
        assert described.groups[0].protocol_type == protocol_type
