"""Connection-creation rate quotas per IP (KIP-612, Kafka's ConnectionQuotas):
`connection_creation_rate` connections per second from one address, set on
/config/ips/<ip> or the default /config/ips/<default>.

Each new connection is recorded on its address's sampled rate (the windows of the
other client quotas); one that takes the rate over the quota is held, unread, for the
throttle time (Kafka's formula, bounded by one window) and then closed, as Kafka's
acceptor does. The inter-broker listener is exempt when the broker has other listeners.
"""

from __future__ import annotations

import logging

from .entities import CONNECTION_CREATION_RATE, DEFAULT, QuotaEntity
from .rate import SampledRate

log = logging.getLogger("brook.quotas")

# As the other quota sensors: an address silent for an hour is forgotten (looked for
# once a minute, on a new connection).
INACTIVE_MS = 3600 * 1000.0
EXPIRY_CHECK_MS = 60 * 1000.0


class ConnectionRateQuotas:
    def __init__(self, samples: int, window_ms: float) -> None:
        self._samples = samples
        self._window_ms = window_ms
        self._quotas: dict[str, float] = {}  # address (or DEFAULT) -> connections/s
        self.rates: dict[str, SampledRate] = {}
        self.throttled: dict[str, int] = {}  # address -> connections held and closed
        self._next_expiry_ms = 0.0
        # Whether any IP quota is configured: the one thing a new connection checks.
        self.enabled = False

    def update(self, configs: dict[QuotaEntity, dict[str, float]]) -> None:
        self._quotas = {
            entity.ip: values[CONNECTION_CREATION_RATE]
            for entity, values in configs.items()
            if entity.ip is not None and CONNECTION_CREATION_RATE in values
        }
        self.enabled = bool(self._quotas)

    def quota(self, address: str) -> float | None:
        """The address's own quota, else the default IP quota, else none."""
        found = self._quotas.get(address)
        return found if found is not None else self._quotas.get(DEFAULT)

    def record(self, address: str, now_ms: float) -> int:
        """Count a new connection from `address`; the ms to hold it before closing it
        (0: it is within the quota and served)."""
        bound = self.quota(address)
        if bound is None:
            return 0
        if now_ms >= self._next_expiry_ms:
            self._expire(now_ms)
        rate = self.rates.get(address)
        if rate is None:
            rate = self.rates[address] = SampledRate(self._samples, self._window_ms)
        rate.record(1, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:
            return 0
        throttle = (observed - bound) / bound * rate.window_size_ms(now_ms)
        self.throttled[address] = self.throttled.get(address, 0) + 1
        return max(1, round(min(throttle, self._window_ms)))

    def _expire(self, now_ms: float) -> None:
        self._next_expiry_ms = now_ms + EXPIRY_CHECK_MS
        for address in [a for a, r in self.rates.items() if r.idle_ms(now_ms) > INACTIVE_MS]:
            del self.rates[address]
            self.throttled.pop(address, None)
