"""Reject a null where the message schema does not allow one, as Kafka's parser does.

Kafka's generated readers throw "non-nullable field X was serialized as null" when an
array, string or bytes field that is not nullable in the request's version arrives with
a negative length, and the request fails to parse. kio's native reader hands such a
field over as None, so the check runs here, once per request, from a plan made once per
message type: only the fields that could hold such a null, or lead to one, are visited.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from functools import cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from .errors import InvalidRequestError

# A step of a plan: (field name, may be null, the plan of its entity or of each entity of
# its array (None when there is nothing to check inside), is an array).
_Step = tuple[str, bool, Any, bool]


def check_non_nullable(entity: Any) -> None:
    """Raise InvalidRequestError naming the first non-nullable field that holds None."""
    _check(entity, _plan(type(entity)), "")


def _check(entity: Any, plan: tuple[_Step, ...], prefix: str) -> None:
    for name, nullable, nested, is_array in plan:
        value = getattr(entity, name)
        if value is None:
            if nullable:
                continue
            raise InvalidRequestError(f"non-nullable field {prefix}{name} was serialized as null")
        if nested is None:
            continue
        if is_array:
            for item in value:
                _check(item, nested, f"{prefix}{name}.")
        else:
            _check(value, nested, f"{prefix}{name}.")


@cache
def _plan(entity_type: type) -> tuple[_Step, ...]:
    steps = []
    for field in fields(entity_type):
        nullable, inner = _unwrap_optional(field.type)
        # Tagged fields are optional by nature: an absent one takes its default.
        tagged = "tag" in field.metadata
        is_array = get_origin(inner) is tuple
        element = get_args(inner)[0] if is_array else inner
        nested = _plan(element) if is_dataclass(element) else None
        if nested == ():
            nested = None
        can_be_null = is_array or field.metadata.get("kafka_type") in ("string", "bytes", "records")
        if (can_be_null and not nullable and not tagged) or nested is not None:
            steps.append((field.name, nullable or tagged, nested, is_array))
    return tuple(steps)


def _unwrap_optional(annotation: Any) -> tuple[bool, Any]:
    if get_origin(annotation) in (UnionType, Union):
        args = [arg for arg in get_args(annotation) if arg is not NoneType]
        if len(args) == 1 and len(args) != len(get_args(annotation)):
            return True, args[0]
    return False, annotation
