"""Kafka's RequestMetrics, per API: requests by version, the error codes responses
carry, and the time each request spent in each stage, kept as plain counts.

The stages are Kafka's, as they fall in Brook's one-loop connection (connection.py):

    request queue   from its bytes' arrival to its handler's start (it waits while an
                    earlier request of its connection is in flight, or its response
                    bytes drain)
    local           the handler's own work on the loop
    remote          waiting after that: an acks=all commit, a long-polling Fetch, a
                    JoinGroup waiting for its group, an injected delay
    response send   encoding the response and handing it to the socket's transport
    total           all of it

A request of a Fetch counts under "Fetch" and under "FetchConsumer" or "FetchFollower",
as Kafka counts it; the errors under "Fetch" only. Only made (and called by the
connection) when the admin endpoint is on: without it, a request pays nothing here.
"""

from __future__ import annotations

import dataclasses
import time
import types
import typing
from collections.abc import Callable
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.storage.time_histogram import TimeHistogram

STAGES = ("total", "request_queue", "local", "remote", "response_send")


class ApiStats:
    """One request name's counts: read by /metrics, written on the loop."""

    __slots__ = ("errors", "requests", "times")

    def __init__(self) -> None:
        self.requests: dict[int, int] = {}  # by version
        self.errors: dict[int, int] = {}  # by error code, NONE included (as Kafka)
        self.times = {stage: TimeHistogram() for stage in STAGES}


class RequestTiming:
    """When a request arrived, started and left its handler (perf_counter seconds)."""

    __slots__ = ("api_key", "handled", "names", "received", "started", "version")

    def __init__(self, api_key: int, version: int, names: tuple[str, ...], received: float) -> None:
        self.api_key = api_key
        self.version = version
        self.names = names
        self.received = received
        self.started = time.perf_counter()
        self.handled = 0.0


class RequestMetrics:
    def __init__(self) -> None:
        self.apis: dict[str, ApiStats] = {}

    def start(self, api_key: int, version: int, body: Any, received: float) -> RequestTiming:
        """A request whose handler runs now; `received`: when its bytes arrived."""
        names: tuple[str, ...]
        if api_key == ApiKey.FETCH:
            follower = _fetch_replica_id(body) >= 0
            names = (API_NAMES[api_key], "FetchFollower" if follower else "FetchConsumer")
        else:
            names = (API_NAMES.get(api_key) or str(api_key),)
        return RequestTiming(api_key, version, names, received)

    def record(self, timing: RequestTiming, response: Any, ready: float) -> None:
        """The response (None: a request answered with none, acks=0) went to the
        transport; `ready`: when the handler's answer was there."""
        sent = time.perf_counter()
        handled = timing.handled or ready
        stages = (
            (sent - timing.received) * 1000,
            (timing.started - timing.received) * 1000,
            (handled - timing.started) * 1000,
            (ready - handled) * 1000,
            (sent - ready) * 1000,
        )
        apis = self.apis
        for name in timing.names:
            stats = apis.get(name)
            if stats is None:
                stats = apis[name] = ApiStats()
            stats.requests[timing.version] = stats.requests.get(timing.version, 0) + 1
            times = stats.times
            for stage, value in zip(STAGES, stages, strict=True):
                times[stage].observe(value)
        if response is not None:
            errors = apis[timing.names[0]].errors
            for code in error_counter(type(response))(response):
                errors[code] = errors.get(code, 0) + 1


def _fetch_replica_id(body: Any) -> int:
    replica_state = getattr(body, "replica_state", None)  # v15+
    if replica_state is not None:
        return int(replica_state.replica_id)
    return int(getattr(body, "replica_id", -1))


def _api_name(key: ApiKey) -> str:
    """Kafka's ApiKeys name of an API: API_VERSIONS -> ApiVersions."""
    return "".join(part.capitalize() for part in key.name.split("_"))


API_NAMES: dict[int, str] = {key.value: _api_name(key) for key in ApiKey}


# --- the error codes of a response ---------------------------------------------------------

ErrorCounter = Callable[[Any], list[int]]
_COUNTERS: dict[type, ErrorCounter] = {}


def error_counter(response_type: type) -> ErrorCounter:
    """A function listing every `error_code` a response of this type carries (top level,
    per topic, per partition...), as Kafka's errorCounts counts them; made once per
    type from kio's schema, so a response costs only the attribute reads."""
    counter = _COUNTERS.get(response_type)
    if counter is None:
        counter = _COUNTERS[response_type] = _make_counter(_error_paths(response_type))
    return counter


def _error_paths(entity_type: type, depth: int = 0) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    if depth > 8 or not dataclasses.is_dataclass(entity_type):
        return paths
    for field in dataclasses.fields(entity_type):
        if field.name == "error_code":
            paths.append((field.name,))
            continue
        nested = _entity_in(field.type)
        if nested is not None:
            paths += [(field.name, *rest) for rest in _error_paths(nested, depth + 1)]
    return paths


def _entity_in(annotation: Any) -> type | None:
    """The kio entity a field holds: itself, in a tuple, or optional."""
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _entity_in(arg)
            if found is not None:
                return found
    return None


def _make_counter(paths: list[tuple[str, ...]]) -> ErrorCounter:
    def count(response: Any) -> list[int]:
        codes: list[int] = []
        for path in paths:
            _collect(response, path, 0, codes)
        return codes

    return count


def _collect(value: Any, path: tuple[str, ...], step: int, codes: list[int]) -> None:
    if value is None:
        return
    if isinstance(value, tuple):
        for item in value:
            _collect(item, path, step, codes)
        return
    found = getattr(value, path[step], None)
    if step == len(path) - 1:
        if found is not None:
            codes.append(int(found))
        return
    _collect(found, path, step + 1, codes)
