"""The controller mutation quota (KIP-599, Kafka's ControllerMutationQuotaManager):
`controller_mutation_rate` partitions per second that a (user, client id) may create
(CreateTopics, CreatePartitions) or delete (DeleteTopics).

Kafka's two modes, by request version: strict (CreateTopics v6+, CreatePartitions v3+,
DeleteTopics v5+) refuses each topic asked for while the sender's credits are below zero
with THROTTLING_QUOTA_EXCEEDED, a change that starts with credits left is allowed
whole; permissive (older versions, whose clients do not know the error) makes every
change and throttles the response instead. Either way the response carries the time
the credits take to come back to zero.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

from brook.protocol.api_table import ApiKey
from brook.protocol.errors import ThrottlingQuotaExceededError

from .entities import CONTROLLER_MUTATION_RATE, QuotaEntity, QuotaResolver
from .token_bucket import TokenBucket

log = logging.getLogger("brook.quotas")

# The first version of each API that takes THROTTLING_QUOTA_EXCEEDED (strict mode).
STRICT_FROM = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
MUTATING_APIS = frozenset(STRICT_FROM)
INACTIVE_MS = 3600 * 1000.0  # as the other quota sensors


class ControllerMutationQuotaManager:
    def __init__(self, samples: int, window_ms: float) -> None:
        self._samples = samples
        self._window_ms = window_ms
        self._resolver = QuotaResolver(CONTROLLER_MUTATION_RATE)
        self.buckets: dict[tuple[str, str], TokenBucket] = {}
        # Metric tags -> [throttle time answered in total (ms), throttled responses].
        self.throttles: dict[tuple[str, str], list[float]] = {}

    def update(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        self._resolver.update(configs)

    def quota(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """The metric tags and rate of a (sanitized) user and client id, if any."""
        return self._resolver.quota(user, client_id)

    def _bucket(self, tags: tuple[str, str], now_ms: float) -> TokenBucket:
        bucket = self.buckets.get(tags)
        if bucket is None:
            idle = [t for t, b in self.buckets.items() if b.idle_ms(now_ms) > INACTIVE_MS]
            for t in idle:
                del self.buckets[t]
                self.throttles.pop(t, None)
            bucket = self.buckets[tags] = TokenBucket()
        return bucket

    def _burst(self, rate: float) -> float:
        return rate * self._samples * self._window_ms / 1000

    def record(
        self, user: str, client_id: str, partitions: int, strict: bool, now_ms: float
    ) -> None:
        """Spend `partitions` credits; in strict mode refuse (ThrottlingQuotaExceededError)
        while none are left."""
        found = self.quota(user, client_id)
        if found is None:
            return
        tags, rate = found
        burst = self._burst(rate)
        bucket = self._bucket(tags, now_ms)
        if strict and bucket.measure(rate, burst, now_ms) < 0:
            log.debug(
                "Controller mutation quota of user %r client %r exhausted: %d partitions refused",
                tags[0],
                tags[1],
                partitions,
            )
            raise ThrottlingQuotaExceededError("The throttling quota has been exceeded.")
        bucket.record(partitions, rate, burst, now_ms)

    def throttle_ms(self, user: str, client_id: str, now_ms: float) -> int:
        """The time the sender's credits take to come back to zero (0: some are left)."""
        found = self.quota(user, client_id)
        if found is None:
            return 0
        tags, rate = found
        bucket = self.buckets.get(tags)
        if bucket is None:
            return 0
        tokens = bucket.measure(rate, self._burst(rate), now_ms)
        if tokens >= 0:
            return 0
        throttle = round(-tokens / rate * 1000)
        counts = self.throttles.setdefault(tags, [0.0, 0.0])
        counts[0] += throttle
        counts[1] += 1
        return throttle


class MutationQuota(NamedTuple):
    """The quota one request's topic changes are held to (see `mutation_quota`). A
    NamedTuple: a frozen dataclass would cost start-up time to create."""

    manager: ControllerMutationQuotaManager
    user: str
    client_id: str
    strict: bool

    def record(self, partitions: int, now_ms: float) -> None:
        self.manager.record(self.user, self.client_id, partitions, self.strict, now_ms)
