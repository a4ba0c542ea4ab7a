"""Requests with a null where Kafka's schema forbids one, for every served API version.

kio's writer refuses to put a null into a non-nullable string (and a client library never
would), so these bodies are written here, field by field, with kio's own field writers for
everything except the one field made null. A "valid" request is built from the schema
alone: one element in every array, so that the fields of nested entities can be reached.
"""

from __future__ import annotations

import datetime
import io
import uuid
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import (
    write_compact_array_length,
    write_int8,
    write_int16,
    write_int32,
    write_legacy_array_length,
    write_unsigned_varint,
)
from kio.static.primitive import i8, i16, i32, uvarint

from brook.protocol.api_table import SERVED, request_type

_EXAMPLE_PRIMITIVES: dict[str, Any] = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint8": 0,
    "uint16": 0,
    "uint32": 0,
    "uint64": 0,
    "float64": 0.0,
    "string": "null-fields",
    "bytes": b"",
    "records": b"",
    "uuid": uuid.UUID(int=0),
    "bool": False,
    "error_code": ErrorCode.none,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
}

# Wire kinds that have a null encoding (a negative length, or 0 in the compact form).
_NULLABLE_KINDS = {"string", "bytes", "records"}


def served_versions() -> list[tuple[int, int]]:
    return [
        (int(api_key), version)
        for api_key, served in SERVED.items()
        for version in range(served.min_version, served.max_version + 1)
    ]


def example(entity_type: type) -> Any:
    """An instance with every required field set to a plain value, arrays of one element,
    and every nullable struct present (non_nullable_paths steps into it)."""
    values = {}
    for field in fields(entity_type):
        kind = classify_field(field)
        defaulted = field.default is not MISSING or field.default_factory is not MISSING
        if defaulted and not (isinstance(kind, EntityField) and field.default is None):
            continue
        match kind:
            case EntityTupleField(inner):
                values[field.name] = (example(inner),)
            case EntityField(inner):
                values[field.name] = example(inner)
            case PrimitiveTupleField():
                values[field.name] = (_EXAMPLE_PRIMITIVES[get_schema_field_type(field)],)
            case PrimitiveField():
                values[field.name] = _EXAMPLE_PRIMITIVES[get_schema_field_type(field)]
    return entity_type(**values)


def non_nullable_paths(entity_type: type, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths to every non-tagged field that may not be null but has a null encoding.

    A path steps into the first element of an array of entities and into nested entities.
    """
    paths = []
    for field in fields(entity_type):
        if get_field_tag(field) is not None:
            continue  # tagged fields are absent rather than null
        kind = classify_field(field)
        path = (*prefix, field.name)
        is_array = kind.is_array
        if not is_optional(field) and (
            is_array or get_schema_field_type_or_none(field) in _NULLABLE_KINDS
        ):
            paths.append(path)
        if isinstance(kind, EntityTupleField | EntityField):
            paths += non_nullable_paths(kind.type_, path)
    return paths


def get_schema_field_type_or_none(field: Any) -> str | None:
    try:
        return get_schema_field_type(field)
    except Exception:
        return None  # an entity field has no kafka_type


def encode(entity: Any, null_path: tuple[str, ...] = ()) -> bytes:
    """The body of `entity` as kio writes it, except a null at `null_path`."""
    buffer = io.BytesIO()
    _write(buffer, entity, null_path)
    return buffer.getvalue()


def _write(buffer: io.BytesIO, entity: Any, null_path: tuple[str, ...]) -> None:
    entity_type = type(entity)
    flexible = entity_type.__flexible__
    for field in fields(entity_type):
        if get_field_tag(field) is not None:
            continue  # tagged fields keep their defaults: none are written
        value = getattr(entity, field.name)
        if not null_path or null_path[0] != field.name:
            get_field_writer(field, flexible, is_request_header=False, is_tag=False)(buffer, value)
            continue
        rest = null_path[1:]
        if not rest:
            _write_null(buffer, field, flexible)
            continue
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            if flexible:
                write_compact_array_length(buffer, len(value))
            else:
                write_legacy_array_length(buffer, i32(len(value)))
            _write(buffer, value[0], rest)
            for item in value[1:]:
                _write(buffer, item, ())
        else:
            assert isinstance(kind, EntityField)
            if is_optional(field):
                write_int8(buffer, i8(1))  # KIP-893 marker of a present nullable struct
            _write(buffer, value, rest)
    if flexible:
        write_unsigned_varint(buffer, uvarint(0))  # no tagged fields


def _write_null(buffer: io.BytesIO, field: Any, flexible: bool) -> None:
    if flexible:
        write_unsigned_varint(buffer, uvarint(0))  # compact length N+1: 0 is null
    elif classify_field(field).is_array or get_schema_field_type(field) != "string":
        write_int32(buffer, i32(-1))  # arrays and bytes: int32 length
    else:
        write_int16(buffer, i16(-1))  # strings: int16 length


def null_cases() -> list[tuple[int, int, tuple[str, ...]]]:
    """(api key, version, path) for every non-nullable field of every served request."""
    cases = []
    for api_key, version in served_versions():
        body_type = request_type(api_key, version)
        assert is_dataclass(body_type)
        cases += [(api_key, version, path) for path in non_nullable_paths(body_type)]
    return cases
