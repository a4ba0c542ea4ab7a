"""Kafka's BrokerState values (`kafka.server:type=KafkaServer,name=BrokerState`), which
/metrics reports and /v1/ready names."""

from __future__ import annotations

import enum


class BrokerState(enum.IntEnum):
    NOT_RUNNING = 0
    STARTING = 1
    RECOVERY = 2
    RUNNING = 3
    PENDING_CONTROLLED_SHUTDOWN = 6
    SHUTTING_DOWN = 7

    @property
    def title(self) -> str:
        """Kafka's name of the state (BrokerState.toString)."""
        return _TITLES[self]


_TITLES = {
    BrokerState.NOT_RUNNING: "NotRunning",
    BrokerState.STARTING: "Starting",
    BrokerState.RECOVERY: "RecoveringFromUncleanShutdown",
    BrokerState.RUNNING: "Running",
    BrokerState.PENDING_CONTROLLED_SHUTDOWN: "PendingControlledShutdown",
    BrokerState.SHUTTING_DOWN: "BrokerShuttingDown",
}
