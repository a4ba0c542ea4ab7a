"""The client quota managers (Kafka's ClientQuotaManager for Produce and Fetch bytes,
ClientRequestQuotaManager for handler time, ControllerMutationQuotaManager for topic
changes: mutations.py, ConnectionQuotas' per-IP rates: connections.py) and the hooks the
connection calls.

A request is measured only while some quota is configured (`ClientQuotas.enabled`): the
connection checks that one attribute and does nothing else otherwise. Each manager finds
the quota of a (user, client id) by Kafka's precedence (entities.py), keeps one sampled
rate per metric tags, and on a violation answers the time the client must wait, by
Kafka's formula X = (O - T) / T * W: the delay that brings the observed rate O back to
the quota T over the window W the rate was measured on.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Iterator
from typing import Any

from brook.protocol.api_table import ApiKey

from .connections import ConnectionRateQuotas
from .entities import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    QuotaResolver,
    sanitize,
)
from .mutations import MUTATING_APIS, STRICT_FROM, ControllerMutationQuotaManager, MutationQuota
from .rate import SampledRate

log = logging.getLogger("brook.quotas")

# The first version of each API whose client waits out throttle_time_ms itself
# (KIP-219, AbstractResponse.shouldClientThrottle); to older versions the broker answers
# late instead. APIs not listed have honoured it from their first version.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 3,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.SASL_AUTHENTICATE: 1,
}

# Requests no client quota applies to: the SASL exchange (no user yet) and requests
# between brokers (Kafka exempts what needs ClusterAction).
REQUEST_EXEMPT = frozenset(
    {
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.CONTROLLED_SHUTDOWN,
        ApiKey.WRITE_TXN_MARKERS,
    }
)


INT32_MAX = 2**31 - 1

# Senders remembered before the memo starts again (client ids are the clients' choice).
MAX_SENDERS = 10_000
# Kafka's quota sensors expire after an hour without a recording
# (ClientQuotaManager.InactiveSensorExpirationTimeSeconds); idle ones are looked for
# once a minute, on a recording.
INACTIVE_MS = 3600 * 1000.0
EXPIRY_CHECK_MS = 60 * 1000.0


def client_throttles(api_key: int, api_version: int) -> bool:
    return api_version >= CLIENT_THROTTLES_FROM.get(api_key, 0)


class ClientQuotaManager:
    """One quota type: its sensors and the quota each (user, client id) is held to."""

    def __init__(
        self, quota_type: str, key: str, samples: int, window_ms: float, max_throttle_ms: float
    ) -> None:
        self.quota_type = quota_type  # Kafka's metric group: Produce, Fetch, Request
        self.key = key
        self._samples = samples
        self._window_ms = window_ms
        self._max_throttle_ms = max_throttle_ms
        self._resolver = QuotaResolver(key)
        self.rates: dict[tuple[str, str], SampledRate] = {}
        # Metric tags -> [throttle time answered in total (ms), throttled responses].
        self.throttles: dict[tuple[str, str], list[float]] = {}
        self._next_expiry_ms = 0.0

    def expire_inactive(self, now_ms: float) -> None:
        """Forget the sensors of senders silent for an hour, as Kafka's metrics expire
        them (quota sensors' inactive-sensor expiration): a broker whose clients come
        and go with new ids keeps only those it has heard from lately."""
        self._next_expiry_ms = now_ms + EXPIRY_CHECK_MS
        idle = [tags for tags, rate in self.rates.items() if rate.idle_ms(now_ms) > INACTIVE_MS]
        for tags in idle:
            del self.rates[tags]
            self.throttles.pop(tags, None)
        if idle:
            log.debug("%s quota: forgot %d inactive sensors", self.quota_type, len(idle))

    def update(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        self._resolver.update(configs)

    def quota(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """The metric tags and quota of a (sanitized) user and client id, if any."""
        return self._resolver.quota(user, client_id)

    def max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most one response may carry (Kafka's getMaxValueInQuotaWindow): the quota
        over all windows but the current one; unbounded without a quota."""
        found = self.quota(user, client_id)
        if found is None:
            return float("inf")
        return found[1] * (self._samples - 1) * self._window_ms / 1000

    def record(self, user: str, client_id: str, value: float, now_ms: float) -> int:
        """Record `value` and answer the throttle time in ms (0: within quota)."""
        found = self.quota(user, client_id)
        if found is None:
            return 0
        if now_ms >= self._next_expiry_ms:
            self.expire_inactive(now_ms)
        tags, bound = found
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = SampledRate(self._samples, self._window_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = (observed - bound) / bound * rate.window_size_ms(now_ms)
        # throttle_time_ms is an int32 on the wire (Kafka's toInt saturates there too).
        throttle_ms = round(min(throttle, self._max_throttle_ms, INT32_MAX))
        counts = self.throttles.setdefault(tags, [0.0, 0.0])
        counts[0] += throttle_ms
        counts[1] += 1
        log.debug(
            "%s quota of user %r client %r violated: %.1f > %s; throttled %d ms",
            self.quota_type,
            tags[0],
            tags[1],
            observed,
            bound,
            throttle_ms,
        )
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float, now_ms: float) -> None:
        """Take back what a response that will not carry it recorded (a throttled Fetch)."""
        found = self.quota(user, client_id)
        if found is not None and (rate := self.rates.get(found[0])) is not None:
            rate.record(-value, now_ms)


class QuotaRequest:
    """What the hook keeps about one request between its arrival and its response.
    (A plain slotted class: a dataclass costs start-up time to create.)"""

    __slots__ = ("client_id", "from_replica", "handler_seconds", "request_exempt", "size",
                 "started", "user")  # fmt: skip

    def __init__(
        self,
        user: str,
        client_id: str,
        size: int,
        started: float,
        request_exempt: bool = False,
        from_replica: bool = False,
    ) -> None:
        self.user = user
        self.client_id = client_id
        self.size = size
        self.started = started
        self.handler_seconds = 0.0
        self.request_exempt = request_exempt
        self.from_replica = from_replica


class ClientQuotas:
    """The three managers, the configs they share, and the connection's hook."""

    def __init__(self, samples: int, window_seconds: int) -> None:
        window_ms = window_seconds * 1000.0
        unbounded = float("inf")
        self.produce = ClientQuotaManager(
            "Produce", PRODUCER_BYTE_RATE, samples, window_ms, unbounded
        )
        self.fetch = ClientQuotaManager("Fetch", CONSUMER_BYTE_RATE, samples, window_ms, unbounded)
        # Kafka bounds a request-time throttle by one window.
        self.request = ClientQuotaManager(
            "Request", REQUEST_PERCENTAGE, samples, window_ms, window_ms
        )
        self.mutations = ControllerMutationQuotaManager(samples, window_ms)
        self.connections = ConnectionRateQuotas(samples, window_ms)
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        # (principal name, client id) -> (sanitized user, sanitized client id, whether
        # any quota applies to them): most senders of a broker with quotas have none.
        self._senders: dict[tuple[str, str | None], tuple[str, str, bool]] = {}
        # Whether any quota is configured: the one thing the connection checks.
        self.enabled = False

    def managers(self) -> Iterator[ClientQuotaManager]:
        yield self.produce
        yield self.fetch
        yield self.request

    def update(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        """The configs now in force (read from ZooKeeper or the local file)."""
        self.configs = {entity: dict(values) for entity, values in configs.items() if values}
        for manager in self.managers():
            manager.update(self.configs)
        self.mutations.update(self.configs)
        self.connections.update(self.configs)
        self._senders = {}
        # IP quotas are a new connection's business, not a request's.
        self.enabled = any(entity.ip is None for entity in self.configs)

    # --- the connection's hook ---------------------------------------------------------

    def request_started(self, ctx: Any, body: Any, size: int) -> QuotaRequest | None:
        """What to measure of a request; None when no quota applies to its sender."""
        key = (ctx.principal.name, ctx.client_id)
        sender = self._senders.get(key)
        if sender is None:
            if len(self._senders) >= MAX_SENDERS:
                self._senders.clear()
            user, client_id = sanitize(key[0]), sanitize(key[1] or "")
            limited = any(m.quota(user, client_id) is not None for m in self.managers()) or (
                self.mutations.quota(user, client_id) is not None
            )
            sender = self._senders[key] = (user, client_id, limited)
        user, client_id, limited = sender
        if not limited:
            return None
        api_key = ctx.api_key
        from_replica = api_key == ApiKey.FETCH and _replica_id(body) >= 0
        return QuotaRequest(
            user=user,
            client_id=client_id,
            size=size,
            started=time.perf_counter(),
            request_exempt=api_key in REQUEST_EXEMPT
            or from_replica
            or (api_key == ApiKey.PRODUCE and getattr(body, "acks", 1) == 0),
            from_replica=from_replica,
        )

    def mutation_quota(self, ctx: Any) -> MutationQuota | None:
        """What a CreateTopics, CreatePartitions or DeleteTopics request's changes are
        held to (None: no quota applies to its sender)."""
        request = ctx.quota
        if request is None or ctx.api_key not in MUTATING_APIS:
            return None
        strict = ctx.api_version >= STRICT_FROM[ctx.api_key]
        return MutationQuota(self.mutations, request.user, request.client_id, strict)

    def handled(self, request: QuotaRequest) -> None:
        # Time the handler held the loop: Kafka's request-handler thread time. What an
        # awaiting handler waits for (a long poll, acks) is not the client's use of it.
        request.handler_seconds = time.perf_counter() - request.started

    def throttle(self, ctx: Any, request: QuotaRequest, response: Any) -> tuple[Any, int]:
        """Record the request against its quotas; the response (with throttle_time_ms,
        or emptied for a throttled Fetch as Kafka does) and the throttle time in ms."""
        now_ms = time.monotonic() * 1000
        user, client_id = request.user, request.client_id
        request_ms = 0
        if not request.request_exempt:
            # Kafka records nanoseconds * 100 / 1e9: percent of one thread per second.
            request_ms = self.request.record(user, client_id, request.handler_seconds * 100, now_ms)
        api_key = ctx.api_key
        bandwidth_ms = 0
        if api_key == ApiKey.PRODUCE:
            bandwidth_ms = self.produce.record(user, client_id, request.size, now_ms)
        elif api_key == ApiKey.FETCH and not request.from_replica:
            size = _fetched_bytes(response)
            bandwidth_ms = self.fetch.record(user, client_id, size, now_ms)
            if max(bandwidth_ms, request_ms) > 0:
                # The records are not sent: the client fetches them again after its wait.
                self.fetch.unrecord(user, client_id, size, now_ms)
                response = _with_fields(response, responses=())
        elif api_key in MUTATING_APIS:
            bandwidth_ms = self.mutations.throttle_ms(user, client_id, now_ms)
        throttle_ms = max(bandwidth_ms, request_ms)
        if throttle_ms > 0:
            response = _with_fields(
                response, throttle_time=datetime.timedelta(milliseconds=throttle_ms)
            )
        return response, throttle_ms


def _replica_id(body: Any) -> int:
    replica_id = getattr(body, "replica_id", -1)
    if replica_id is None or replica_id < 0:
        state = getattr(body, "replica_state", None)
        replica_id = getattr(state, "replica_id", -1) if state is not None else -1
    return int(replica_id)


def _fetched_bytes(response: Any) -> int:
    return sum(
        len(partition.records)
        for topic in getattr(response, "responses", ())
        for partition in topic.partitions
        if partition.records is not None
    )


def _with_fields(response: Any, **fields: Any) -> Any:
    if not dataclasses.is_dataclass(response) or isinstance(response, type):
        return response  # NO_RESPONSE (acks=0): nothing to tell
    known = response.__dataclass_fields__
    wanted = {name: value for name, value in fields.items() if name in known}
    return dataclasses.replace(response, **wanted) if wanted else response
