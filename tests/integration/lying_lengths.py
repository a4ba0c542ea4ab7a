"""Requests whose array, string or bytes lengths lie, for every served API version.

Each frame is a valid request in which every array holds one element and every string
and bytes field one byte, except that one length is replaced by the largest the field's
encoding can say: the varint `ff ff ff ff 0f` (four billion) for a compact length,
0x7fffffff for an int32 array or bytes length, 0x7fff for an int16 string length.
The length's position is found without any parser: the value is encoded twice, the
second time with that one array holding two elements (or that one string two bytes),
and the first byte where the encodings differ ends (int) or is (varint) the length.
Tagged fields are left as they are (their size would differ first).
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


def _grown(value: Any) -> Iterator[tuple[str, str, Any]]:
    """(path, kafka kind, value with that one length grown) for each length in `value`."""
    for field in fields(value):
        if get_field_tag(field) is not None:
            # A tagged field's own size comes before its length and would differ first;
            # kio reads the field by its schema, so a lying size is no risk of its own.
            continue
        kind = classify_field(field)
        current = getattr(value, field.name)
        path = f"{type(value).__name__}.{field.name}"
        if isinstance(kind, EntityTupleField | PrimitiveTupleField):
            yield path, "array", dataclasses.replace(value, **{field.name: current * 2})
        else:
            kafka_type = None if isinstance(kind, EntityField) else get_schema_field_type(field)
            if kafka_type in _TWO:
                twice = _TWO[kafka_type]
                yield path, kafka_type, dataclasses.replace(value, **{field.name: twice})
        # Lengths further down: inside the one element of an array, or a struct.
        if isinstance(kind, EntityTupleField):
            for inner_path, inner_kind, inner in _grown(current[0]):
                yield inner_path, inner_kind, dataclasses.replace(value, **{field.name: (inner,)})
        elif isinstance(kind, EntityField):
            for inner_path, inner_kind, inner in _grown(current):
                yield inner_path, inner_kind, dataclasses.replace(value, **{field.name: inner})


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
    request_class = request_type(api, version)
    flexible = request_class.__flexible__
    base = filled(request_class)
    encoded = encode(base)
    prefix = header(api, version)
    frames = []
    for path, kind, grown in _grown(base):
        other = encode(grown)
        at = next(i for i, (a, b) in enumerate(zip(encoded, other, strict=False)) if a != b)
        if flexible:  # a one-byte varint (1 or 2 + 1) differs where it starts
            body = encoded[:at] + HUGE_VARINT + encoded[at + 1 :]
        elif kind == "string":  # int16, differs in its low byte
            body = encoded[: at - 1] + HUGE_INT16 + encoded[at + 1 :]
        else:  # int32 array or bytes length
            body = encoded[: at - 3] + HUGE_INT32 + encoded[at + 1 :]
        frames.append(LyingFrame(api, version, path, kind, prefix + body))
    return frames


def every_lying_frame() -> list[LyingFrame]:
    return [
        frame
        for api, served in SERVED.items()
        for version in range(served.min_version, served.max_version + 1)
        for frame in lying_frames(api, version)
    ]
