"""ControlledShutdown (key 7) v1-v3, the message types kio 0.6.5 does not carry.

kio is generated from Kafka 4's message schemas, and Kafka 4 dropped ControlledShutdown
with ZooKeeper. These dataclasses declare Kafka 3.x's ControlledShutdownRequest.json and
ControlledShutdownResponse.json in kio's own form (field order, `kafka_type` metadata,
the header schemas), so that kio's generic reader and writer encode them: no codec is
written by hand. v0 is left out: its request header has no client id, unlike every other
request's (Kafka's own broker sent v0 only before 0.10).
"""

from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.types import BrokerId, TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i64

API_KEY = 7


# --- v1: the broker's id ------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartitionV1:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequestV1:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV1:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    remaining_partitions: tuple[RemainingPartitionV1, ...]


# --- v2: and its broker epoch (KIP-380) -----------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartitionV2:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequestV2:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeaderV1]] = RequestHeaderV1
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV2:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV0]] = ResponseHeaderV0
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    remaining_partitions: tuple[RemainingPartitionV2, ...]


# --- v3: flexible (KIP-482) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RemainingPartitionV3:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    partition_index: i32 = field(metadata={"kafka_type": "int32"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequestV3:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[RequestHeaderV2]] = RequestHeaderV2
    broker_id: BrokerId = field(metadata={"kafka_type": "int32"})
    broker_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponseV3:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(API_KEY)
    __header_schema__: ClassVar[type[ResponseHeaderV1]] = ResponseHeaderV1
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    remaining_partitions: tuple[RemainingPartitionV3, ...]


REQUESTS: dict[int, type] = {
    1: ControlledShutdownRequestV1,
    2: ControlledShutdownRequestV2,
    3: ControlledShutdownRequestV3,
}
RESPONSES: dict[int, type] = {
    1: ControlledShutdownResponseV1,
    2: ControlledShutdownResponseV2,
    3: ControlledShutdownResponseV3,
}
REMAINING_PARTITIONS: dict[int, type] = {
    1: RemainingPartitionV1,
    2: RemainingPartitionV2,
    3: RemainingPartitionV3,
}
