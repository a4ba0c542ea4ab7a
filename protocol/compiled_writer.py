"""Messages encoded by a writer compiled per message type: kio's schema, kio's bytes.

kio's entity_writer (0.6.5) writes a message a field at a time, each through a closure
that packs one value and hands it to the buffer, and gives every flexible struct's
tagged fields a BytesIO of their own: a Metadata response of 9,000 partitions took
about 100 ms to encode, most of what the request cost. Here a message type's writer is
generated, the first time the type is written, as the source of one Python function per
struct type (as length_bounds compiles its walk): runs of fixed-size fields packed by
one struct.Struct, an array of ints packed at once, varints below 128 from a table, an
empty tagged-field section as one zero byte. Tagged fields that are set, which few
messages have, go through kio's own field writers. `writer_source` shows what a type
compiles to; tests/protocol/test_compiled_writer.py holds the bytes equal to kio's for
every message type Brook writes.

A writer writes into a Sink: small values go into its one bytearray (`current`, which
the generated code keeps in a local, so the sink never replaces it), and bytes and
record sets go through `blob`, which may pass a large one through without a copy.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import fields
from functools import cache
from typing import Any, NamedTuple, Protocol

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.errors import OutOfBoundValue
from kio.static.protocol import Entity


class Sink(Protocol):
    """Where a compiled writer writes."""

    @property
    def current(self) -> bytearray: ...

    def blob(self, data: Any) -> None:
        """Bytes or a record set, after its length (a large one may pass through)."""
        ...


class BufferSink:
    """A Sink that keeps everything in its one buffer."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current = bytearray()

    def blob(self, data: Any) -> None:
        self.current += data if isinstance(data, bytes | bytearray | memoryview) else bytes(data)


Writer = Callable[[Sink, Any], None]

# Struct codes of the fixed-size kafka_types, and how a value becomes what is packed
# ({} is the value; None where it is packed as it is).
_FIXED: dict[str, tuple[str, str | None]] = {
    "bool": ("?", None),
    "int8": ("b", None),
    "uint8": ("B", None),
    "int16": ("h", None),
    "uint16": ("H", None),
    # An IntEnum packs as its int.
    "error_code": ("h", None),
    "int32": ("i", None),
    "uint32": ("I", None),
    "int64": ("q", None),
    "uint64": ("Q", None),
    "float64": ("d", None),
    "timedelta_i32": ("i", "round({}.total_seconds() * 1000)"),
    "timedelta_i64": ("q", "round({}.total_seconds() * 1000)"),
    "datetime_i64": ("q", "round({}.timestamp() * 1000)"),
    "uuid": ("16s", "(ZERO_UUID if {0} is None else {0}.bytes)"),
}
_NULLABLE_FIXED = {"datetime_i64": "(-1 if {0} is None else round({0}.timestamp() * 1000))"}
_VARIABLE = frozenset({"string", "bytes", "records"})
ZERO_UUID = bytes(16)
# A varint below 128 is its one byte.
_SMALL_VARINTS = tuple(bytes((n,)) for n in range(128))


def _varint(value: int) -> bytes:
    """An unsigned varint (Kafka's, for lengths and tags)."""
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_INT16 = struct.Struct(">h").pack
_INT32 = struct.Struct(">i").pack
_INT16_MAX = 2**15 - 1
_INT32_MAX = 2**31 - 1


def _legacy_string_length(length: int) -> bytes:
    """A legacy string's int16 length; kio's error (a SerialError, which the broker
    answers by closing the connection) for a string its version cannot carry."""
    if length > _INT16_MAX:
        raise OutOfBoundValue(
            f"String is too long for legacy string format ({length} > {_INT16_MAX})"
        )
    return _INT16(length)


def _legacy_bytes_length(length: int) -> bytes:
    if length > _INT32_MAX:
        raise OutOfBoundValue(
            f"Bytes is too long for legacy string format ({length} > {_INT32_MAX})"
        )
    return _INT32(length)


@cache
def _array_packer(code: str) -> Callable[[Any], bytes]:
    """Packs a whole array of one fixed-size code (a Struct per length, kept)."""
    structs: dict[int, Callable[..., bytes]] = {}

    def pack(values: Any) -> bytes:
        count = len(values)
        packer = structs.get(count)
        if packer is None:
            packer = structs[count] = struct.Struct(f">{count}{code}").pack
        return packer(*values)

    return pack


class _TaggedField(NamedTuple):
    tag: int
    name: str
    default: Any
    write: Callable[[Any, Any], None]


def _tagged_writer(entity_type: type[Entity]) -> Callable[[Any], bytes]:
    """The tagged-field section of a struct that has tagged fields, as kio writes it:
    the fields whose value is not their default, by tag, each with its size."""
    flexible: bool = entity_type.__flexible__
    tagged = sorted(
        (
            _TaggedField(
                int(tag),
                field.name,
                get_tagged_field_default(field),
                get_field_writer(field, flexible, is_request_header=False, is_tag=True),
            )
            for field in fields(entity_type)
            if (tag := get_field_tag(field)) is not None
        ),
        key=lambda tagged_field: tagged_field.tag,
    )

    def write_tags(entity: Any) -> bytes:
        written = []
        for field in tagged:
            value = getattr(entity, field.name)
            if value == field.default:
                continue
            buffer = io.BytesIO()
            field.write(buffer, value)
            encoded = buffer.getvalue()
            written.append(_varint(field.tag) + _varint(len(encoded)) + encoded)
        return _varint(len(written)) + b"".join(written)

    return write_tags


class _Compiled(NamedTuple):
    write: Writer
    source: str


def compiled_writer(entity_type: type[Entity]) -> Writer:
    """The writer of a message type (a response or request body; not a header)."""
    return _compiled(entity_type).write


def writer_source(entity_type: type[Entity]) -> str:
    """The generated source of a message type's writer (for reading and debugging)."""
    return _compiled(entity_type).source


@cache
def _compiled(entity_type: type[Entity]) -> _Compiled:
    if entity_type.__name__ == "RequestHeader":
        # Its client_id is a legacy string even where the header is flexible.
        raise TypeError("request headers are written by kio")
    return _Compiler(entity_type).compile()


class _Compiler:
    """Writes one function per struct type of a message. In the generated code `out` is
    the sink, `buf` its buffer, `e` the struct written; `v`, `x`, `s` and `n` are
    scratch (a value, an array element, encoded bytes, a length)."""

    def __init__(self, entity_type: type[Entity]) -> None:
        self.entity_type = entity_type
        self.namespace: dict[str, Any] = {
            "varint": _varint,
            "SMALL": _SMALL_VARINTS,
            "ZERO_UUID": ZERO_UUID,
            "INT32": _INT32,
            "STRING_LENGTH": _legacy_string_length,
            "BYTES_LENGTH": _legacy_bytes_length,
        }
        self.functions: dict[type, str] = {}
        self.sources: list[str] = []
        self._structs: dict[str, str] = {}

    def compile(self) -> _Compiled:
        entry = self._function(self.entity_type)
        source = "\n\n".join(self.sources)
        namespace = dict(self.namespace)
        name = self.entity_type.__name__
        exec(compile(source, f"<compiled writer of {name}>", "exec"), namespace)
        write_entity = namespace[entry]

        def write(out: Sink, value: Any) -> None:
            write_entity(out, out.current, value)

        return _Compiled(write, source)

    # --- names in the generated code ----------------------------------------------------

    def _constant(self, prefix: str, value: Any) -> str:
        name = f"{prefix}_{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def _struct(self, codes: str) -> str:
        name = self._structs.get(codes)
        if name is None:
            name = self._structs[codes] = self._constant("PACK", struct.Struct(">" + codes).pack)
        return name

    # --- structs ------------------------------------------------------------------------

    def _function(self, entity_type: type[Entity]) -> str:
        name = self.functions.get(entity_type)
        if name is not None:
            return name
        name = self.functions[entity_type] = f"write_{len(self.functions)}"
        lines = [f"def {name}(out, buf, e):  # {entity_type.__name__}"]
        body = _Body(self, lines)
        flexible: bool = entity_type.__flexible__
        tagged = []
        for field in fields(entity_type):
            if get_field_tag(field) is not None:
                tagged.append(field)
            else:
                body.field(field, f"e.{field.name}", flexible, "    ")
        if tagged:
            # Nearly always every tagged field holds its default (the very object the
            # dataclass was given, so `is` settles it): the one zero byte below.
            tags = self._constant("TAGS", _tagged_writer(entity_type))
            defaults = []
            for field in tagged:
                default = self._constant("DEFAULT", get_tagged_field_default(field))
                value = f"e.{field.name}"
                defaults.append(f"({value} is {default} or {value} == {default})")
            body.emit("    ", f"if not ({' and '.join(defaults)}):", f"    buf += {tags}(e)")
            body.emit("    ", "else:")
            body.emit("        ", "buf += b'\\x00'")
        elif flexible:
            body.emit("    ", "buf += b'\\x00'")
        body.flush("    ")
        if len(lines) == 1:
            lines.append("    pass")
        self.sources.append("\n".join(lines))
        return name


class _Body:
    """The lines of one generated function, with the fixed-size values not yet packed
    (folded into one pack call when the next value is not fixed-size)."""

    def __init__(self, compiler: _Compiler, lines: list[str]) -> None:
        self.compiler = compiler
        self.lines = lines
        self.codes = ""
        self.values: list[str] = []

    def emit(self, indent: str, *lines: str) -> None:
        self.flush(indent)
        self.lines.extend(indent + line for line in lines)

    def flush(self, indent: str) -> None:
        if not self.codes:
            return
        pack = self.compiler._struct(self.codes)
        self.lines.append(f"{indent}buf += {pack}({', '.join(self.values)})")
        self.codes, self.values = "", []

    def fixed(self, code: str, expression: str) -> None:
        self.codes += code
        self.values.append(expression)

    def compact_length(self, value: str, indent: str) -> None:
        """A flexible version's length of `value`, stored + 1 (0 is null)."""
        self.emit(indent, f"n = len({value}) + 1", "buf += SMALL[n] if n < 128 else varint(n)")

    def field(self, field: Any, value: str, flexible: bool, indent: str) -> None:
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            element = kind.type_ if isinstance(kind, EntityTupleField) else None
            kafka_type = None if element is not None else get_schema_field_type(field)
            self.array(value, element, kafka_type, flexible, indent)
        elif isinstance(kind, EntityField):
            self.entity(kind.type_, value, is_optional(field), indent)
        else:
            self.primitive(
                get_schema_field_type(field), value, is_optional(field), flexible, indent
            )

    def entity(self, entity_type: type[Entity], value: str, nullable: bool, indent: str) -> None:
        function = self.compiler._function(entity_type)
        if not nullable:
            self.emit(indent, f"{function}(out, buf, {value})")
            return
        # KIP-893: an int8 marker, -1 for null, 1 before the struct.
        self.emit(
            indent,
            f"if {value} is None:",
            "    buf += b'\\xff'",
            "else:",
            "    buf += b'\\x01'",
            f"    {function}(out, buf, {value})",
        )

    def primitive(
        self, kafka_type: str, value: str, nullable: bool, flexible: bool, indent: str
    ) -> None:
        fixed = _FIXED.get(kafka_type)
        if fixed is not None:
            code, conversion = fixed
            if nullable and kafka_type in _NULLABLE_FIXED:
                conversion = _NULLABLE_FIXED[kafka_type]
            self.fixed(code, conversion.format(value) if conversion else value)
            return
        if kafka_type not in _VARIABLE:
            raise TypeError(f"no writer for kafka_type {kafka_type!r}")
        is_string = kafka_type == "string"
        null = (
            "b'\\x00'"
            if flexible
            else ("b'\\xff\\xff'" if is_string else "b'\\xff\\xff\\xff\\xff'")
        )
        inner = indent
        if nullable:
            self.emit(indent, f"if {value} is None:", f"    buf += {null}", "else:")
            inner = indent + "    "
        if is_string:
            self.emit(inner, f"s = {value}.encode()")
            if flexible:
                self.compact_length("s", inner)
                self.emit(inner, "buf += s")
            else:
                self.emit(inner, "buf += STRING_LENGTH(len(s))", "buf += s")
        elif flexible:
            self.compact_length(value, inner)
            self.emit(inner, f"out.blob({value})")
        else:
            self.emit(inner, f"buf += BYTES_LENGTH(len({value}))", f"out.blob({value})")

    def array(
        self,
        value: str,
        element: type[Entity] | None,
        kafka_type: str | None,
        flexible: bool,
        indent: str,
    ) -> None:
        # kio writes null for any array that is None, nullable or not.
        null = "b'\\x00'" if flexible else "b'\\xff\\xff\\xff\\xff'"
        self.emit(indent, f"v = {value}", "if v is None:", f"    buf += {null}", "else:")
        inner = indent + "    "
        if flexible:
            self.compact_length("v", inner)
        else:
            self.emit(inner, "buf += INT32(len(v))")
        if element is not None:
            function = self.compiler._function(element)
            self.emit(inner, "for x in v:", f"    {function}(out, buf, x)")
            return
        assert kafka_type is not None
        fixed = _FIXED.get(kafka_type)
        if fixed is not None and fixed[1] is None:
            packer = self.compiler._constant("ARRAY", _array_packer(fixed[0]))
            self.emit(inner, f"buf += {packer}(v)")
            return
        self.emit(inner, "for x in v:")
        # Array elements are never null (kio writes them with the non-nullable writer).
        self.primitive(kafka_type, "x", False, flexible, inner + "    ")
        self.flush(inner + "    ")
