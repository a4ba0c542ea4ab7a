"""The response that answers a request with an injected error, without running it.

An API whose response has an error of its own (JoinGroup, InitProducerId, EndTxn, ...)
gets that error with every other field at its "nothing" value (-1 ids, empty strings and
lists), as Kafka's getErrorResponse builds them; FindCoordinator v4+ answers each key
with it. APIs whose errors sit on each partition or topic (PARTITION_LEVEL_APIS) are not
built here: their handlers ask the faults per partition and answer the others normally.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from typing import Any

from brook.protocol.api_table import SERVED, ApiKey, response_type
from brook.protocol.errors import ErrorCode

PARTITION_LEVEL_APIS = frozenset(
    {ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.OFFSET_COMMIT}
)

_NOTHING: dict[str, Any] = {
    "bool": False,
    "bytes": b"",
    "datetime_i64": None,
    "float64": 0.0,
    "int8": -1,
    "int16": -1,
    "int32": -1,
    "int64": -1,
    "records": None,
    "string": "",
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "uint16": 0,
    "uuid": uuid.UUID(int=0),
}


# Errors per group, per key or per topic, built from the request's own list.
_LISTED_APIS = frozenset({ApiKey.FIND_COORDINATOR, ApiKey.OFFSET_FETCH, ApiKey.CREATE_TOPICS})


def can_answer_error(api_key: ApiKey) -> bool:
    """Whether an error can be injected into every served version of the API."""
    if api_key in PARTITION_LEVEL_APIS or api_key in _LISTED_APIS:
        return True
    served = SERVED[api_key]
    return all(
        "error_code" in response_type(api_key, version).__dataclass_fields__
        for version in range(served.min_version, served.max_version + 1)
    )


def error_response(api_key: int, version: int, request: Any, error: ErrorCode) -> Any:
    entity = response_type(api_key, version)
    if api_key == ApiKey.FIND_COORDINATOR and version >= 4:
        coordinator = _element_type(entity, "coordinators")
        return _nothing(
            entity,
            coordinators=tuple(
                _nothing(coordinator, key=key, error_code=error, error_message=error.name.upper())
                for key in request.coordinator_keys
            ),
        )
    if api_key == ApiKey.OFFSET_FETCH:
        return _offset_fetch(entity, version, request, error)
    if api_key == ApiKey.CREATE_TOPICS:
        topic = _element_type(entity, "topics")
        return _nothing(
            entity,
            topics=tuple(
                _nothing(topic, name=item.name, error_code=error, error_message=None)
                for item in request.topics
            ),
        )
    return _nothing(entity, error_code=error)


def _offset_fetch(entity: type, version: int, request: Any, error: ErrorCode) -> Any:
    if version >= 8:
        group = _element_type(entity, "groups")
        return _nothing(
            entity,
            groups=tuple(
                _nothing(group, group_id=item.group_id, error_code=error) for item in request.groups
            ),
        )
    if any(item.name == "error_code" for item in dataclasses.fields(entity)):
        return _nothing(entity, error_code=error)
    # v1: the error sits on each requested partition.
    topic = _element_type(entity, "topics")
    partition = _element_type(topic, "partitions")
    return _nothing(
        entity,
        topics=tuple(
            _nothing(
                topic,
                name=item.name,
                partitions=tuple(
                    _nothing(
                        partition, partition_index=index, committed_offset=-1, error_code=error
                    )
                    for index in item.partition_indexes
                ),
            )
            for item in request.topics or ()
        ),
    )


def _element_type(entity: type, name: str) -> type:
    element: type = typing.get_type_hints(entity)[name].__args__[0]
    return element


def _nothing(entity: type, **given: Any) -> Any:
    """An entity with the given fields and every other required one at its nothing."""
    values = dict(given)
    for item in dataclasses.fields(entity):
        if item.name in values or item.default is not dataclasses.MISSING:
            continue
        kind = item.metadata.get("kafka_type")
        if kind == "error_code":
            values[item.name] = ErrorCode.none
        elif kind in _NOTHING:
            nullable = type(None) in typing.get_args(typing.get_type_hints(entity)[item.name])
            values[item.name] = None if nullable and kind == "string" else _NOTHING[kind]
        else:  # arrays of entities or of primitives
            values[item.name] = ()
    return entity(**values)
