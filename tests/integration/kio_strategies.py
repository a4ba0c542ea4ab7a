"""Hypothesis strategies for any kio message type, built from its fields' `kafka_type`.

Every served request version is a kio dataclass, so one builder covers them all: a field
is drawn by its wire type (sizes kept small so an example stays a few hundred bytes),
and a caller may steer fields by name (`overrides`, keyed `Entity.field` or just
`field`) towards values the broker knows, such as existing topic names, so that
generated requests reach past the first lookup.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Callable, Mapping
from dataclasses import fields
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.primitive import Records

# A field's own strategy, or a function of the field's kafka_type to one.
Override = st.SearchStrategy[Any] | Callable[[str], st.SearchStrategy[Any] | None]


def _milliseconds(bits: int) -> st.SearchStrategy[datetime.timedelta]:
    # Whole milliseconds within +-2**(bits-1); kio writes timedeltas as milliseconds and
    # cannot write the largest i64 ones (timedelta overflows first).
    limit = min(2 ** (bits - 1) - 1, 10**14)
    return st.integers(-limit, limit).map(lambda ms: datetime.timedelta(milliseconds=ms))


_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    "bool": st.booleans(),
    "int8": st.integers(-(2**7), 2**7 - 1),
    "int16": st.integers(-(2**15), 2**15 - 1),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "uint8": st.integers(0, 2**8 - 1),
    "uint16": st.integers(0, 2**16 - 1),
    "uint32": st.integers(0, 2**32 - 1),
    "uint64": st.integers(0, 2**64 - 1),
    "float64": st.floats(allow_nan=False, allow_infinity=False),
    "string": st.text(max_size=12),
    "bytes": st.binary(max_size=24),
    "records": st.binary(max_size=24).map(Records),
    "uuid": st.uuids(),
    "timedelta_i32": _milliseconds(32),
    "timedelta_i64": _milliseconds(64),
}


def primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    return _PRIMITIVES[kafka_type]


def entity(
    entity_type: type,
    overrides: Mapping[str, Override] | None = None,
    max_items: int = 3,
    primitives: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[Any]:
    """Examples of a kio entity type; `overrides` maps field names (`Entity.field` or
    `field`) to strategies, or to functions of the field's kafka_type; `primitives`
    replaces the strategy of a kafka_type for every field without an override."""
    return _entity(
        entity_type,
        tuple(sorted((overrides or {}).items())),
        max_items,
        tuple(sorted((primitives or {}).items())),
    )


_Items = tuple[tuple[str, Any], ...]


@cache
def _entity(
    entity_type: type, overrides: _Items, max_items: int, primitives: _Items
) -> st.SearchStrategy[Any]:
    kwargs = {}
    for field in fields(entity_type):
        kwargs[field.name] = _field(entity_type, field, overrides, max_items, primitives)
    return st.builds(entity_type, **kwargs)


def _field(
    entity_type: type, field: Any, overrides: _Items, max_items: int, primitives: _Items
) -> st.SearchStrategy[Any]:
    by_name = dict(overrides)
    kind = classify_field(field)
    tagged = get_field_tag(field) is not None
    nullable = is_optional(field) and not tagged
    if isinstance(kind, EntityTupleField | EntityField):
        inner = _entity(kind.type_, overrides, max_items, primitives)
        if isinstance(kind, EntityTupleField):
            inner = st.lists(inner, max_size=max_items).map(tuple)
        return st.none() | inner if nullable else inner
    kafka_type = get_schema_field_type(field)
    element: st.SearchStrategy[Any] | None = None
    override = by_name.get(f"{entity_type.__name__}.{field.name}", by_name.get(field.name))
    if isinstance(override, st.SearchStrategy):
        element = override
    elif override is not None:
        element = override(kafka_type)
    if element is None:
        element = dict(primitives).get(kafka_type)
    if element is None:
        element = primitive(kafka_type)
    if isinstance(kind, PrimitiveTupleField):
        array = st.lists(element, max_size=max_items).map(tuple)
        return st.none() | array if nullable else array
    if nullable:
        return st.none() | element
    return element


def encode(value: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(value))(buffer, value)
    return buffer.getvalue()
