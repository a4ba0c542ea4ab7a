"""Requests whose array, string or bytes lengths lie, for every served API version.

Each frame is a valid request in which every array holds one element and every string
and bytes field one byte, except that one length is replaced by the largest the field's
encoding can say: the varint `ff ff ff ff 0f` (four billion) for a compact length,
0x7fffffff for an int32 array or bytes length, 0x7fff for an int16 string length.
The length's position is found without any parser: the value is encoded twice, once
with that one array holding one element (or that one string one byte) and once two,
and the first byte where the encodings differ ends (int) or is (varint) the length.
Tagged fields are left as they are (their size would differ first). The fuzzer does
the same to the requests it generates.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
)
from kio.static.primitive import Records

from brook.protocol.api_table import SERVED, ApiKey, request_type

HUGE_VARINT = b"\xff\xff\xff\xff\x0f"
HUGE_INT32 = b"\x7f\xff\xff\xff"
HUGE_INT16 = b"\x7f\xff"

_ONE: dict[str, Any] = {
    "bool": True,
    "int8": 1,
    "int16": 1,
    "int32": 1,
    "int64": 1,
    "uint8": 1,
    "uint16": 1,
    "uint32": 1,
    "uint64": 1,
    "float64": 1.0,
    "string": "a",
    "bytes": b"a",
    "records": Records(b"a"),
    "uuid": uuid.UUID(int=1),
    "timedelta_i32": datetime.timedelta(milliseconds=1),
    "timedelta_i64": datetime.timedelta(milliseconds=1),
}
_TWO: dict[str, Any] = {"string": "aa", "bytes": b"aa", "records": Records(b"aa")}


def filled(entity_type: type) -> Any:
    """An entity with every array of one element, every optional struct and tagged field
    present, and every primitive 1 (strings "a"), so each length is in the encoding."""
    values = {}
    for field in fields(entity_type):
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            values[field.name] = (filled(kind.type_),)
        elif isinstance(kind, EntityField):
            values[field.name] = filled(kind.type_)
        elif isinstance(kind, PrimitiveTupleField):
            values[field.name] = (_ONE[get_schema_field_type(field)],)
        else:
            values[field.name] = _ONE[get_schema_field_type(field)]
    return entity_type(**values)


def length_variants(value: Any) -> Iterator[tuple[str, str, Any, Any]]:
    """For each length in `value` (an entity of any content): its path, its kind, and
    the value with that one array of one element or string of one byte, then of two.

    The two encodings are alike up to that length, which is 1 in the first and 2 in
    the second, so the first byte where they differ ends (int) or is (varint) it.
    Empty and null arrays and structs are filled first, so that every length in the
    schema has a place in the encoding.
    """
    for field in fields(value):
        if get_field_tag(field) is not None:
            # A tagged field's own size comes before its length and would differ first;
            # kio reads the field by its schema, so a lying size is no risk of its own.
            continue
        kind = classify_field(field)
        current = getattr(value, field.name)
        path = f"{type(value).__name__}.{field.name}"
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            if current:
                element = current[0]
            elif isinstance(kind, EntityTupleField):
                element = filled(kind.type_)
            else:
                element = _ONE[get_schema_field_type(field)]
            one = dataclasses.replace(value, **{field.name: (element,)})
            two = dataclasses.replace(value, **{field.name: (element, element)})
            yield path, "array", one, two
            if isinstance(kind, EntityTupleField):
                for inner_path, inner_kind, inner_one, inner_two in length_variants(element):
                    yield (
                        inner_path,
                        inner_kind,
                        dataclasses.replace(value, **{field.name: (inner_one,)}),
                        dataclasses.replace(value, **{field.name: (inner_two,)}),
                    )
        elif isinstance(kind, EntityField):
            inner_value = current if current is not None else filled(kind.type_)
            for inner_path, inner_kind, inner_one, inner_two in length_variants(inner_value):
                yield (
                    inner_path,
                    inner_kind,
                    dataclasses.replace(value, **{field.name: inner_one}),
                    dataclasses.replace(value, **{field.name: inner_two}),
                )
        else:
            kafka_type = get_schema_field_type(field)
            if kafka_type in _TWO:
                one = dataclasses.replace(value, **{field.name: _ONE[kafka_type]})
                two = dataclasses.replace(value, **{field.name: _TWO[kafka_type]})
                yield path, kafka_type, one, two


def lie(one: Any, two: Any, kind: str, null: bool = False) -> bytes:
    """`one` encoded, with the length that differs from `two` replaced by a huge one
    (or by null: 0 for a compact length, -1 for an int16 or int32 one)."""
    encoded = encode(one)
    other = encode(two)
    at = next(i for i, (a, b) in enumerate(zip(encoded, other, strict=False)) if a != b)
    # A null has no content: the one element or byte after the length goes too.
    after = at + 1 + (len(other) - len(encoded) if null else 0)
    if type(one).__flexible__:  # a one-byte varint (1 or 2, + 1) differs where it starts
        return encoded[:at] + (b"\x00" if null else HUGE_VARINT) + encoded[after:]
    if kind == "string":  # int16, differs in its low byte
        return encoded[: at - 1] + (b"\xff\xff" if null else HUGE_INT16) + encoded[after:]
    # an int32 array or bytes length
    return encoded[: at - 3] + (b"\xff\xff\xff\xff" if null else HUGE_INT32) + encoded[after:]


def encode(value: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(value))(buffer, value)
    return buffer.getvalue()


def header(api_key: int, version: int, client_id: str | None = "lying-lengths") -> bytes:
    request = request_type(api_key, version)
    header_type = request.__header_schema__
    return encode(
        header_type(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=1,
            client_id=client_id,
        )
    )


@dataclass(frozen=True)
class LyingFrame:
    api: ApiKey
    version: int
    path: str  # Entity.field whose length lies
    kind: str  # array, string, bytes or records
    frame: bytes  # without the size prefix

    @property
    def wire(self) -> bytes:
        return struct.pack(">i", len(self.frame)) + self.frame

    def __str__(self) -> str:
        return f"{self.api.name} v{self.version} {self.path} ({self.kind})"


def lying_frames(api: ApiKey, version: int) -> list[LyingFrame]:
    """One frame per length field of the request, that length replaced by a huge one."""
    prefix = header(api, version)
    return [
        LyingFrame(api, version, path, kind, prefix + lie(one, two, kind))
        for path, kind, one, two in length_variants(filled(request_type(api, version)))
    ]


def every_lying_frame() -> list[LyingFrame]:
    return [
        frame
        for api, served in SERVED.items()
        for version in range(served.min_version, served.max_version + 1)
        for frame in lying_frames(api, version)
    ]
