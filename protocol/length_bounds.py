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
message that parses.

The walk runs on every request, so it is compiled: the first time a message type is
seen, its walk is written out as the source of one Python function (fields in wire
order, nested structs inline, runs of fixed-size fields folded into one addition, an
array of fixed-size elements into one multiplication, one- and two-byte varints
inline) and compiled. `walk_source` shows what a type compiles to.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from types import NoneType, UnionType
from typing import Any, NamedTuple, Union, get_args, get_origin

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.protocol import Entity

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


def check_lengths(entity_type: type[Entity], data: bytes, offset: int) -> int:
    """Walk one `entity_type` in `data` from `offset`; return the offset after it.

    Raises InvalidRequestError for an array that cannot fit in the bytes left, or for
    a message that ends before its schema does.
    """
    try:
        return _walk(entity_type).function(data, offset, len(data))
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


def _too_long(path: str, count: int, min_size: int, left: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"{path}: an array of {count} elements needs at least {count * min_size} bytes,"
        f" but only {left} remain"
    )


def _null_array(path: str) -> InvalidRequestError:
    return InvalidRequestError(f"non-nullable field {path} was serialized as null")


def _nullable_array(field: Any) -> bool:
    """Whether an array field may be null (`tuple[...] | None`; kio's `is_optional` also
    says so for an array of nullable elements)."""
    return get_origin(field.type) in (UnionType, Union) and NoneType in get_args(field.type)


def _too_many_tags(path: str, count: int, left: int) -> InvalidRequestError:
    return InvalidRequestError(f"{path}: {count} tagged fields cannot fit in {left} bytes")


class _Sizes(NamedTuple):
    """The smallest encoding of an entity type, and its size if it never varies."""

    min_size: int
    fixed_size: int | None


class _Walk(NamedTuple):
    sizes: _Sizes
    function: Walker
    source: str


def walk_source(entity_type: type[Entity]) -> str:
    """The generated source of an entity type's walk (for reading and debugging)."""
    return _walk(entity_type).source


@cache
def _walk(entity_type: type[Entity]) -> _Walk:
    return _Compiler(entity_type).compile()


@cache
def _sizes(entity_type: type[Entity]) -> _Sizes:
    flexible: bool = entity_type.__flexible__
    min_size = 1 if flexible else 0  # the tagged-field count
    fixed = not flexible
    for field in fields(entity_type):
        if get_field_tag(field) is not None:
            continue
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            min_size += 1 if flexible else 4
            fixed = False
        elif isinstance(kind, EntityField):
            inner = _sizes(kind.type_)
            nullable = is_optional(field)
            min_size += 1 if nullable else inner.min_size
            fixed = fixed and not nullable and inner.fixed_size is not None
        else:
            kafka_type = get_schema_field_type(field)
            size = _FIXED_SIZES.get(kafka_type)
            min_size += size if size is not None else _variable_min_size(kafka_type, flexible)
            fixed = fixed and size is not None
    return _Sizes(min_size, min_size if fixed else None)


def _variable_min_size(kafka_type: str, flexible: bool) -> int:
    if kafka_type not in _VARIABLE_TYPES:
        raise TypeError(f"no length rule for kafka_type {kafka_type!r}")
    if flexible:
        return 1
    return 2 if kafka_type == "string" else 4


class _Compiler:
    """Writes the walk of one message type as the source of one Python function.

    The generated code reads `data` (the message) from `pos`, never relies on anything
    past `end`, and leaves `pos` after the value it walked. `n` holds the length just
    read (a nested loop has already taken its count when `n` is reused), `m` a string
    length inside a loop over a string array, `tag` and `size` a tagged field's header.
    """

    def __init__(self, entity_type: type[Entity]) -> None:
        self.entity_type = entity_type
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {
            "varint": read_unsigned_varint,
            "int16": _INT16,
            "int32": _INT32,
            "too_long": _too_long,
            "too_many_tags": _too_many_tags,
            "null_array": _null_array,
        }
        self.pending = 0  # fixed-size bytes walked past, not yet added to pos

    def compile(self) -> _Walk:
        sizes = _sizes(self.entity_type)
        name = self.entity_type.__name__
        if sizes.fixed_size is not None:
            self.lines.append(f"    pos += {sizes.fixed_size}")
        else:
            self._entity(self.entity_type, "    ")
        source = "\n".join([f"def walk(data, pos, end):  # {name}", *self.lines, "    return pos"])
        namespace = dict(self.namespace)
        exec(compile(source, f"<length walk of {name}>", "exec"), namespace)
        return _Walk(sizes, namespace["walk"], source)

    def _emit(self, indent: str, *lines: str) -> None:
        self.flush(indent)
        self.lines.extend(indent + line for line in lines)

    def flush(self, indent: str) -> None:
        if self.pending:
            self.lines.append(f"{indent}pos += {self.pending}")
            self.pending = 0

    def _constant(self, value: str) -> str:
        name = f"path_{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def _entity(self, entity_type: type[Entity], indent: str) -> None:
        flexible: bool = entity_type.__flexible__
        tagged = {}
        for field in fields(entity_type):
            tag = get_field_tag(field)
            if tag is None:
                self._field(entity_type, field, indent)
            else:
                tagged[int(tag)] = field
        if flexible:
            self._tagged_fields(entity_type, tagged, indent)
        self.flush(indent)

    def _field(self, entity_type: type[Entity], field: Any, indent: str) -> None:
        flexible: bool = entity_type.__flexible__
        path = f"{entity_type.__name__}.{field.name}"
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            self._array(kind.type_, None, flexible, _nullable_array(field), path, indent)
        elif isinstance(kind, PrimitiveTupleField):
            kafka_type = get_schema_field_type(field)
            self._array(None, kafka_type, flexible, _nullable_array(field), path, indent)
        elif isinstance(kind, EntityField):
            self._struct(kind.type_, is_optional(field), indent)
        else:
            self._primitive(get_schema_field_type(field), flexible, "n", indent)

    def _primitive(self, kafka_type: str, flexible: bool, var: str, indent: str) -> None:
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            self.pending += size
        elif flexible:
            _variable_min_size(kafka_type, flexible)  # refuses a type with no rule
            # Stored as length + 1 (0 is null): a one-byte length L ends at pos + L, a
            # two-byte one (127 bytes to 16 KiB, e.g. most record sets) at pos + 1 + L.
            self._emit(
                indent,
                f"{var} = data[pos]",
                f"if {var} < 0x80:",
                f"    pos += {var} or 1",
                "elif data[pos + 1] < 0x80:",
                f"    pos += 1 + ({var} & 0x7F | data[pos + 1] << 7)",
                "else:",
                f"    {var}, pos = varint(data, pos)",
                f"    pos += {var} - 1",
            )
        else:
            size = _variable_min_size(kafka_type, flexible)
            reader = "int16" if size == 2 else "int32"
            self._emit(
                indent,
                f"{var} = {reader}(data, pos)[0]",
                f"pos += {size} + {var} if {var} > 0 else {size}",
            )

    def _struct(self, entity_type: type[Entity], nullable: bool, indent: str) -> None:
        sizes = _sizes(entity_type)
        if not nullable:
            if sizes.fixed_size is not None:
                self.pending += sizes.fixed_size
            else:
                self._entity(entity_type, indent)
            return
        # kio reads an int8 marker first: -1 is null, anything else precedes the struct.
        self._emit(indent, "if data[pos] == 0xFF:", "    pos += 1", "else:", "    pos += 1")
        self._struct(entity_type, False, indent + "    ")
        self.flush(indent + "    ")

    def _array(
        self,
        element: type | None,
        kafka_type: str | None,
        flexible: bool,
        nullable: bool,
        path: str,
        indent: str,
    ) -> None:
        if element is not None:
            sizes = _sizes(element)
            min_size, fixed_size = sizes.min_size or 1, sizes.fixed_size
        else:
            assert kafka_type is not None
            fixed_size = _FIXED_SIZES.get(kafka_type)
            min_size = fixed_size or _variable_min_size(kafka_type, flexible)
        if flexible:
            self._emit(
                indent,
                "n = data[pos]",
                "if n < 0x80:",
                "    pos += 1",
                "else:",
                "    n, pos = varint(data, pos)",
                "n -= 1  # stored as count + 1; 0 is null",
            )
        else:
            self._emit(indent, "n = int32(data, pos)[0]", "pos += 4")
        path_name = self._constant(path)
        if not nullable:
            # kio reads null for any array; Kafka's readers refuse it where the schema
            # does not allow it, and handlers rely on getting an array.
            self._emit(indent, "if n == -1:", f"    raise null_array({path_name})")
        # Another negative count is refused by kio itself.
        self._emit(
            indent,
            "if n > 0:",
            f"    if n * {min_size} > end - pos:",
            f"        raise too_long({path_name}, n, {min_size}, end - pos)",
        )
        inner = indent + "    "
        if fixed_size is not None:
            self._emit(inner, f"pos += n * {fixed_size}")
            return
        self._emit(inner, "for _ in range(n):")
        if element is not None:
            self._entity(element, inner + "    ")
        else:
            assert kafka_type is not None
            self._primitive(kafka_type, flexible, "m", inner + "    ")

    def _tagged_fields(
        self, entity_type: type[Entity], tagged: dict[int, Any], indent: str
    ) -> None:
        """The tagged-field section: almost always empty (one zero byte)."""
        self._emit(
            indent,
            "if data[pos] == 0:",
            "    pos += 1",
            "else:",
            "    n, pos = varint(data, pos)",
            "    if n * 2 > end - pos:  # a tag and a size, a byte each at least",
            f"        raise too_many_tags({entity_type.__name__!r}, n, end - pos)",
            "    for _ in range(n):",
            "        tag, pos = varint(data, pos)",
            "        size, pos = varint(data, pos)",
        )
        # kio reads a known tag by its schema, not by its size, and refuses an unknown
        # one: the walk follows what kio will read.
        loop = indent + "        "
        keyword = "if"
        for tag, field in sorted(tagged.items()):
            self._emit(loop, f"{keyword} tag == {tag}:")
            self._field(entity_type, field, loop + "    ")
            self.flush(loop + "    ")
            keyword = "elif"
        if tagged:
            self._emit(loop, "else:", "    pos += size")
        else:
            self._emit(loop, "pos += size")
