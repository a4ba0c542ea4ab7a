"""The compiled writer writes kio's bytes: for every message type of every version Brook
serves (requests and responses, random examples of each field's wire type), for the
lengths whose varints take one, two and three bytes, and for record sets passed through
a response's chunks without a copy."""

from __future__ import annotations

import datetime
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from integration.kio_strategies import encode, entity
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12 import response as metadata_v12
from kio.static.primitive import Records

from brook.protocol.api_table import SERVED, ApiKey, request_type, response_type
from brook.protocol.compiled_writer import BufferSink, compiled_writer, writer_source

SERVED_VERSIONS = [
    (api, version)
    for api, served in SERVED.items()
    for version in range(served.min_version, served.max_version + 1)
]
# What the request strategies leave out and responses have.
RESPONSE_PRIMITIVES = {
    "error_code": st.sampled_from(list(ErrorCode)),
    "datetime_i64": st.integers(0, 2**41).map(
        lambda ms: datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC)
    ),
}


def compiled(value: object) -> bytes:
    sink = BufferSink()
    compiled_writer(type(value))(sink, value)
    return bytes(sink.current)


@pytest.mark.parametrize(
    ("api", "version"), SERVED_VERSIONS, ids=[f"{a.name}-v{v}" for a, v in SERVED_VERSIONS]
)
def test_every_served_message_is_written_as_kio_writes_it(api, version):
    for message_type in (request_type(api, version), response_type(api, version)):

        @settings(
            max_examples=4,
            derandomize=True,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(entity(message_type, primitives=RESPONSE_PRIMITIVES))
        def same_bytes(message):
            assert compiled(message) == encode(message)

        same_bytes()


@pytest.mark.parametrize("size", [0, 126, 127, 128, 16383, 16384, 70000])
@pytest.mark.parametrize("version", [4, 12])
def test_long_lengths_and_passed_through_record_sets(version, size):
    """Fetch v4 (legacy lengths) and v12 (varints of one to three bytes): strings, arrays
    and record sets of each size (tests/protocol/test_response_chunks.py passes record
    sets through a response's chunks)."""
    response_class = response_type(ApiKey.FETCH, version)
    module = __import__(response_class.__module__, fromlist=["_"])
    records = Records(bytes(range(256)) * (size // 256) + b"r" * (size % 256))
    partition_fields = {
        "partition_index": 1,
        "error_code": ErrorCode.none,
        "high_watermark": 10,
        "last_stable_offset": 10,
        "aborted_transactions": (),
        "records": records,
    }
    if version >= 12:
        partition_fields["log_start_offset"] = 0
        partition_fields["preferred_read_replica"] = -1
    response = response_class(
        throttle_time=datetime.timedelta(0),
        **({"error_code": ErrorCode.none, "session_id": 7} if version >= 7 else {}),
        responses=tuple(
            module.FetchableTopicResponse(
                topic="t" * (size % 300),
                partitions=tuple(
                    module.PartitionData(**partition_fields) for _ in range(min(size, 130) + 1)
                )
                if size < 16383
                else (module.PartitionData(**partition_fields),) * 2,
            )
            for _ in range(2)
        ),
    )
    assert compiled(response) == encode(response)


def test_set_tagged_fields_and_null_structs_are_kios():
    """Tagged fields off their default (Fetch v12's diverging epoch and current leader) and
    a struct set to null (KIP-893, ConsumerGroupHeartbeat's assignment) as kio writes them."""
    fetch = response_type(ApiKey.FETCH, 12)
    module = __import__(fetch.__module__, fromlist=["_"])
    partition = module.PartitionData(
        partition_index=0,
        error_code=ErrorCode.fenced_leader_epoch,
        high_watermark=5,
        last_stable_offset=5,
        log_start_offset=0,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=None,
        diverging_epoch=module.EpochEndOffset(epoch=3, end_offset=4),
        current_leader=module.LeaderIdAndEpoch(leader_id=2, leader_epoch=9),
    )
    response = fetch(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(module.FetchableTopicResponse(topic="t", partitions=(partition,)),),
    )
    assert compiled(response) == encode(response)
    heartbeat = response_type(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0)
    assignment_type = __import__(heartbeat.__module__, fromlist=["_"]).Assignment
    for assignment in (None, assignment_type(topic_partitions=())):
        answer = heartbeat(
            throttle_time=datetime.timedelta(0),
            error_code=ErrorCode.none,
            error_message=None,
            member_id=str(uuid.uuid4()),
            member_epoch=1,
            heartbeat_interval=datetime.timedelta(seconds=5),
            assignment=assignment,
        )
        assert compiled(answer) == encode(answer)


def test_a_partition_of_fixed_fields_is_one_pack():
    """What makes it fast: Metadata v12's partition packs its four fixed fields at once
    and its replica lists as whole arrays."""
    source = writer_source(metadata_v12.MetadataResponse)
    partition = source[source.index("# MetadataResponsePartition") :].split("\n\n")[0]
    assert partition.count("PACK_") == 1
    assert partition.count("ARRAY_") == 3
