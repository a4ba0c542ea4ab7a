"""The client's framing against the broker's: what one side encodes the other decodes."""

from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4
from kio.schema.metadata.v4.response import MetadataResponse as MetadataResponseV4
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.metadata.v12.response import MetadataResponseBroker
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.types import BrokerId, TopicName

from brook.protocol.client_wire import (
    InvalidResponseError,
    decode_response,
    encode_raw_request,
    encode_request,
    frame_size,
    peek_correlation_id,
    response_type_of,
)
from brook.protocol.wire import decode_request, encode_response


def _name(entity: object) -> str:
    return f"{type(entity).__name__}-v{entity.__version__}"


REQUESTS = [
    ApiVersionsV0(),  # header v1, non-flexible
    ApiVersionsV3(client_software_name="brook-test", client_software_version="1.0"),  # v2
    MetadataV4(topics=None, allow_auto_topic_creation=False),
    MetadataV12(
        topics=(MetadataRequestTopic(topic_id=None, name=TopicName("events")),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=True,
    ),
    ProduceRequest(
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            TopicProduceData(
                name=TopicName("events"),
                partition_data=(PartitionProduceData(index=0, records=b"batch bytes"),),
            ),
        ),
    ),
]


@pytest.mark.parametrize("request_", REQUESTS, ids=_name)
@pytest.mark.parametrize("client_id", ["brook-test", None])
def test_encoded_request_decodes_on_the_broker_side(request_, client_id):
    wire = encode_request(request_, correlation_id=41, client_id=client_id)
    assert frame_size(wire[:4]) == len(wire) - 4
    decoded = decode_request(wire[4:])
    assert decoded.api_key == request_.__api_key__
    assert decoded.api_version == request_.__version__
    assert decoded.correlation_id == 41
    assert decoded.client_id == client_id
    assert decoded.body == request_


RESPONSES = [
    # ApiVersions keeps response header v0 even at its flexible versions.
    ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(ApiVersion(api_key=3, min_version=0, max_version=12),),
        throttle_time=datetime.timedelta(0),
    ),
    MetadataResponseV4(
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id="cluster",
        controller_id=BrokerId(1),
        topics=(),
    ),
    MetadataResponseV12(  # response header v1
        throttle_time=datetime.timedelta(0),
        brokers=(MetadataResponseBroker(node_id=BrokerId(1), host="127.0.0.1", port=9092),),
        cluster_id="cluster",
        controller_id=BrokerId(1),
        topics=(),
    ),
]


@pytest.mark.parametrize(
    "response", RESPONSES, ids=lambda r: f"{type(r).__name__}-v{r.__version__}"
)
def test_broker_response_decodes_on_the_client_side(response):
    wire = encode_response(-7, response)
    assert frame_size(wire[:4]) == len(wire) - 4
    assert peek_correlation_id(wire[4:]) == -7
    decoded = decode_response(wire[4:], type(response))
    assert decoded.correlation_id == -7
    assert decoded.body == response


def test_response_type_matches_the_request():
    request = MetadataV12(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    assert response_type_of(request) is MetadataResponseV12


def test_raw_request_carries_any_api_key_with_header_v1():
    wire = encode_raw_request(999, 3, b"\x01\x02", correlation_id=5, client_id="x")
    assert struct.unpack_from(">ihhi", wire, 0) == (len(wire) - 4, 999, 3, 5)
    assert wire.endswith(b"\x00\x01x\x01\x02")


def test_raw_request_frames_a_valid_body_like_encode_request():
    request = MetadataV4(topics=None, allow_auto_topic_creation=True)
    body = encode_request(request, 9, "c")[4 + 2 + 2 + 4 + 2 + 1 :]
    assert encode_raw_request(3, 4, body, 9, "c") == encode_request(request, 9, "c")


def test_array_length_that_lies_is_refused_before_kio_reads_it():
    response = RESPONSES[2]
    frame = bytearray(encode_response(1, response)[4:])
    # Correlation id, header tags, throttle time; then the brokers' compact array length.
    brokers_at = 4 + 1 + 4
    assert frame[brokers_at] == 2  # one broker, compact encoding
    frame[brokers_at : brokers_at + 1] = b"\xff\xff\xff\xff\x0f"
    with pytest.raises(InvalidResponseError, match="brokers"):
        decode_response(bytes(frame), MetadataResponseV12)


@pytest.mark.parametrize("frame", [b"", b"\x00\x00", b"\x00\x00\x00\x01", b"\x00\x00\x00\x01\x00"])
def test_truncated_response_is_refused(frame):
    with pytest.raises(InvalidResponseError):
        decode_response(frame, MetadataResponseV12)


def test_negative_or_tiny_size_is_refused():
    with pytest.raises(InvalidResponseError):
        frame_size(struct.pack(">i", -1))
    with pytest.raises(InvalidResponseError):
        frame_size(struct.pack(">i", 3))


def test_raw_request_with_flexible_header_decodes_on_the_broker_side():
    request = REQUESTS[3]  # Metadata v12, flexible
    body = encode_request(request, 9, None)[4 + 2 + 2 + 4 + 2 + 1 :]  # after header v2
    decoded = decode_request(encode_raw_request(3, 12, body, 9, "c", flexible=True)[4:])
    assert (decoded.correlation_id, decoded.client_id, decoded.body) == (9, "c", request)
