"""Faults a test arms on a running broker, and what fired.

A fault is given as JSON (the admin endpoint, `brook faults add`, the pytest plugin):

    {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 3, "topic": "t", "partition": 0}
    {"api": "Fetch", "delay_ms": 500}
    {"api": "Metadata", "close": "after_response"}      (or "mid_response")
    {"refuse_connections": true, "duration_ms": 2000}   (the broker is "down" for 2 s)
    {"pause_appends": true, "topic": "t", "partition": 0}  (a stalled disk)

APIs and errors by Kafka's names (ApiKeys, Errors). `count` 0 or absent arms a fault until
it is cleared; `duration_ms` bounds the connection refusal and the paused appends. Each
firing logs one line.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Mapping
from typing import Any, TypedDict

from brook.protocol.api_table import SERVED, ApiKey
from brook.protocol.errors import ErrorCode

log = logging.getLogger("brook.faults")


class FaultSpecError(ValueError):
    """A fault that cannot be armed: the message says what is wrong."""


class FaultKind(enum.Enum):
    ERROR = "error"
    DELAY = "delay"
    CLOSE_AFTER_RESPONSE = "close_after_response"
    CLOSE_MID_RESPONSE = "close_mid_response"
    REFUSE_CONNECTIONS = "refuse_connections"
    PAUSE_APPENDS = "pause_appends"


_CLOSE_MODES = {
    "after_response": FaultKind.CLOSE_AFTER_RESPONSE,
    "mid_response": FaultKind.CLOSE_MID_RESPONSE,
}
_KNOWN_KEYS = frozenset(
    {
        "api",
        "error",
        "count",
        "topic",
        "partition",
        "delay_ms",
        "close",
        "refuse_connections",
        "pause_appends",
        "duration_ms",
    }
)


class _FaultCommon(TypedDict):
    """What every kind of fault is armed with (parse_fault passes it to Fault)."""

    id: int
    api: ApiKey | None
    topic: str | None
    partition: int | None
    count: int
    duration_ms: int
    armed_at_ms: int
    spec: dict[str, Any]


class Fault:
    """One armed fault and what it has done. (A plain slotted class: a dataclass costs
    start-up time to create, and this module loads with every broker.)"""

    __slots__ = ("api", "armed_at_ms", "count", "delay_ms", "duration_ms", "ended", "error",
                 "fired", "id", "kind", "partition", "spec", "topic")  # fmt: skip

    def __init__(
        self,
        *,
        id: int,
        kind: FaultKind,
        api: ApiKey | None = None,  # None: every API
        error: ErrorCode | None = None,
        delay_ms: int = 0,
        topic: str | None = None,
        partition: int | None = None,
        count: int = 0,  # 0: until cleared
        duration_ms: int = 0,  # 0: until cleared
        armed_at_ms: int = 0,
        spec: dict[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.kind = kind
        self.api = api
        self.error = error
        self.delay_ms = delay_ms
        self.topic = topic
        self.partition = partition
        self.count = count
        self.duration_ms = duration_ms
        self.armed_at_ms = armed_at_ms
        self.fired = 0
        self.ended = False  # its duration ran out
        self.spec = spec if spec is not None else {}

    @property
    def exhausted(self) -> bool:
        return self.count > 0 and self.fired >= self.count

    def expired(self, now_ms: int) -> bool:
        return self.ended or (
            self.duration_ms > 0 and now_ms >= self.armed_at_ms + self.duration_ms
        )

    def matches_api(self, api_key: int) -> bool:
        return self.api is None or self.api == api_key

    def matches_partition(self, topic: str, partition: int | None) -> bool:
        if self.topic is not None and self.topic != topic:
            return False
        return self.partition is None or partition is None or self.partition == partition

    def describe(self) -> str:
        parts = [self.kind.value]
        if self.api is not None:
            parts.append(api_name(self.api))
        if self.error is not None:
            parts.append(self.error.name.upper())
        if self.delay_ms:
            parts.append(f"{self.delay_ms} ms")
        if self.topic is not None:
            parts.append(
                f"{self.topic}-{self.partition}" if self.partition is not None else self.topic
            )
        return " ".join(parts)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            **self.spec,
            "kind": self.kind.value,
            "fired": self.fired,
            "remaining": max(self.count - self.fired, 0) if self.count else None,
        }


def api_name(api_key: ApiKey) -> str:
    """Kafka's name of an API (ApiKeys' `name`): PRODUCE -> Produce."""
    return "".join(part.capitalize() for part in api_key.name.split("_"))


def parse_api(text: Any) -> ApiKey:
    if isinstance(text, int) and not isinstance(text, bool):
        try:
            key = ApiKey(text)
        except ValueError:
            raise FaultSpecError(f"Unknown API key {text}") from None
    elif isinstance(text, str):
        wanted = re.sub(r"[^a-z]", "", text.lower())
        found = [key for key in ApiKey if key.name.replace("_", "").lower() == wanted]
        if not found:
            raise FaultSpecError(f"Unknown API {text!r} (use Kafka's names, e.g. Produce, Fetch)")
        key = found[0]
    else:
        raise FaultSpecError(f"api must be an API name or key, not {text!r}")
    if key not in SERVED:
        raise FaultSpecError(f"Brook does not serve {api_name(key)}")
    return key


def parse_error(text: Any) -> ErrorCode:
    if isinstance(text, int) and not isinstance(text, bool):
        try:
            return ErrorCode(text)
        except ValueError:
            raise FaultSpecError(f"Unknown error code {text}") from None
    if not isinstance(text, str):
        raise FaultSpecError(f"error must be an error name or code, not {text!r}")
    try:
        error = ErrorCode[text.strip().lower()]
    except KeyError:
        raise FaultSpecError(
            f"Unknown error {text!r} (use Kafka's names, e.g. NOT_LEADER_OR_FOLLOWER)"
        ) from None
    if error is ErrorCode.none:
        raise FaultSpecError("error NONE injects nothing")
    return error


def parse_fault(spec: Mapping[str, Any], fault_id: int, now_ms: int) -> Fault:
    """A Fault from its JSON form; FaultSpecError says what is wrong."""
    if not isinstance(spec, Mapping):
        raise FaultSpecError("A fault is a JSON object")
    unknown = sorted(set(spec) - _KNOWN_KEYS)
    if unknown:
        raise FaultSpecError(f"Unknown fault fields: {', '.join(unknown)}")
    api = parse_api(spec["api"]) if spec.get("api") is not None else None
    count = _non_negative(spec, "count")
    duration_ms = _non_negative(spec, "duration_ms")
    delay_ms = _non_negative(spec, "delay_ms")
    topic = spec.get("topic")
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise FaultSpecError("topic must be a topic name")
    partition = spec.get("partition")
    if partition is not None:
        if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
            raise FaultSpecError("partition must be a partition number")
        if topic is None:
            raise FaultSpecError("partition needs a topic")
    common: _FaultCommon = {
        "id": fault_id,
        "api": api,
        "topic": topic,
        "partition": partition,
        "count": count,
        "duration_ms": duration_ms,
        "armed_at_ms": now_ms,
        "spec": dict(spec),
    }
    kinds = [
        name
        for name in ("error", "close", "refuse_connections", "pause_appends")
        if spec.get(name) not in (None, False)
    ]
    if len(kinds) > 1:
        raise FaultSpecError(f"One fault at a time: {', '.join(kinds)} given together")
    kind = kinds[0] if kinds else None
    if kind == "error":
        if api is None:
            raise FaultSpecError("An error fault needs the api it answers")
        return Fault(
            kind=FaultKind.ERROR, error=parse_error(spec["error"]), delay_ms=delay_ms, **common
        )
    if kind == "close":
        mode = _CLOSE_MODES.get(spec["close"])
        if mode is None:
            raise FaultSpecError('close must be "after_response" or "mid_response"')
        return Fault(kind=mode, **common)
    if kind == "refuse_connections":
        if api is not None or topic is not None:
            raise FaultSpecError("refuse_connections applies to the whole broker")
        return Fault(kind=FaultKind.REFUSE_CONNECTIONS, **common)
    if kind == "pause_appends":
        if topic is None:
            raise FaultSpecError("pause_appends needs a topic (and optionally a partition)")
        return Fault(kind=FaultKind.PAUSE_APPENDS, **common)
    if delay_ms:
        return Fault(kind=FaultKind.DELAY, delay_ms=delay_ms, **common)
    raise FaultSpecError(
        "Say what to inject: error, delay_ms, close, refuse_connections or pause_appends"
    )


def _non_negative(spec: Mapping[str, Any], name: str) -> int:
    value = spec.get(name, 0)
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise FaultSpecError(f"{name} must be a whole number, 0 or more")
    return value
