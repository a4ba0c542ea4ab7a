"""Every length in a message checked against the bytes left, before kio's reader sees it.

kio's native reader (0.6.5) reserves room for a whole array as soon as it has read the
array's length, before it reads a single element: a 20-byte Metadata v12 request whose
compact array length is the varint `ff ff ff ff 0f` makes it ask for 32 GiB, and the
allocation failure aborts the process (Rust cannot report it as an exception). Kafka's
generated readers refuse a collection longer than the bytes that remain, and the broker
closes the connection. Brook does the same here, one step earlier: it walks the message
by its schema (kio's dataclass fields and their `kafka_type`, read through
`kio.serial._introspect` exactly as kio's reader reads them), following every string,
bytes, array and tagged-field length, and refuses an array whose elements cannot fit in
what is left. Strings and bytes need no check of their own (kio slices them only after
checking the end), but their lengths move the walk, so they are followed.

The bound is at least as strict as Kafka's (count > bytes left): an element takes at
least its smallest encoding, so `count * smallest > bytes left` can never hold for a
message that parses. The walker of each entity type is built once and cached: runs of
fixed-size fields become one addition, an array of fixed-size entities one
multiplication, so a Produce or Fetch request costs a few microseconds (bench figures in
the hardening note).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .errors import InvalidRequestError

# A walker reads one value starting at `pos` and returns where the next one starts.
Walker = Callable[[bytes, int, int], int]

_INT16 = struct.Struct(">h").unpack_from
_INT32 = struct.Struct(">i").unpack_from

# The encoded size of every fixed-size kafka_type kio reads.
_FIXED_SIZES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_VARIABLE_TYPES = frozenset({"string", "bytes", "records"})
_MAX_VARINT_BYTES = 5


def check_lengths(entity_type: type, data: bytes, offset: int) -> int:
    """Walk one `entity_type` in `data` from `offset`; return the offset after it.

    Raises InvalidRequestError for an array that cannot fit in the bytes left, or for
    a message that ends before its schema does.
    """
    try:
        return _entity(entity_type).walk(data, offset, len(data))
    except (IndexError, struct.error):
        raise InvalidRequestError(
            f"{entity_type.__name__} ends before its last field ({len(data)} bytes)"
        ) from None


def read_unsigned_varint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes, as Kafka (and kio) read them."""
    byte = data[pos]
    if byte < 0x80:  # lengths below 128, the common case, in one step
        return byte, pos + 1
    value = byte & 0x7F
    for index in range(1, _MAX_VARINT_BYTES):
        byte = data[pos + index]
        value |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            return value, pos + index + 1
    raise InvalidRequestError(f"varint at byte {pos} is longer than {_MAX_VARINT_BYTES} bytes")


@dataclass(frozen=True, slots=True)
class _Shape:
    """How one value is walked: its smallest encoding, its size if always the same, and
    (for variable sizes) the function that walks it."""

    min_size: int
    fixed_size: int | None
    walk: Walker


def _fixed(size: int) -> _Shape:
    return _Shape(size, size, lambda data, pos, end: pos + size)


def _too_long(path: str, count: int, min_size: int, left: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"{path}: an array of {count} elements needs at least {count * min_size} bytes,"
        f" but only {left} remain"
    )


# --- primitives ---------------------------------------------------------------------


def _compact_bytes(data: bytes, pos: int, end: int) -> int:
    # The length is stored plus one (0 is null), so a one-byte length L ends at pos + L.
    length = data[pos]
    if length < 0x80:
        return pos + length if length else pos + 1
    length, pos = read_unsigned_varint(data, pos)
    return pos + length - 1


def _legacy_string(data: bytes, pos: int, end: int) -> int:
    (length,) = _INT16(data, pos)
    return pos + 2 + length if length > 0 else pos + 2


def _legacy_bytes(data: bytes, pos: int, end: int) -> int:
    (length,) = _INT32(data, pos)
    return pos + 4 + length if length > 0 else pos + 4


def _primitive(kafka_type: str, flexible: bool) -> _Shape:
    if kafka_type in _FIXED_SIZES:
        return _fixed(_FIXED_SIZES[kafka_type])
    if kafka_type not in _VARIABLE_TYPES:
        raise TypeError(f"no length rule for kafka_type {kafka_type!r}")
    if flexible:
        return _Shape(1, None, _compact_bytes)
    if kafka_type == "string":
        return _Shape(2, None, _legacy_string)
    return _Shape(4, None, _legacy_bytes)


# --- arrays and entities ------------------------------------------------------------


def _array(element: _Shape, flexible: bool, path: str) -> _Shape:
    min_size = element.min_size or 1
    fixed_size = element.fixed_size
    walk_element = element.walk

    def walk(data: bytes, pos: int, end: int) -> int:
        if flexible:
            count = data[pos]
            if count < 0x80:
                pos += 1
            else:
                count, pos = read_unsigned_varint(data, pos)
            count -= 1  # compact arrays store count + 1; 0 is null
        else:
            (count,) = _INT32(data, pos)
            pos += 4
        if count <= 0:
            return pos  # empty, null, or a negative length kio refuses itself
        if count * min_size > end - pos:
            raise _too_long(path, count, min_size, end - pos)
        if fixed_size is not None:
            return pos + count * fixed_size
        for _ in range(count):
            pos = walk_element(data, pos, end)
        return pos

    return _Shape(1 if flexible else 4, None, walk)


def _nullable_entity(entity: _Shape) -> _Shape:
    walk_entity = entity.walk

    def walk(data: bytes, pos: int, end: int) -> int:
        # kio reads an int8 marker: -1 is null, anything else is followed by the struct.
        if data[pos] == 0xFF:
            return pos + 1
        return walk_entity(data, pos + 1, end)

    return _Shape(1, None, walk)


def _tagged_fields(tagged: dict[int, _Shape], path: str) -> Walker:
    def walk(data: bytes, pos: int, end: int) -> int:
        count = data[pos]
        if count == 0:
            return pos + 1
        count, pos = read_unsigned_varint(data, pos)
        if count * 2 > end - pos:  # a tag and a size, at least a byte each
            raise InvalidRequestError(
                f"{path}: {count} tagged fields cannot fit in {end - pos} bytes"
            )
        for _ in range(count):
            tag, pos = read_unsigned_varint(data, pos)
            size, pos = read_unsigned_varint(data, pos)
            known = tagged.get(tag)
            # kio reads a known tag by its schema (not by its size) and refuses an
            # unknown one; the walk follows what kio will read.
            pos = known.walk(data, pos, end) if known is not None else pos + size
        return pos

    return walk


@cache
def _entity(entity_type: type) -> _Shape:
    """The walker of a kio entity type, built once."""
    flexible: bool = entity_type.__flexible__
    name = entity_type.__name__
    # Each step: the fixed bytes before a variable-size field, then that field's walker.
    steps: list[tuple[int, Walker]] = []
    tagged: dict[int, _Shape] = {}
    fixed_run = 0
    min_size = 0
    for field in fields(entity_type):
        tag = get_field_tag(field)
        shape = _field(field, flexible, f"{name}.{field.name}")
        if tag is not None:
            tagged[int(tag)] = shape
            continue
        min_size += shape.min_size
        if shape.fixed_size is not None:
            fixed_run += shape.fixed_size
        else:
            steps.append((fixed_run, shape.walk))
            fixed_run = 0
    trailing = fixed_run
    if not flexible and not steps:
        return _fixed(trailing)
    walk_tags = _tagged_fields(tagged, name) if flexible else None
    if flexible:
        min_size += 1  # the tagged-field count

    def walk(data: bytes, pos: int, end: int) -> int:
        for skip, walk_field in steps:
            pos = walk_field(data, pos + skip, end)
        pos += trailing
        if walk_tags is not None:
            pos = walk_tags(data, pos, end)
        return pos

    return _Shape(min_size, None, walk)


def _field(field: Any, flexible: bool, path: str) -> _Shape:
    # A tagged string is read as non-null by kio and a plain one may be null; both walk
    # the same way, so optionality matters only for a struct's null marker.
    kind = classify_field(field)
    if isinstance(kind, EntityTupleField):
        return _array(_entity(kind.type_), flexible, path)
    if isinstance(kind, EntityField):
        entity = _entity(kind.type_)
        return _nullable_entity(entity) if is_optional(field) else entity
    element = _primitive(get_schema_field_type(field), flexible)
    if isinstance(kind, PrimitiveTupleField):
        return _array(element, flexible, path)
    return element
