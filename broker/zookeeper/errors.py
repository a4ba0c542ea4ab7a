"""Why a broker cannot start with ZooKeeper. No kazoo here: the CLI catches these."""

from __future__ import annotations


class ZooKeeperStartupError(Exception):
    """The broker cannot join the cluster; the message says why (one log line)."""


class ZooKeeperClientTimeoutError(ZooKeeperStartupError):
    """No ZooKeeper session within zookeeper.connection.timeout.ms (Kafka's
    ZooKeeperClientTimeoutException)."""


class BrokerIdRegisteredError(ZooKeeperStartupError):
    """Another live broker holds /brokers/ids/<broker.id> (Kafka: NodeExistsException
    after "node already exists and owner ... does not match current session")."""


class ClusterIdError(ZooKeeperStartupError):
    """/cluster/id cannot be read (Kafka: "Failed to get cluster id from Zookeeper")."""
