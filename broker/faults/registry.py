"""The armed faults of one broker and the hooks the request path asks (on the loop).

The connection asks once per request (`for_request`): a delay, a close, or an error for
the whole response. APIs whose responses carry an error per partition (Produce, Fetch,
ListOffsets, OffsetCommit) or per topic (Metadata) are asked per partition by their
handler (`RequestFaults.partition_error`), so that a fault for one partition fails that
partition only, as a real NOT_LEADER_OR_FOLLOWER would. A fault fires at most once per
request; `count` counts requests.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ErrorCode

from .error_responses import PARTITION_LEVEL_APIS, can_answer_error
from .model import Fault, FaultKind, FaultSpecError, api_name, parse_fault

log = logging.getLogger("brook.faults")


class RequestFaults:
    """What the armed faults do to one request. (Not a dataclass: one costs start-up
    time to create.)"""

    __slots__ = ("_fired_here", "api_key", "close", "delay_ms", "error", "partition_faults",
                 "registry", "where")  # fmt: skip

    def __init__(self, registry: FaultRegistry, api_key: int, where: str) -> None:
        self.registry = registry
        self.api_key = api_key
        self.where = where  # the client, for the log lines
        self.delay_ms = 0
        self.close: FaultKind | None = None
        self.error: ErrorCode | None = None  # the whole response's error
        # Error faults answered per partition by the API's handler.
        self.partition_faults: list[Fault] = []
        self._fired_here: set[int] = set()

    def partition_error(self, topic: str, partition: int | None = None) -> ErrorCode | None:
        """The error to answer for this partition (or topic), if a fault says so."""
        for fault in self.partition_faults:
            if not fault.matches_partition(topic, partition):
                continue
            if fault.id not in self._fired_here:
                if fault.exhausted:
                    continue
                self._fired_here.add(fault.id)
                self.registry.fired(fault, self.where)
            assert fault.error is not None
            return fault.error
        return None


class FaultRegistry:
    def __init__(self, clock: Callable[[], int], enabled: bool = False) -> None:
        self.clock = clock
        # admin.fault.injection.enable: a feature for tests, off unless switched on.
        self.enabled = enabled
        self._faults: list[Fault] = []  # every fault armed since the last clear
        self._next_id = 1
        self._append_gates: dict[int, asyncio.Future[None]] = {}
        self._expiries: dict[int, asyncio.TimerHandle] = {}

    # --- control ------------------------------------------------------------------------

    def add(self, spec: Mapping[str, Any]) -> Fault:
        if not self.enabled:
            raise FaultSpecError("Fault injection is off: set admin.fault.injection.enable=true")
        fault = parse_fault(spec, self._next_id, self.clock())
        if fault.kind is FaultKind.ERROR:
            assert fault.api is not None
            if not can_answer_error(fault.api):
                raise FaultSpecError(
                    f"{api_name(fault.api)} has no error to inject: its response carries no"
                    " error of its own"
                )
            if fault.topic is not None and fault.api not in PARTITION_LEVEL_APIS:
                raise FaultSpecError(
                    f"{api_name(fault.api)} has no topics to match: leave out topic and partition"
                )
        self._next_id += 1
        self._faults.append(fault)
        if fault.duration_ms:
            self._expiries[fault.id] = asyncio.get_running_loop().call_later(
                fault.duration_ms / 1000, self._expire, fault
            )
        log.info("Fault #%d armed: %s", fault.id, fault.describe())
        return fault

    def remove(self, fault_id: int) -> None:
        """Disarm one fault (and forget it)."""
        handle = self._expiries.pop(fault_id, None)
        if handle is not None:
            handle.cancel()
        self._faults = [fault for fault in self._faults if fault.id != fault_id]
        self._release_appends()

    def listing(self) -> dict[str, Any]:
        """What is armed, and every fault since the last clear with what fired."""
        now = self.clock()
        return {
            "armed": [f.as_json() for f in self._faults if self._armed(f, now)],
            "faults": [f.as_json() for f in self._faults],
        }

    def clear(self) -> int:
        armed = sum(1 for f in self._faults if self._armed(f, self.clock()))
        for handle in self._expiries.values():
            handle.cancel()
        self._expiries.clear()
        self._faults.clear()
        self._release_appends()
        log.info("Faults cleared (%d armed)", armed)
        return armed

    def _expire(self, fault: Fault) -> None:
        self._expiries.pop(fault.id, None)
        fault.ended = True
        log.info("Fault #%d (%s) ended after %d ms", fault.id, fault.describe(), fault.duration_ms)
        if fault.kind is FaultKind.PAUSE_APPENDS:
            self._release_appends()

    def _armed(self, fault: Fault, now_ms: int) -> bool:
        return not fault.exhausted and not fault.expired(now_ms)

    def _active(self, kind: FaultKind) -> list[Fault]:
        now = self.clock()
        return [f for f in self._faults if f.kind is kind and self._armed(f, now)]

    def fired(self, fault: Fault, where: str) -> None:
        fault.fired += 1
        remaining = f", {fault.count - fault.fired} left" if fault.count else ""
        log.warning("Fault #%d fired on %s: %s%s", fault.id, where, fault.describe(), remaining)

    # --- hooks --------------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        return not self._faults

    def refuse_connection(self, peer: str) -> bool:
        """Whether a new connection is closed at once (the broker is "down")."""
        if not self._faults:
            return False
        for fault in self._active(FaultKind.REFUSE_CONNECTIONS):
            self.fired(fault, f"a connection from {peer}")
            return True
        return False

    def for_request(self, api_key: int, where: str) -> RequestFaults | None:
        if not self._faults:
            return None
        faults = RequestFaults(self, api_key, where)
        for fault in self._active(FaultKind.DELAY):
            if fault.matches_api(api_key):
                faults.delay_ms = max(faults.delay_ms, fault.delay_ms)
                self.fired(fault, where)
        for kind in (FaultKind.CLOSE_MID_RESPONSE, FaultKind.CLOSE_AFTER_RESPONSE):
            for fault in self._active(kind):
                if fault.matches_api(api_key) and faults.close is None:
                    faults.close = kind
                    self.fired(fault, where)
        for fault in self._active(FaultKind.ERROR):
            if not fault.matches_api(api_key):
                continue
            if api_key in PARTITION_LEVEL_APIS:
                faults.partition_faults.append(fault)
            elif faults.error is None:
                faults.error = fault.error
                faults.delay_ms = max(faults.delay_ms, fault.delay_ms)
                self.fired(fault, where)
        if not (faults.delay_ms or faults.close or faults.error or faults.partition_faults):
            return None
        return faults

    def append_gate(self, topic: str, partition: int) -> asyncio.Future[None] | None:
        """A future to wait on before appending to the partition while its appends are
        paused (a stalled disk), or None."""
        if not self._faults:
            return None  # the produce path's case: nothing armed, nothing to look at
        for fault in self._active(FaultKind.PAUSE_APPENDS):
            if fault.matches_partition(topic, partition):
                self.fired(fault, f"an append to {topic}-{partition}")
                gate = self._append_gates.get(fault.id)
                if gate is None:
                    gate = asyncio.get_running_loop().create_future()
                    self._append_gates[fault.id] = gate
                return gate
        return None

    def _release_appends(self) -> None:
        live = {f.id for f in self._active(FaultKind.PAUSE_APPENDS)}
        for fault_id in list(self._append_gates):
            if fault_id not in live:
                gate = self._append_gates.pop(fault_id)
                if not gate.done():
                    gate.set_result(None)


def request_label(api_key: int, peer: str, client_id: str | None) -> str:
    return f"{api_name(ApiKey(api_key))} from {peer} (client {client_id!r})"
